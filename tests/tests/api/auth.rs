//! Authentication and roles: `401` without a known token, `403` for a role that may not,
//! API.md's role table on every command endpoint, and open operations endpoints.

use pm_tests::{all_tokens, on_both_backends, TestDb, TestService, ADMIN, ANALYST, INGRESS, LLM};
use serde_json::{json, Value};

use crate::support::{assert_problem, buffer, post_raw, wait_events, world, World, FACTS};

/// Every command endpoint with a valid body and the roles (besides admin) that may use it.
fn commands(w: &World) -> Vec<(String, Value, &'static [&'static str])> {
    let c = &w.conversation;
    vec![
        (
            "/v1/actors".into(),
            json!({"kind": "human", "display_name": "Ann"}),
            &[INGRESS],
        ),
        (
            "/v1/conversations".into(),
            json!({"actor_ids": [w.actor], "title": "t"}),
            &[INGRESS],
        ),
        (
            format!("/v1/conversations/{c}/messages"),
            json!({"actor_id": w.actor, "content": "hi"}),
            &[INGRESS, LLM],
        ),
        (
            format!("/v1/conversations/{c}/checkpoints"),
            json!({"checkpoint_type": "NEED_INFORMATION", "summary": "s"}),
            &[LLM],
        ),
        (
            format!("/v1/conversations/{c}/tasks"),
            json!({"checkpoint_id": w.begin_work, "instructions": "i"}),
            &[LLM],
        ),
        (
            format!("/v1/tasks/{}/checkpoints", w.task),
            json!({"type": "WORK_STARTED"}),
            &[LLM],
        ),
    ]
}

async fn missing_or_unknown_tokens_are_401(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let body = json!({"kind": "human", "display_name": "Ann"});
    for token in [None, Some("not-a-known-token"), Some("")] {
        assert_problem(
            &svc.post(token, "/v1/actors", &body).await,
            401,
            "unauthorized",
        );
        assert_problem(&svc.get(token, "/v1/events").await, 401, "unauthorized");
    }
    for value in [format!("Basic {ADMIN}"), ADMIN.to_string(), "Bearer".into()] {
        let req = svc
            .client
            .get(format!("{}/v1/events", svc.base))
            .header("authorization", value.clone());
        let r = buffer(req.send().await.expect("sent")).await;
        assert_problem(&r, 401, "unauthorized");
    }
    svc.stop().await;
}

async fn unauthorized_answers_name_the_bearer_scheme(db: TestDb) {
    // RFC 9110 §15.5.2: a 401 answer MUST carry WWW-Authenticate.
    let svc = TestService::start(&db, &all_tokens()).await;
    let r = svc.get(None, "/v1/events").await;
    assert_problem(&r, 401, "unauthorized");
    let challenge = r.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer"),
        "WWW-Authenticate {challenge:?}"
    );
    svc.stop().await;
}

async fn the_bearer_scheme_is_case_insensitive(db: TestDb) {
    // RFC 9110 §11.1: the authentication scheme is a case-insensitive token.
    let svc = TestService::start(&db, &all_tokens()).await;
    for scheme in ["bearer", "BEARER"] {
        let req = svc
            .client
            .get(format!("{}/v1/events", svc.base))
            .header("authorization", format!("{scheme} {ANALYST}"));
        let r = buffer(req.send().await.expect("sent")).await;
        assert_eq!(r.status, 200, "{scheme}: {}", r.text);
    }
    svc.stop().await;
}

/// `body` as `role` sends it: an LLM speaks as an `ai` actor, not as the world's human
/// (who may speak as whom is speak_for.rs's; this table is the endpoints').
fn as_role(body: &Value, role: &str, ai: &str) -> Value {
    let mut body = body.clone();
    if role == LLM && body.get("actor_id").is_some() {
        body["actor_id"] = json!(ai);
    }
    body
}

async fn each_role_may_do_what_api_md_says(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let w = world(&svc).await;
    let ai = json!({"kind": "ai", "display_name": "Lin"});
    let ai = svc.post(Some(ADMIN), "/v1/actors", &ai).await.id();
    for (path, body, allowed) in commands(&w) {
        for role in [INGRESS, LLM, ANALYST, ADMIN] {
            let r = svc
                .post(Some(role), &path, &as_role(&body, role, &ai))
                .await;
            if role == ADMIN || allowed.contains(&role) {
                assert_eq!(r.status, 201, "{role} POST {path}: {}", r.text);
            } else {
                assert_problem(&r, 403, "forbidden");
            }
        }
    }
    svc.stop().await;
}

async fn analysts_and_admins_read_the_event_log(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    world(&svc).await;
    wait_events(&svc, FACTS, 4).await;
    for role in [ANALYST, ADMIN] {
        let r = svc.get(Some(role), &format!("/v1/events?{FACTS}")).await;
        assert_eq!(r.status, 200, "{role}: {}", r.text);
        assert_eq!(r.json["items"].as_array().map(Vec::len), Some(4));
    }
    svc.stop().await;
}

async fn operations_endpoints_need_no_token(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
        "/asyncapi.json",
    ] {
        let r = svc.get(None, path).await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.text);
    }
    svc.stop().await;
}

async fn a_forbidden_role_gets_403_before_its_body_is_read(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let w = world(&svc).await;
    for (path, _, allowed) in commands(&w) {
        for role in [INGRESS, LLM, ANALYST] {
            if allowed.contains(&role) {
                continue;
            }
            for (content_type, body) in [("application/json", "{not json"), ("text/plain", "hi")] {
                let r = post_raw(&svc, Some(role), &path, content_type, body).await;
                assert_problem(&r, 403, "forbidden");
            }
        }
        let r = post_raw(&svc, None, &path, "application/json", "{not json").await;
        assert_problem(&r, 401, "unauthorized");
    }
    svc.stop().await;
}

on_both_backends!(
    unauthorized_answers_name_the_bearer_scheme,
    the_bearer_scheme_is_case_insensitive,
    missing_or_unknown_tokens_are_401,
    each_role_may_do_what_api_md_says,
    analysts_and_admins_read_the_event_log,
    operations_endpoints_need_no_token,
    a_forbidden_role_gets_403_before_its_body_is_read,
);
