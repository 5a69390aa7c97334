//! API.md's precondition table: each rule's status and `code` as an RFC 9457 problem, and
//! that a rejected command writes nothing.

use pm_tests::{on_both_backends, TestDb, TestService};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::{
    actor, assert_problem, checkpoint, conversation, created, post_raw, settled_count, world, World,
};

async fn expect(svc: &TestService, path: &str, body: &Value, status: u16, code: &str) {
    let r = svc.post(None, path, body).await;
    assert_problem(&r, status, code);
}

fn unknown() -> String {
    Uuid::now_v7().to_string()
}

async fn path_ids_that_name_nothing_are_404(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let bodies = [
        (
            "checkpoints",
            json!({"checkpoint_type": "BEGIN_WORK", "summary": "s"}),
        ),
        (
            "tasks",
            json!({"checkpoint_id": w.begin_work, "instructions": "i"}),
        ),
        ("messages", json!({"actor_id": w.actor, "content": "c"})),
    ];
    // Unknown ids, non-UUIDs, and ids of entities of another kind.
    for (conversation_id, task_id) in [
        (unknown(), unknown()),
        ("not-a-uuid".to_string(), "not-a-uuid".to_string()),
        (w.task.clone(), w.conversation.clone()),
    ] {
        for (what, body) in &bodies {
            let path = format!("/v1/conversations/{conversation_id}/{what}");
            expect(&svc, &path, body, 404, "conversation_not_found").await;
        }
        let path = format!("/v1/tasks/{task_id}/checkpoints");
        expect(
            &svc,
            &path,
            &json!({"type": "WORK_STARTED"}),
            404,
            "task_not_found",
        )
        .await;
    }
    svc.stop().await;
}

async fn message_task_id_must_be_a_task_of_the_conversation(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let other = world(&svc).await;
    let path = format!("/v1/conversations/{}/messages", w.conversation);
    for task_id in [other.task, unknown(), w.begin_work] {
        let body = json!({"actor_id": w.actor, "content": "c", "task_id": task_id});
        expect(&svc, &path, &body, 422, "task_not_found").await;
    }
    svc.stop().await;
}

async fn unregistered_actors_are_422(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let body = json!({"actor_ids": [w.actor, unknown()], "title": "t"});
    expect(&svc, "/v1/conversations", &body, 422, "actor_not_found").await;
    let path = format!("/v1/conversations/{}/messages", w.conversation);
    for actor_id in [unknown(), w.conversation.clone()] {
        let body = json!({"actor_id": actor_id, "content": "c"});
        expect(&svc, &path, &body, 422, "actor_not_found").await;
    }
    let path = format!("/v1/conversations/{}/tasks", w.conversation);
    let body =
        json!({"checkpoint_id": w.begin_work, "instructions": "i", "assigned_to": unknown()});
    expect(&svc, &path, &body, 422, "actor_not_found").await;
    svc.stop().await;
}

async fn task_checkpoint_rules_are_422(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let other = world(&svc).await;
    let need_info = checkpoint(&svc, &w.conversation, "NEED_INFORMATION").await;
    let path = format!("/v1/conversations/{}/tasks", w.conversation);
    for (checkpoint_id, code) in [
        (unknown(), "checkpoint_not_found"),
        (w.task.clone(), "checkpoint_not_found"),
        (other.begin_work, "checkpoint_conversation_mismatch"),
        (need_info, "checkpoint_not_begin_work"),
    ] {
        let body = json!({"checkpoint_id": checkpoint_id, "instructions": "i"});
        expect(&svc, &path, &body, 422, code).await;
    }
    svc.stop().await;
}

/// (path, body, the field the detail must name) for every kind of bad field.
fn invalid_bodies(w: &World) -> Vec<(String, Value, &'static str)> {
    let c = &w.conversation;
    let cp = format!("/v1/conversations/{c}/checkpoints");
    let tasks = format!("/v1/conversations/{c}/tasks");
    let msgs = format!("/v1/conversations/{c}/messages");
    let tcp = format!("/v1/tasks/{}/checkpoints", w.task);
    let conv = "/v1/conversations".to_string();
    let actors = "/v1/actors".to_string();
    vec![
        (actors.clone(), json!({"kind": "human"}), "display_name"),
        (
            actors.clone(),
            json!({"kind": "robot", "display_name": "R"}),
            "kind",
        ),
        (
            actors,
            json!({"kind": "ai", "display_name": ""}),
            "display_name",
        ),
        (conv.clone(), json!({"actor_ids": [w.actor]}), "title"),
        (
            conv.clone(),
            json!({"actor_ids": [w.actor], "title": ""}),
            "title",
        ),
        (
            conv.clone(),
            json!({"actor_ids": [w.actor], "title": 5}),
            "title",
        ),
        (
            conv.clone(),
            json!({"actor_ids": [], "title": "t"}),
            "actor_ids",
        ),
        (
            conv,
            json!({"actor_ids": ["nope"], "title": "t"}),
            "actor_ids",
        ),
        (
            cp.clone(),
            json!({"checkpoint_type": "DONE", "summary": "s"}),
            "checkpoint_type",
        ),
        (
            cp.clone(),
            json!({"checkpoint_type": "BEGIN_WORK", "summary": ""}),
            "summary",
        ),
        (cp, json!({"summary": "s"}), "checkpoint_type"),
        (
            tasks.clone(),
            json!({"checkpoint_id": w.begin_work, "instructions": ""}),
            "instructions",
        ),
        (
            tasks,
            json!({"checkpoint_id": 12, "instructions": "i"}),
            "checkpoint_id",
        ),
        (tcp.clone(), json!({"type": "WORK_FINISHED"}), "type"),
        (tcp, json!({}), "type"),
        (
            msgs.clone(),
            json!({"actor_id": w.actor, "content": " \n "}),
            "content",
        ),
        (
            msgs.clone(),
            json!({"actor_id": w.actor, "content": ["x"]}),
            "content",
        ),
        (
            msgs,
            json!({"actor_id": w.actor, "content": "c", "time": "yesterday"}),
            "time",
        ),
    ]
}

async fn bad_fields_are_validation_failed_naming_the_field(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    for (path, body, field) in invalid_bodies(&w) {
        let r = svc.post(None, &path, &body).await;
        assert_problem(&r, 422, "validation_failed");
        let detail = r.json["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(field),
            "POST {path} {body}: {detail:?} names no {field}"
        );
    }
    svc.stop().await;
}

async fn existing_ids_with_other_content_are_409(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc).await;
    let body = json!({"actor_ids": [a], "title": "t", "external_source": "gh", "external_id": "1"});
    created(&svc.post(None, "/v1/conversations", &body).await);
    let other =
        json!({"actor_ids": [a], "title": "u", "external_source": "gh", "external_id": "1"});
    expect(
        &svc,
        "/v1/conversations",
        &other,
        409,
        "conversation_exists",
    )
    .await;

    let body = json!({"kind": "human", "display_name": "Bo", "external_identity": "gh:bo"});
    created(&svc.post(None, "/v1/actors", &body).await);
    let other = json!({"kind": "ai", "display_name": "Bo", "external_identity": "gh:bo"});
    expect(&svc, "/v1/actors", &other, 409, "already_exists").await;

    let c = conversation(&svc, &a).await;
    let path = format!("/v1/conversations/{c}/messages");
    let body = json!({"actor_id": a, "content": "one", "external_identity": "m1"});
    created(&svc.post(None, &path, &body).await);
    let other = json!({"actor_id": a, "content": "two", "external_identity": "m1"});
    expect(&svc, &path, &other, 409, "already_exists").await;
    svc.stop().await;
}

async fn rejected_commands_write_nothing(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let before = settled_count(&svc).await;
    for (path, body, _) in invalid_bodies(&w) {
        assert_eq!(svc.post(None, &path, &body).await.status, 422);
    }
    let path = format!("/v1/conversations/{}/tasks", w.conversation);
    let body = json!({"checkpoint_id": unknown(), "instructions": "i"});
    expect(&svc, &path, &body, 422, "checkpoint_not_found").await;
    let path = format!("/v1/tasks/{}/checkpoints", unknown());
    expect(
        &svc,
        &path,
        &json!({"type": "WORK_STARTED"}),
        404,
        "task_not_found",
    )
    .await;
    let r = post_raw(&svc, None, "/v1/actors", "application/json", "{").await;
    assert_eq!(r.status, 400);
    assert_eq!(
        settled_count(&svc).await,
        before,
        "a rejected command wrote a fact"
    );
    svc.stop().await;
}

on_both_backends!(
    path_ids_that_name_nothing_are_404,
    message_task_id_must_be_a_task_of_the_conversation,
    unregistered_actors_are_422,
    task_checkpoint_rules_are_422,
    bad_fields_are_validation_failed_naming_the_field,
    existing_ids_with_other_content_are_409,
    rejected_commands_write_nothing,
);
