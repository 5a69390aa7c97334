//! The OpenAPI document against real answers: every query route's `200` answer, the
//! commands' `201`s and a `404` problem are validated against the schema
//! `/openapi.json` documents for that operation and status, so the document cannot drift
//! from what the service serializes.

use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::json;

use crate::documented::assert_documented;
use crate::reads::{post, read};
use crate::support::{config, message, task_checkpoint, world};

async fn query_answers_match_the_document(db: TestDb) {
    let svc = TestService::start_with(config(&db)).await;
    let doc = svc.get(None, "/openapi.json").await.json;
    let w = world(&svc).await;
    let started = task_checkpoint(&svc, &w.task, "WORK_STARTED").await;
    assert_eq!(started.status, 201, "{}", started.text);
    assert_documented(
        &doc,
        "post",
        "/v1/tasks/{id}/checkpoints",
        201,
        &started.json,
    );
    let msg = message(&svc, &w.conversation, &w.actor, "On it").await;
    let position = started
        .header("x-event-position")
        .unwrap_or("0")
        .to_string();
    let mp = format!("min_position={position}");
    let tcp = started.id();
    let c = &w.conversation;
    let routes = [
        ("/v1/actors/{id}", format!("/v1/actors/{}?{mp}", w.actor)),
        ("/v1/conversations", format!("/v1/conversations?{mp}")),
        (
            "/v1/conversations/{id}",
            format!("/v1/conversations/{c}?{mp}"),
        ),
        (
            "/v1/conversations/{id}/checkpoints",
            format!("/v1/conversations/{c}/checkpoints?{mp}&limit=1"),
        ),
        (
            "/v1/conversations/{id}/messages",
            format!("/v1/conversations/{c}/messages?{mp}"),
        ),
        (
            "/v1/conversations/{id}/tasks",
            format!("/v1/conversations/{c}/tasks?{mp}"),
        ),
        ("/v1/tasks", format!("/v1/tasks?{mp}")),
        ("/v1/tasks/{id}", format!("/v1/tasks/{}?{mp}", w.task)),
        ("/v1/stats/tasks", format!("/v1/stats/tasks?{mp}")),
        (
            "/v1/stats/tasks",
            format!("/v1/stats/tasks?{mp}&group_by=assigned_to"),
        ),
        (
            "/v1/stats/tasks",
            format!("/v1/stats/tasks?{mp}&group_by=organization"),
        ),
        (
            "/v1/conversations/{id}/checkpoints/{child}",
            format!("/v1/conversations/{c}/checkpoints/{}?{mp}", w.begin_work),
        ),
        (
            "/v1/conversations/{id}/messages/{child}",
            format!("/v1/conversations/{c}/messages/{msg}?{mp}"),
        ),
        (
            "/v1/tasks/{id}/checkpoints/{child}",
            format!("/v1/tasks/{}/checkpoints/{tcp}?{mp}", w.task),
        ),
        ("/v1/events", "/v1/events?limit=3".to_string()),
        ("/v1/admin/processors", "/v1/admin/processors".to_string()),
        (
            "/v1/admin/processors/{name}/parked",
            "/v1/admin/processors/read_model/parked".to_string(),
        ),
    ];
    for (template, path) in routes {
        let r = svc.get(Some(ADMIN), &path).await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.text);
        assert_documented(&doc, "get", template, 200, &r.json);
    }
    let missing = svc
        .get(
            Some(ADMIN),
            "/v1/tasks/00000000-0000-0000-0000-000000000000",
        )
        .await;
    assert_documented(&doc, "get", "/v1/tasks/{id}", 404, &missing.json);
    let registered = svc
        .post(
            Some(ADMIN),
            "/v1/actors",
            &json!({"kind": "ai", "display_name": "Bot", "external_identity": "bot:1"}),
        )
        .await;
    assert_documented(&doc, "post", "/v1/actors", 201, &registered.json);
    svc.stop().await;
}

async fn saga_answers_match_the_document(db: TestDb) {
    let svc = TestService::start_with(config(&db)).await;
    let doc = svc.get(None, "/openapi.json").await.json;
    let human = post(
        &svc,
        "/v1/actors",
        json!({"kind": "human", "display_name": "H"}),
    )
    .await
    .id;
    let llm = post(
        &svc,
        "/v1/actors",
        json!({"kind": "ai", "display_name": "L"}),
    )
    .await
    .id;
    let c = post(
        &svc,
        "/v1/conversations",
        json!({"actor_ids": [human, llm], "title": "t"}),
    )
    .await
    .id;
    let m = post(
        &svc,
        &format!("/v1/conversations/{c}/messages"),
        json!({"actor_id": human, "content": "hi"}),
    )
    .await;
    // A checkpoint after the session closed has no edge: an anomaly to list.
    for kind in ["WORK_COMPLETED", "NEED_INFORMATION"] {
        post(
            &svc,
            &format!("/v1/conversations/{c}/checkpoints"),
            json!({"checkpoint_type": kind, "summary": kind}),
        )
        .await;
    }
    let last = post(
        &svc,
        "/v1/actors",
        json!({"kind": "human", "display_name": "X"}),
    )
    .await;
    let mp = format!("min_position={}", last.position);
    let turns = read(&svc, &format!("/v1/turns?conversation_id={c}"), &m.position).await;
    let turn = turns["items"][0]["id"]
        .as_str()
        .expect("a turn")
        .to_string();
    let session = read(&svc, &format!("/v1/sessions/{c}"), &m.position).await;
    let agent = session["root_agent_id"].as_str().expect("root").to_string();
    let routes = [
        (
            "/v1/sessions/{conversation_id}",
            format!("/v1/sessions/{c}?{mp}"),
        ),
        ("/v1/agents", format!("/v1/agents?conversation_id={c}&{mp}")),
        ("/v1/agents/{id}", format!("/v1/agents/{agent}?{mp}")),
        ("/v1/turns", format!("/v1/turns?conversation_id={c}&{mp}")),
        ("/v1/turns/{id}", format!("/v1/turns/{turn}?{mp}")),
        (
            "/v1/anomalies",
            format!("/v1/anomalies?conversation_id={c}&{mp}"),
        ),
    ];
    for (template, path) in routes {
        let r = svc.get(Some(ADMIN), &path).await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.text);
        assert_documented(&doc, "get", template, 200, &r.json);
    }
    let anomalies = read(
        &svc,
        &format!("/v1/anomalies?conversation_id={c}"),
        &last.position,
    )
    .await;
    assert_eq!(
        anomalies["items"].as_array().map(Vec::len),
        Some(1),
        "{anomalies}"
    );
    let missing = svc
        .get(
            Some(ADMIN),
            "/v1/turns/00000000-0000-0000-0000-000000000000",
        )
        .await;
    assert_eq!(missing.json["code"], "turn_not_found");
    assert_documented(&doc, "get", "/v1/turns/{id}", 404, &missing.json);
    let archived = svc
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{c}/archive"),
            &json!({}),
        )
        .await;
    assert_eq!(archived.status, 200, "{}", archived.text);
    assert_documented(
        &doc,
        "post",
        "/v1/sessions/{conversation_id}/archive",
        200,
        &archived.json,
    );
    let refused = svc
        .post(Some(ADMIN), &format!("/v1/sessions/{c}/pause"), &json!({}))
        .await;
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert_documented(
        &doc,
        "post",
        "/v1/sessions/{conversation_id}/pause",
        409,
        &refused.json,
    );
    let killed = svc
        .post(Some(ADMIN), &format!("/v1/agents/{agent}/kill"), &json!({}))
        .await;
    assert_eq!(killed.status, 409, "terminated at close: {}", killed.text);
    assert_eq!(killed.json["code"], "agent_transition_not_allowed");
    svc.stop().await;
}

on_both_backends!(
    query_answers_match_the_document,
    saga_answers_match_the_document
);
