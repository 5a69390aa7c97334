//! Principals (TRUST.md): the three sources side by side — role tokens, a principals file,
//! open mode — `GET /v1/me`, and the log saying who: `principal` on every fact and on the
//! runes the facts cause, `?principal=` on `GET /v1/events` (JSON and SSE).

use std::path::PathBuf;

use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::sse::Sse;
use crate::support::{assert_problem, config, events, wait_events};

/// The ingress service of organization `acme`, from the principals file.
pub const BRIDGE: &str = "bridge-token-of-acme-0001";
/// The LLM service, from the principals file, for every organization.
pub const MODEL: &str = "model-token-for-all-0001";

/// The SHA-256 of `token` in hex, as the principals file stores it.
pub fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `principals` as a principals file in a fresh directory; answers its path.
pub fn principals_file(principals: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pm-principals-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("principals.json");
    std::fs::write(&path, json!({ "principals": principals }).to_string()).expect("written");
    path
}

/// The file's two principals.
fn two_principals() -> Value {
    json!([
        {"name": "bridge@acme", "token_sha256": sha256_hex(BRIDGE), "roles": ["ingress"],
         "organizations": ["acme"]},
        {"name": "model-1", "token_sha256": sha256_hex(MODEL), "roles": ["llm"],
         "organizations": ["*"], "actors": ["0190c0de-0000-7000-8000-000000000001"]},
    ])
}

/// A service with an admin role token and the file's two principals.
async fn with_file(db: &TestDb) -> TestService {
    let mut c = config(db);
    c.auth_tokens = format!("admin:{ADMIN}");
    c.principals_file = Some(principals_file(&two_principals()));
    TestService::start_with(c).await
}

async fn me_names_each_sources_principal(db: TestDb) {
    let svc = with_file(&db).await;
    let me = svc.get(Some(BRIDGE), "/v1/me").await;
    assert_eq!(me.status, 200, "{}", me.text);
    assert_eq!(
        me.json,
        json!({"principal": "bridge@acme", "roles": ["ingress"], "organizations": ["acme"],
               "actors": null, "source": "token"})
    );
    let me = svc.get(Some(MODEL), "/v1/me").await;
    assert_eq!(me.json["principal"], "model-1");
    assert_eq!(
        me.json["actors"],
        json!(["0190c0de-0000-7000-8000-000000000001"])
    );
    let me = svc.get(Some(ADMIN), "/v1/me").await;
    assert_eq!(
        me.json,
        json!({"principal": "admin", "roles": ["admin"], "organizations": ["*"],
               "actors": null, "source": "token"})
    );
    // A token whose SHA-256 the file holds only as another's is nobody.
    let r = svc.get(Some(&sha256_hex(BRIDGE)), "/v1/me").await;
    assert_problem(&r, 401, "unauthorized");
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    assert_problem(&svc.get(None, "/v1/me").await, 401, "unauthorized");
    // The console keys its cookies by PM_AUTH_TOKENS' tokens: a file principal is told so.
    let r = svc
        .post(None, "/console/session", &json!({"token": MODEL}))
        .await;
    assert_problem(&r, 403, "forbidden");
    assert!(
        r.json["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("PM_AUTH_TOKENS"),
        "{}",
        r.text
    );
    let r = svc
        .post(
            None,
            "/console/session",
            &json!({"token": "nobody-at-all-0001"}),
        )
        .await;
    assert_problem(&r, 401, "unauthorized");
    svc.stop().await;
}

async fn me_in_open_mode_is_open(db: TestDb) {
    let svc = TestService::start_with(config(&db)).await;
    let me = svc.get(None, "/v1/me").await;
    assert_eq!(
        me.json,
        json!({"principal": "open", "roles": ["admin", "ingress", "llm", "analyst"],
               "organizations": ["*"], "actors": null, "source": "open"})
    );
    svc.stop().await;
}

/// Every event of `conversation` (facts and runes).
async fn of_conversation(svc: &TestService, conversation: &str) -> Vec<Value> {
    events(svc, &format!("conversation_id={conversation}")).await
}

async fn every_event_records_who_caused_it(db: TestDb) {
    let svc = with_file(&db).await;
    let post = |token: &'static str, path: String, body: Value| {
        let svc = &svc;
        async move {
            let r = svc.post(Some(token), &path, &body).await;
            assert_eq!(r.status, 201, "{path}: {}", r.text);
            r.id()
        }
    };
    let human = post(
        BRIDGE,
        "/v1/actors".into(),
        json!({"kind": "human", "display_name": "Ann"}),
    )
    .await;
    let ai = post(
        ADMIN,
        "/v1/actors".into(),
        json!({"kind": "ai", "display_name": "Bot"}),
    )
    .await;
    let conv = post(
        BRIDGE,
        "/v1/conversations".into(),
        json!({"actor_ids": [human, ai], "title": "Audit", "organization": "acme"}),
    )
    .await;
    post(
        BRIDGE,
        format!("/v1/conversations/{conv}/messages"),
        json!({"actor_id": human, "content": "hi"}),
    )
    .await;
    post(
        MODEL,
        format!("/v1/conversations/{conv}/checkpoints"),
        json!({"checkpoint_type": "NEED_INFORMATION", "summary": "which repo?"}),
    )
    .await;

    // The facts say who wrote them; the runes they caused say the same.
    let all = wait_events(
        &svc,
        &format!("conversation_id={conv}&types=session.*,turn.*"),
        2,
    )
    .await;
    assert!(!all.is_empty());
    let all = of_conversation(&svc, &conv).await;
    let by = |e: &Value| e["principal"].as_str().unwrap_or("<none>").to_string();
    for e in &all {
        let expected = if e["type"] == "project_manager.conversation.checkpoint.created" {
            "model-1"
        } else {
            "bridge@acme"
        };
        let kind = e["type"].as_str().unwrap_or_default();
        if kind.starts_with("project_manager.") {
            assert_eq!(by(e), expected, "{e}");
        } else if e["causationid"] == "restart" {
            // A replica's start-up recovery (it may run while the test does) is the service's own.
            assert_eq!(by(e), "system", "{e}");
        } else {
            assert!(
                ["bridge@acme", "model-1"].contains(&by(e).as_str()),
                "a rune caused by a request carries its principal: {e}"
            );
        }
    }
    let runes_by_bridge = all
        .iter()
        .filter(|e| {
            !e["type"]
                .as_str()
                .unwrap_or_default()
                .starts_with("project_manager.")
        })
        .filter(|e| by(e) == "bridge@acme")
        .count();
    assert!(runes_by_bridge > 0, "the message's runes: {all:?}");

    // `?principal=` filters by it, and composes with `types`.
    let bridge = events(&svc, "principal=bridge@acme&types=project_manager.*").await;
    let kinds: Vec<&str> = bridge.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "project_manager.actor.registered",
            "project_manager.conversation.started",
            "project_manager.message.added"
        ]
    );
    assert!(bridge.iter().all(|e| e["principal"] == "bridge@acme"));
    let admin = events(&svc, "principal=admin&types=project_manager.*").await;
    assert_eq!(admin.len(), 1, "{admin:?}");
    assert_eq!(admin[0]["data"]["id"], ai.as_str());
    assert!(events(&svc, "principal=nobody").await.is_empty());
    let r = svc
        .get(
            Some(ADMIN),
            &format!("/v1/events?principal={}", "x".repeat(101)),
        )
        .await;
    assert_problem(&r, 400, "invalid_parameter");

    // The stream carries it too.
    let mut sse = Sse::connect(&svc, "principal=model-1&cursor=0", None).await;
    let first = sse.expect().await.json();
    assert_eq!(first["principal"], "model-1", "{first}");
    assert_eq!(
        first["type"],
        "project_manager.conversation.checkpoint.created"
    );
    svc.stop().await;
}

async fn a_bad_principals_file_stops_the_start_naming_the_entry(db: TestDb) {
    let mut c = config(&db);
    c.principals_file = Some(principals_file(&json!([
        {"name": "fine", "token_sha256": sha256_hex("t-1-aaaaaaaa"), "roles": ["llm"], "organizations": ["*"]},
        {"name": "system", "token_sha256": sha256_hex("t-2-aaaaaaaa"), "roles": ["admin"], "organizations": ["*"]},
    ])));
    let refused = project_manager::Application::build(&c)
        .await
        .err()
        .expect("refused");
    let message = refused.to_string();
    assert!(
        message.contains("principal #2") && message.contains("service's own"),
        "{message}"
    );
    let mut c = config(&db);
    c.principals_file = Some(PathBuf::from("/nonexistent/principals.json"));
    let refused = project_manager::Application::build(&c)
        .await
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("cannot be read"), "{refused}");
}

on_both_backends!(
    me_names_each_sources_principal,
    me_in_open_mode_is_open,
    every_event_records_who_caused_it,
    a_bad_principals_file_stops_the_start_naming_the_entry,
);
