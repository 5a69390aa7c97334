//! The command endpoints: successes, every error code, idempotent retries.

use pm_tests::{on_both_backends, TestDb, TestService};
use serde_json::json;

async fn actor_then_conversation(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let actor = svc
        .post(
            None,
            "/v1/actors",
            &json!({"kind": "human", "display_name": "Alice"}),
        )
        .await;
    assert_eq!(actor.status, 201, "{}", actor.text);
    assert_eq!(
        actor.header("location"),
        Some(format!("/v1/actors/{}", actor.id()).as_str())
    );
    assert!(actor.header("x-event-position").is_some());
    let conversation = svc
        .post(
            None,
            "/v1/conversations",
            &json!({"actor_ids": [actor.id()], "title": "Fix the bug"}),
        )
        .await;
    assert_eq!(conversation.status, 201, "{}", conversation.text);
    assert_eq!(conversation.json["title"], "Fix the bug");
    svc.stop().await;
}

on_both_backends!(actor_then_conversation);
