//! The command endpoints' successes: `201`, `Location`, `X-Event-Position`, and the
//! entity with exactly the fields TRANSITIONS.md lists (optional ones omitted when absent).

use chrono::{DateTime, Duration, Utc};
use pm_tests::{on_both_backends, Response, TestDb, TestService, ADMIN};
use serde_json::json;
use uuid::Uuid;

use crate::support::{actor, assert_keys, created, task_checkpoint, world};

/// Asserts the answer is a creation with `Location: location` (or one ending in the id
/// under `location` when it ends with `/`) and a well-formed `X-Event-Position`.
fn assert_created(r: &Response, location: &str) {
    let id = created(r);
    assert!(
        r.header("content-type")
            .unwrap_or_default()
            .starts_with("application/json"),
        "{:?}",
        r.headers
    );
    let got = r.header("location").expect("Location header");
    if location.ends_with('/') {
        assert_eq!(got, format!("{location}{id}"));
    } else {
        assert_eq!(got, location);
    }
    let position = r.header("x-event-position").expect("X-Event-Position");
    assert!(
        !position.is_empty()
            && position.len() <= 64
            && position
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_punctuation()),
        "position {position:?}"
    );
}

/// Asserts an RFC 3339 UTC time with at least millisecond precision, near now.
fn assert_server_time(raw: &serde_json::Value) -> DateTime<Utc> {
    let raw = raw.as_str().expect("time is a string");
    let t = DateTime::parse_from_rfc3339(raw).expect("RFC 3339");
    assert!(raw.ends_with('Z'), "not UTC: {raw}");
    let fraction = raw.split('.').nth(1).unwrap_or_default();
    assert!(fraction.len() > 3, "less than millisecond precision: {raw}");
    let t = t.with_timezone(&Utc);
    assert!(
        (Utc::now() - t).abs() < Duration::seconds(30),
        "not now: {raw}"
    );
    t
}

fn version(id: &str) -> usize {
    Uuid::parse_str(id).expect("uuid").get_version_num()
}

async fn actors_are_registered(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let r = svc
        .post(
            None,
            "/v1/actors",
            &json!({"kind": "ai", "display_name": "Bot"}),
        )
        .await;
    assert_created(&r, &format!("/v1/actors/{}", r.id()));
    assert_keys(&r.json, &["id", "kind", "display_name", "created_at"]);
    assert_eq!(r.json["kind"], "ai");
    assert_eq!(r.json["display_name"], "Bot");
    assert_eq!(version(&r.id()), 7);
    assert_server_time(&r.json["created_at"]);

    let body = json!({"kind": "human", "display_name": "Alice", "external_identity": "gh:alice"});
    let r = svc.post(None, "/v1/actors", &body).await;
    assert_created(&r, "/v1/actors/");
    assert_keys(
        &r.json,
        &[
            "id",
            "kind",
            "display_name",
            "external_identity",
            "created_at",
        ],
    );
    assert_eq!(r.json["external_identity"], "gh:alice");
    assert_eq!(version(&r.id()), 5);
    svc.stop().await;
}

async fn conversations_are_started(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let (a, b) = (actor(&svc).await, actor(&svc).await);
    let r = svc
        .post(
            None,
            "/v1/conversations",
            &json!({"actor_ids": [a], "title": "Fix the bug"}),
        )
        .await;
    assert_created(&r, "/v1/conversations/");
    assert_keys(
        &r.json,
        &["id", "actor_ids", "title", "created_at", "updated_at"],
    );
    assert_eq!(r.json["actor_ids"], json!([a]));
    assert_eq!(r.json["title"], "Fix the bug");
    assert_eq!(version(&r.id()), 7);
    assert_eq!(
        assert_server_time(&r.json["created_at"]),
        assert_server_time(&r.json["updated_at"])
    );

    let full = json!({"actor_ids": [a, b], "title": "Ship it", "external_id": "issue/7",
        "external_source": "github", "status": "open", "organization": "acme"});
    let r = svc.post(None, "/v1/conversations", &full).await;
    assert_created(&r, "/v1/conversations/");
    assert_keys(
        &r.json,
        &[
            "id",
            "actor_ids",
            "title",
            "external_id",
            "external_source",
            "status",
            "organization",
            "created_at",
            "updated_at",
        ],
    );
    for field in ["external_id", "external_source", "status", "organization"] {
        assert_eq!(r.json[field], full[field], "{field}");
    }
    assert_eq!(r.json["actor_ids"], json!([a, b]));
    svc.stop().await;
}

async fn conversation_checkpoints_are_created(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let path = format!("/v1/conversations/{}/checkpoints", w.conversation);
    for kind in [
        "CONVERSATION_STARTED",
        "BEGIN_WORK",
        "NEED_INFORMATION",
        "CLOSE_CONVERSATION",
        "WORK_COMPLETED",
    ] {
        let body = json!({"checkpoint_type": kind, "summary": "Where we stand"});
        let r = svc.post(None, &path, &body).await;
        assert_created(&r, &format!("{path}/"));
        assert_keys(
            &r.json,
            &[
                "id",
                "conversation_id",
                "checkpoint_type",
                "summary",
                "created_at",
            ],
        );
        assert_eq!(r.json["conversation_id"], w.conversation.as_str());
        assert_eq!(r.json["checkpoint_type"], kind);
        assert_eq!(r.json["summary"], "Where we stand");
        assert_server_time(&r.json["created_at"]);
    }
    svc.stop().await;
}

async fn tasks_are_created(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let path = format!("/v1/conversations/{}/tasks", w.conversation);
    let body = json!({"checkpoint_id": w.begin_work, "instructions": "Write the patch"});
    let r = svc.post(None, &path, &body).await;
    assert_created(&r, "/v1/tasks/");
    assert_keys(
        &r.json,
        &[
            "id",
            "conversation_id",
            "checkpoint_id",
            "instructions",
            "created_at",
        ],
    );
    assert_eq!(r.json["conversation_id"], w.conversation.as_str());
    assert_eq!(r.json["checkpoint_id"], w.begin_work.as_str());
    assert_eq!(r.json["instructions"], "Write the patch");
    assert_server_time(&r.json["created_at"]);

    let body =
        json!({"checkpoint_id": w.begin_work, "instructions": "Review", "assigned_to": w.actor});
    let r = svc.post(None, &path, &body).await;
    assert_created(&r, "/v1/tasks/");
    assert_eq!(r.json["assigned_to"], w.actor.as_str());
    assert_eq!(r.json.as_object().map(|o| o.len()), Some(6), "{}", r.json);
    svc.stop().await;
}

async fn task_checkpoints_are_created(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    for kind in [
        "WORK_STARTED",
        "WORK_PAUSED",
        "WORK_COMPLETED",
        "WORK_REJECTED",
        "WORK_APPROVED",
    ] {
        let r = task_checkpoint(&svc, &w.task, kind).await;
        assert_created(&r, &format!("/v1/tasks/{}/checkpoints/", w.task));
        assert_keys(&r.json, &["id", "task_id", "type", "created_at"]);
        assert_eq!(r.json["task_id"], w.task.as_str());
        assert_eq!(r.json["type"], kind);
        assert_server_time(&r.json["created_at"]);
    }
    svc.stop().await;
}

async fn messages_are_added(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let path = format!("/v1/conversations/{}/messages", w.conversation);
    let prefix = format!("{path}/");

    let r = svc
        .post(None, &path, &json!({"actor_id": w.actor, "content": "Hi"}))
        .await;
    assert_created(&r, &prefix);
    assert_keys(
        &r.json,
        &["id", "time", "actor_id", "conversation_id", "content"],
    );
    assert_eq!(r.json["actor_id"], w.actor.as_str());
    assert_eq!(r.json["conversation_id"], w.conversation.as_str());
    assert_eq!(r.json["content"], "Hi");
    assert_server_time(&r.json["time"]);

    let body =
        json!({"actor_id": w.actor, "content": "Earlier", "time": "2024-05-01T12:34:56.789+02:00"});
    let r = svc.post(None, &path, &body).await;
    assert_created(&r, &prefix);
    let time = DateTime::parse_from_rfc3339(r.json["time"].as_str().expect("time"))
        .expect("RFC 3339")
        .with_timezone(&Utc);
    let want = DateTime::parse_from_rfc3339("2024-05-01T10:34:56.789Z").expect("time");
    assert_eq!(time, want, "the given time, in UTC: {}", r.json);
    assert!(r.json["time"].as_str().is_some_and(|t| t.ends_with('Z')));

    let body = json!({"actor_id": w.actor, "content": "On the task", "task_id": w.task,
        "external_identity": "slack:42"});
    let r = svc.post(Some(ADMIN), &path, &body).await;
    assert_created(&r, &prefix);
    assert_keys(
        &r.json,
        &[
            "id",
            "time",
            "actor_id",
            "conversation_id",
            "task_id",
            "content",
            "external_identity",
        ],
    );
    assert_eq!(r.json["task_id"], w.task.as_str());
    assert_eq!(r.json["external_identity"], "slack:42");
    assert_eq!(version(&r.id()), 5);
    svc.stop().await;
}

on_both_backends!(
    actors_are_registered,
    conversations_are_started,
    conversation_checkpoints_are_created,
    tasks_are_created,
    task_checkpoints_are_created,
    messages_are_added,
);
