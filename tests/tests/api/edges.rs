//! HTTP edge errors as RFC 9457 problems: `400 malformed_json`, `415`, `413`, unknown
//! routes (`404`) and wrong methods (`405`).

use pm_tests::{on_both_backends, Response, TestDb, TestService};
use serde_json::json;

use crate::support::{assert_problem, buffer, config, created, post_raw, post_with, request};

/// A problem answer with `status` and some snake_case `code` (API.md lists none for
/// routing errors).
fn assert_some_problem(r: &Response, status: u16) {
    let code = r.code().to_string();
    assert!(
        !code.is_empty() && code.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
        "code {code:?} of {}",
        r.text
    );
    assert_problem(r, status, &code);
}

async fn bodies_that_are_not_json_are_400_or_415(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    for body in ["{\"kind\": \"human\",", "not json", "", "[1,"] {
        let r = post_raw(&svc, None, "/v1/actors", "application/json", body).await;
        assert_problem(&r, 400, "malformed_json");
    }
    let body = r#"{"kind": "human", "display_name": "Alice"}"#;
    let r = post_raw(&svc, None, "/v1/actors", "text/plain", body).await;
    assert_problem(&r, 415, "unsupported_media_type");
    let bare = svc
        .client
        .post(format!("{}/v1/actors", svc.base))
        .body(body);
    let r = buffer(bare.send().await.expect("sent")).await;
    assert_problem(&r, 415, "unsupported_media_type");
    let json_utf8 = "application/json; charset=utf-8";
    created(&post_raw(&svc, None, "/v1/actors", json_utf8, body).await);
    svc.stop().await;
}

async fn trailing_garbage_after_a_json_value_is_malformed_json(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    for body in ["{} {}", r#"{"kind": "human"} trailing"#] {
        let r = post_raw(&svc, None, "/v1/actors", "application/json", body).await;
        assert_problem(&r, 400, "malformed_json");
    }
    svc.stop().await;
}

async fn bodies_over_the_limit_are_413(db: TestDb) {
    let mut config = config(&db);
    config.max_body_bytes = 256;
    let svc = TestService::start_with(config).await;
    let small = json!({"kind": "human", "display_name": "Alice"});
    created(&svc.post(None, "/v1/actors", &small).await);
    let big = json!({"kind": "human", "display_name": "A".repeat(1000)});
    let r = svc.post(None, "/v1/actors", &big).await;
    assert_problem(&r, 413, "payload_too_large");
    // The unread rest of the body ends the connection: the client is told not to reuse it.
    assert_eq!(r.header("connection"), Some("close"));
    let keyed = post_with(&svc, None, "/v1/actors", &big, &[("idempotency-key", "k")]).await;
    assert_problem(&keyed, 413, "payload_too_large");
    assert_eq!(keyed.header("connection"), Some("close"));
    // Without Content-Length (chunked), the limit still holds.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(big.to_string().into_bytes())];
    let chunked = svc
        .client
        .post(format!("{}/v1/actors", svc.base))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)));
    let r = buffer(chunked.send().await.expect("sent")).await;
    assert_problem(&r, 413, "payload_too_large");
    svc.stop().await;
}

async fn unknown_routes_are_404_and_wrong_methods_405(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    for path in ["/v1/nothing", "/v2/actors", "/"] {
        let r = request(&svc, reqwest::Method::GET, path).await;
        assert_some_problem(&r, 404);
    }
    for (method, path, allow) in [
        (reqwest::Method::DELETE, "/v1/actors", "POST"),
        (reqwest::Method::PUT, "/v1/conversations", "POST"),
        (reqwest::Method::POST, "/v1/events", "GET"),
        (reqwest::Method::PATCH, "/v1/tasks/x/checkpoints", "POST"),
    ] {
        let r = request(&svc, method.clone(), path).await;
        assert_some_problem(&r, 405);
        let allowed = r.header("allow").unwrap_or_default();
        assert!(
            allowed.contains(allow),
            "{method} {path}: Allow {allowed:?}"
        );
    }
    svc.stop().await;
}

on_both_backends!(
    trailing_garbage_after_a_json_value_is_malformed_json,
    bodies_that_are_not_json_are_400_or_415,
    bodies_over_the_limit_are_413,
    unknown_routes_are_404_and_wrong_methods_405,
);
