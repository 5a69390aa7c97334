//! The boundary (TRUST.md): failed authentications slowed down per address, and a
//! conversation's participants bounded — at the HTTP boundary, on both stores.

use pm_tests::{all_tokens, on_both_backends, TestDb, TestService, ADMIN, INGRESS};
use serde_json::json;

use crate::support::assert_problem;

/// A client whose connections come from `address` (any of 127.0.0.0/8 reaches the service).
fn client_from(address: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(address))
        .build()
        .expect("client")
}

async fn status(client: &reqwest::Client, svc: &TestService, token: &str) -> reqwest::Response {
    client
        .get(format!("{}/v1/me", svc.base))
        .bearer_auth(token)
        .send()
        .await
        .expect("answered")
}

async fn failed_authentications_hold_their_address_for_the_minute(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let guesser = client_from([127, 0, 0, 2]);
    let other = client_from([127, 0, 0, 3]);
    // No credential at all is not a guess.
    for _ in 0..30 {
        let r = guesser
            .get(format!("{}/v1/me", svc.base))
            .send()
            .await
            .expect("answered");
        assert_eq!(r.status().as_u16(), 401);
    }
    // Twenty wrong tokens (one of them at the console's sign-in) are answered 401 …
    for i in 0..19 {
        let r = status(&guesser, &svc, &format!("guess-{i:04}-aaaaaaaa")).await;
        assert_eq!(r.status().as_u16(), 401);
    }
    let r = guesser
        .post(format!("{}/console/session", svc.base))
        .json(&json!({"token": "guess-console-aaaaaaaa"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(r.status().as_u16(), 401);
    // … then the address is held, even with a valid token, for the rest of the minute.
    for token in ["guess-more-aaaaaaaa", ADMIN] {
        let r = status(&guesser, &svc, token).await;
        assert_eq!(r.status().as_u16(), 429, "{token}");
        let wait: u64 = r
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .expect("Retry-After in seconds");
        assert!((1..=60).contains(&wait), "Retry-After {wait}");
        let body: serde_json::Value = r.json().await.expect("problem");
        assert_eq!(body["code"], "too_many_requests");
    }
    let r = guesser
        .post(format!("{}/console/session", svc.base))
        .json(&json!({"token": ADMIN}))
        .send()
        .await
        .expect("answered");
    assert_eq!(r.status().as_u16(), 429, "the console's sign-in too");
    // Another address is not affected: its valid token works, its wrong one is a 401.
    assert_eq!(status(&other, &svc, ADMIN).await.status().as_u16(), 200);
    assert_eq!(
        status(&other, &svc, "wrong-one-aaaaaaaa")
            .await
            .status()
            .as_u16(),
        401
    );
    svc.stop().await;
}

async fn a_conversation_has_at_most_100_actors(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let actor = svc
        .post(
            Some(INGRESS),
            "/v1/actors",
            &json!({"kind": "human", "display_name": "Ann"}),
        )
        .await
        .id();
    let many: Vec<String> = (0..101).map(|_| actor.clone()).collect();
    let r = svc
        .post(
            Some(INGRESS),
            "/v1/conversations",
            &json!({"actor_ids": many, "title": "Crowd"}),
        )
        .await;
    assert_problem(&r, 422, "validation_failed");
    assert!(
        r.text.contains("actor_ids") && r.text.contains("100"),
        "{}",
        r.text
    );
    let hundred: Vec<String> = (0..100).map(|_| actor.clone()).collect();
    let r = svc
        .post(
            Some(INGRESS),
            "/v1/conversations",
            &json!({"actor_ids": hundred, "title": "Full"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    svc.stop().await;
}

async fn open_mode_answers_only_loopback_hosts_and_origins(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let body = json!({"kind": "human", "display_name": "Ann"});
    let port = svc.base.rsplit(':').next().unwrap_or_default().to_string();
    // DNS rebinding: a page's own name pointed at 127.0.0.1.
    let r = svc
        .client
        .get(format!("{}/v1/conversations", svc.base))
        .header("host", format!("evil.example:{port}"))
        .send()
        .await
        .expect("answered");
    assert_eq!(r.status().as_u16(), 403);
    // A cross-site write, and a loopback page's write.
    let post = |origin: &'static str| {
        svc.client
            .post(format!("{}/v1/actors", svc.base))
            .header("origin", origin)
            .json(&body)
            .send()
    };
    let r = post("https://evil.example").await.expect("answered");
    assert_eq!(r.status().as_u16(), 403);
    let r = post("http://localhost:3000").await.expect("answered");
    assert_eq!(r.status().as_u16(), 201);
    let written = crate::support::events(&svc, "types=project_manager.actor.registered").await;
    assert_eq!(
        written.len(),
        1,
        "the refused write wrote nothing: {written:?}"
    );
    // No "simple" cross-site request either: a text/plain body is refused on every route.
    let r = crate::support::post_raw(
        &svc,
        None,
        "/v1/webhooks",
        "text/plain",
        r#"{"url": "https://hooks.example.com/x"}"#,
    )
    .await;
    assert_problem(&r, 415, "unsupported_media_type");
    svc.stop().await;
}

/// Opens an event stream as `token`; answers the response (its body unread).
async fn open_stream(svc: &TestService, token: &str) -> reqwest::Response {
    svc.client
        .get(format!("{}/v1/events", svc.base))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("answered")
}

async fn a_principal_holds_a_bounded_number_of_streams_and_waiting_claims(db: TestDb) {
    let mut c = crate::support::config(&db);
    c.auth_tokens = all_tokens();
    c.max_streams_per_principal = 2;
    let svc = TestService::start_with(c).await;
    let first = open_stream(&svc, ADMIN).await;
    let second = open_stream(&svc, ADMIN).await;
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = open_stream(&svc, ADMIN).await;
    assert_eq!(third.status().as_u16(), 429);
    assert!(third.headers().contains_key("retry-after"));
    let body: serde_json::Value = third.json().await.expect("problem");
    assert_eq!(body["code"], "too_many_requests");
    // Another principal has its own share; JSON pages are not streams.
    assert_eq!(
        open_stream(&svc, pm_tests::ANALYST).await.status().as_u16(),
        200
    );
    assert_eq!(svc.get(Some(ADMIN), "/v1/events").await.status, 200);
    // A stream whose client went away gives its slot back (noticed at its next write).
    drop(first);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        svc.post(
            Some(ADMIN),
            "/v1/actors",
            &json!({"kind": "ai", "display_name": "Tick"}),
        )
        .await;
        let again = open_stream(&svc, ADMIN).await;
        if again.status().as_u16() == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the slot never came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    drop(second);

    // Waiting claims: two long-polls hold the share; a third is refused at once.
    let claim = |wait_ms: u64| {
        let svc = &svc;
        async move {
            svc.post(
                Some(pm_tests::LLM),
                "/v1/turns/claim",
                &json!({"wait_ms": wait_ms}),
            )
            .await
            .status
        }
    };
    let (a, b, refused) = tokio::join!(claim(1500), claim(1500), async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        claim(1500).await
    });
    assert_eq!((a, b, refused), (204, 204, 429));
    assert_eq!(
        claim(0).await,
        204,
        "a claim that does not wait holds nothing"
    );
    assert_eq!(claim(100).await, 204, "the share is free again");
    svc.stop().await;
}

on_both_backends!(
    a_principal_holds_a_bounded_number_of_streams_and_waiting_claims,
    failed_authentications_hold_their_address_for_the_minute,
    a_conversation_has_at_most_100_actors,
    open_mode_answers_only_loopback_hosts_and_origins,
);
