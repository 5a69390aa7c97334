//! Idempotency: ids derived from external identities (identical repeat → `200` with the
//! same entity and no new fact; other content → `409`), and the `Idempotency-Key` header.

use futures::future::join_all;
use pm_tests::{all_tokens, on_both_backends, Response, TestDb, TestService, ADMIN, INGRESS};
use serde_json::{json, Value};
use uuid::Uuid;

use std::time::{Duration, Instant};

use crate::support::{actor, assert_problem, conversation, created, post_with, settled_count, url};

/// Posts `body` twice: the first answer is `201`, the repeat `200` with the same entity and
/// `Location`, and the log holds one fact. Returns the entity.
async fn created_then_repeated(svc: &TestService, path: &str, body: &Value) -> Value {
    let first = svc.post(None, path, body).await;
    let id = created(&first);
    assert_eq!(Uuid::parse_str(&id).expect("uuid").get_version_num(), 5);
    let before = settled_count(svc).await;
    let repeat = svc.post(None, path, body).await;
    assert_eq!(repeat.status, 200, "identical repeat: {}", repeat.text);
    assert_eq!(repeat.json, first.json, "the existing entity");
    assert_eq!(repeat.header("location"), first.header("location"));
    assert_eq!(settled_count(svc).await, before, "the repeat wrote a fact");
    first.json
}

async fn conversations_with_an_external_identity_are_idempotent(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc).await;
    let body = json!({"actor_ids": [a], "title": "Issue 9", "external_source": "github",
        "external_id": "acme/web#9", "status": "open"});
    let entity = created_then_repeated(&svc, "/v1/conversations", &body).await;

    // Deterministic: another, empty store derives the same id.
    let db2 = TestDb::sqlite().await.expect("sqlite");
    let svc2 = TestService::start(&db2, "").await;
    let a2 = actor(&svc2).await;
    let mut body2 = body.clone();
    body2["actor_ids"] = json!([a2]);
    let again = svc2.post(None, "/v1/conversations", &body2).await;
    assert_eq!(created(&again), entity["id"].as_str().expect("id"));
    svc2.stop().await;

    // Same source, other id: another conversation.
    let mut other = body.clone();
    other["external_id"] = json!("acme/web#10");
    assert_ne!(
        created(&svc.post(None, "/v1/conversations", &other).await),
        entity["id"]
    );

    // Only one half of the external identity: a fresh UUIDv7 each time.
    let half = json!({"actor_ids": [a], "title": "Half", "external_source": "github"});
    for _ in 0..2 {
        let id = created(&svc.post(None, "/v1/conversations", &half).await);
        assert_eq!(Uuid::parse_str(&id).expect("uuid").get_version_num(), 7);
    }

    let mut changed = body.clone();
    changed["title"] = json!("Issue 9, renamed");
    let r = svc.post(None, "/v1/conversations", &changed).await;
    assert_problem(&r, 409, "conversation_exists");
    svc.stop().await;
}

async fn messages_with_an_external_identity_are_idempotent(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc).await;
    let (c1, c2) = (conversation(&svc, &a).await, conversation(&svc, &a).await);
    let body = json!({"actor_id": a, "content": "Hello", "external_identity": "slack:1"});
    let path = format!("/v1/conversations/{c1}/messages");
    let entity = created_then_repeated(&svc, &path, &body).await;

    // The same external identity in another conversation is another message.
    let path2 = format!("/v1/conversations/{c2}/messages");
    assert_ne!(created(&svc.post(None, &path2, &body).await), entity["id"]);

    let mut changed = body.clone();
    changed["content"] = json!("Hello, edited");
    assert_problem(
        &svc.post(None, &path, &changed).await,
        409,
        "already_exists",
    );
    svc.stop().await;
}

async fn actors_with_an_external_identity_are_idempotent(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let body = json!({"kind": "human", "display_name": "Carol", "external_identity": "gh:carol"});
    created_then_repeated(&svc, "/v1/actors", &body).await;
    let mut changed = body.clone();
    changed["display_name"] = json!("Caroline");
    let r = svc.post(None, "/v1/actors", &changed).await;
    assert_problem(&r, 409, "already_exists");
    svc.stop().await;
}

async fn keyed(svc: &TestService, token: &str, key: &str, body: &Value) -> Response {
    post_with(
        svc,
        Some(token),
        "/v1/actors",
        body,
        &[("idempotency-key", key)],
    )
    .await
}

async fn an_idempotency_key_replays_the_first_answer(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let body = json!({"kind": "human", "display_name": "Dora"});
    let first = keyed(&svc, INGRESS, "key-1", &body).await;
    created(&first);
    assert!(first.header("idempotent-replayed").is_none());
    let before = settled_count(&svc).await;
    let again = keyed(&svc, INGRESS, "key-1", &body).await;
    assert_eq!(again.status, first.status, "{}", again.text);
    assert_eq!(again.json, first.json);
    assert_eq!(again.header("location"), first.header("location"));
    assert_eq!(
        again.header("x-event-position"),
        first.header("x-event-position")
    );
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.header("content-type"), first.header("content-type"));
    assert_eq!(settled_count(&svc).await, before, "the replay wrote a fact");

    // A rejected first answer is replayed too.
    let path = format!("/v1/conversations/{}/messages", Uuid::now_v7());
    let bad = json!({"actor_id": Uuid::now_v7(), "content": "x"});
    let headers = [("idempotency-key", "key-2")];
    let first = post_with(&svc, Some(INGRESS), &path, &bad, &headers).await;
    assert_problem(&first, 404, "conversation_not_found");
    let again = post_with(&svc, Some(INGRESS), &path, &bad, &headers).await;
    assert_problem(&again, 404, "conversation_not_found");
    svc.stop().await;
}

async fn an_idempotency_key_reused_for_another_body_is_422(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    created(
        &keyed(
            &svc,
            INGRESS,
            "key-1",
            &json!({"kind": "human", "display_name": "Eve"}),
        )
        .await,
    );
    let before = settled_count(&svc).await;
    let other = json!({"kind": "human", "display_name": "Mallory"});
    let r = keyed(&svc, INGRESS, "key-1", &other).await;
    assert_problem(&r, 422, "idempotency_key_reused");
    assert_eq!(settled_count(&svc).await, before);
    svc.stop().await;
}

async fn idempotency_keys_are_per_role(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let body = json!({"kind": "ai", "display_name": "Bot"});
    let ingress = keyed(&svc, INGRESS, "shared-key", &body).await;
    let admin = keyed(&svc, ADMIN, "shared-key", &body).await;
    assert_ne!(
        created(&ingress),
        created(&admin),
        "admin's request ran on its own"
    );
    assert!(admin.header("idempotent-replayed").is_none());
    // Each role still replays its own answer.
    assert_eq!(
        keyed(&svc, ADMIN, "shared-key", &body).await.json,
        admin.json
    );
    assert_eq!(
        keyed(&svc, INGRESS, "shared-key", &body).await.json,
        ingress.json
    );
    svc.stop().await;
}

async fn concurrent_deliveries_of_one_message_make_one_fact(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc).await;
    let c = conversation(&svc, &a).await;
    let path = format!("/v1/conversations/{c}/messages");
    let body = json!({"actor_id": a, "content": "Once", "external_identity": "mail:77"});
    let before = settled_count(&svc).await;
    let answers = join_all((0..10).map(|_| svc.post(None, &path, &body))).await;
    let created = answers.iter().filter(|r| r.status == 201).count();
    assert_eq!(created, 1, "exactly one delivery creates the message");
    for r in &answers {
        assert!(matches!(r.status, 200 | 201), "{}: {}", r.status, r.text);
        assert_eq!(r.json, answers[0].json);
    }
    assert_eq!(settled_count(&svc).await, before + 1);
    svc.stop().await;
}

async fn concurrent_requests_with_one_key_make_one_fact(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let body = json!({"kind": "human", "display_name": "Once"});
    let before = settled_count(&svc).await;
    let answers = join_all((0..10).map(|_| keyed(&svc, INGRESS, "racing-key", &body))).await;
    let first = answers.iter().find(|r| r.status == 201).expect("one 201");
    for r in &answers {
        match r.status {
            201 => assert_eq!(r.json, first.json),
            _ => assert_problem(r, 409, "idempotency_key_in_use"),
        }
    }
    assert_eq!(settled_count(&svc).await, before + 1);
    let replay = keyed(&svc, INGRESS, "racing-key", &body).await;
    assert_eq!(replay.json, first.json);
    svc.stop().await;
}

/// A key whose first answer was a rejection replays it even after the state changed so
/// that the command would now succeed: the append finds the key's record and writes
/// nothing.
async fn a_keyed_rejection_is_replayed_after_the_state_changed(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let a = actor(&svc).await;
    // A message to a conversation that does not exist yet, under its derived id.
    let c = pm_domain::ids::conversation_id("github", "acme/web#77");
    let path = format!("/v1/conversations/{c}/messages");
    let body = json!({"actor_id": a, "content": "Too early"});
    let headers = [("idempotency-key", "too-early")];
    let first = post_with(&svc, Some(ADMIN), &path, &body, &headers).await;
    assert_problem(&first, 404, "conversation_not_found");
    let started = json!({"actor_ids": [a], "title": "Issue 77", "external_source": "github",
        "external_id": "acme/web#77"});
    let r = svc.post(Some(ADMIN), "/v1/conversations", &started).await;
    assert_eq!(created(&r), c.to_string());
    let before = settled_count(&svc).await;
    let again = post_with(&svc, Some(ADMIN), &path, &body, &headers).await;
    assert_problem(&again, 404, "conversation_not_found");
    assert_eq!(again.json, first.json);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(settled_count(&svc).await, before, "the repeat wrote a fact");
    // The same command with another key runs.
    let other = [("idempotency-key", "in-time")];
    created(&post_with(&svc, Some(ADMIN), &path, &body, &other).await);
    svc.stop().await;
}

/// Clients that go away mid-request — each gives up after a longer while, so the cut falls
/// before, during and after the command's append — leave every key answerable: a retry
/// gets one `201` (after `409 idempotency_key_in_use` while the first request still runs
/// here), and each key makes exactly one fact.
async fn a_keyed_command_whose_client_went_away_is_answered_once_on_retry(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let before = settled_count(&svc).await;
    let rounds: u64 = 12;
    let mut cut = 0;
    for round in 0..rounds {
        let key = format!("gone-{round}");
        let body = json!({"kind": "human", "display_name": format!("Gone {round}")});
        let impatient = reqwest::Client::builder()
            .timeout(Duration::from_micros(300 * round))
            .build()
            .expect("client");
        let first = impatient
            .post(url(&svc, "/v1/actors"))
            .bearer_auth(INGRESS)
            .header("idempotency-key", &key)
            .json(&body)
            .send()
            .await;
        if first.as_ref().is_err_and(reqwest::Error::is_timeout) {
            cut += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let retry = loop {
            let r = keyed(&svc, INGRESS, &key, &body).await;
            if r.status != 409 || Instant::now() > deadline {
                break r;
            }
            assert_problem(&r, 409, "idempotency_key_in_use");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(retry.status, 201, "round {round}: {}", retry.text);
        let again = keyed(&svc, INGRESS, &key, &body).await;
        assert_eq!(again.json, retry.json, "round {round}: one answer per key");
    }
    eprintln!("{cut} of {rounds} first requests were cut off by their client");
    // Round 0 gives up at once; at least one later client must have been cut off too.
    assert!(
        cut >= 2,
        "the clients went away: only {cut} of {rounds} were cut off"
    );
    assert_eq!(
        settled_count(&svc).await,
        before + rounds as usize,
        "one fact per key"
    );
    svc.stop().await;
}

on_both_backends!(
    a_keyed_command_whose_client_went_away_is_answered_once_on_retry,
    a_keyed_rejection_is_replayed_after_the_state_changed,
    concurrent_deliveries_of_one_message_make_one_fact,
    concurrent_requests_with_one_key_make_one_fact,
    conversations_with_an_external_identity_are_idempotent,
    messages_with_an_external_identity_are_idempotent,
    actors_with_an_external_identity_are_idempotent,
    an_idempotency_key_replays_the_first_answer,
    an_idempotency_key_reused_for_another_body_is_422,
    idempotency_keys_are_per_role,
);

/// Two replicas running requests with one key at once (each replica runs its own at once,
/// without a claim): the first append wins, every other request answers with that same
/// `201` (or `409 idempotency_key_in_use` while a request with it runs on its replica),
/// and each key makes exactly one fact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_racing_with_one_key_make_one_fact_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let replicas = [
        TestService::start(&db, &all_tokens()).await,
        TestService::start(&db, &all_tokens()).await,
    ];
    let body = json!({"kind": "human", "display_name": "Raced"});
    let before = settled_count(&replicas[0]).await;
    let rounds = 6;
    for round in 0..rounds {
        let key = format!("two-replicas-{round}");
        let answers = join_all((0..8).map(|i| keyed(&replicas[i % 2], INGRESS, &key, &body))).await;
        let first = answers
            .iter()
            .find(|r| r.status == 201)
            .unwrap_or_else(|| panic!("round {round}: no 201 among {answers:?}"));
        for r in &answers {
            match r.status {
                201 => assert_eq!(r.json, first.json, "round {round}: another entity"),
                _ => assert_problem(r, 409, "idempotency_key_in_use"),
            }
        }
    }
    assert_eq!(
        settled_count(&replicas[0]).await,
        before + rounds,
        "one fact per key"
    );
    for replica in replicas {
        replica.stop().await;
    }
}
