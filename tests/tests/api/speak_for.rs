//! Who a principal may speak for (TRUST.md): `POST …/messages` as a `human` actor needs
//! the role ingress, as an `ai` actor llm, anyone admin; a principal with `actors` speaks
//! only as those; a fenced message only as the actor the turn's agent acts for. Every
//! refusal is `403 actor_forbidden` and writes nothing.

use pm_tests::{all_tokens, on_both_backends, Response, TestDb, TestService, ADMIN, INGRESS, LLM};
use serde_json::{json, Value};

use crate::principals::{principals_file, sha256_hex};
use crate::support::{assert_problem, config, created, post_with, settled_count};
use crate::workers::{claim, dispatched, epoch};

/// A relay of one person's messages: role ingress, actor list of one.
const HANA_RELAY: &str = "hana-relay-token-0001";
/// The external identity of the only actor [`HANA_RELAY`] may speak as.
const HANA: &str = "github:hana";

/// A service with one token per role and the relay principal.
async fn start(db: &TestDb) -> TestService {
    let mut c = config(db);
    c.auth_tokens = all_tokens();
    let hana = pm_domain::ids::actor_id(HANA).to_string();
    let relay = json!([{"name": "hana-relay", "token_sha256": sha256_hex(HANA_RELAY),
                        "roles": ["ingress"], "organizations": ["*"], "actors": [hana]}]);
    c.principals_file = Some(principals_file(&relay));
    TestService::start_with(c).await
}

async fn register(svc: &TestService, body: Value) -> String {
    created(&svc.post(Some(ADMIN), "/v1/actors", &body).await)
}

async fn say(svc: &TestService, token: &str, conversation: &str, actor: &str) -> Response {
    let path = format!("/v1/conversations/{conversation}/messages");
    let body = json!({"actor_id": actor, "content": "hello"});
    svc.post(Some(token), &path, &body).await
}

/// Asserts `r` is the refusal and that the log holds `facts` facts, as before it.
async fn refused(svc: &TestService, r: &Response, facts: usize) {
    assert_problem(r, 403, "actor_forbidden");
    assert_eq!(settled_count(svc).await, facts, "a refusal wrote something");
}

async fn each_role_speaks_as_its_kind_of_actor(db: TestDb) {
    let svc = start(&db).await;
    let human = register(&svc, json!({"kind": "human", "display_name": "Alice"})).await;
    let ai = register(&svc, json!({"kind": "ai", "display_name": "Lin"})).await;
    let body = json!({"actor_ids": [human, ai], "title": "Work"});
    let conv = created(&svc.post(Some(ADMIN), "/v1/conversations", &body).await);
    let facts = settled_count(&svc).await;

    // An LLM cannot put words in a person's mouth, nor an ingress in a model's.
    let r = say(&svc, LLM, &conv, &human).await;
    refused(&svc, &r, facts).await;
    assert!(r.json["detail"]
        .as_str()
        .is_some_and(|d| d.contains(&human)));
    refused(&svc, &say(&svc, INGRESS, &conv, &ai).await, facts).await;

    assert_eq!(say(&svc, INGRESS, &conv, &human).await.status, 201);
    assert_eq!(say(&svc, LLM, &conv, &ai).await.status, 201);
    assert_eq!(say(&svc, ADMIN, &conv, &human).await.status, 201);
    assert_eq!(say(&svc, ADMIN, &conv, &ai).await.status, 201);

    // An actor that is not registered is still the aggregate's `actor_not_found`.
    let nobody = uuid::Uuid::now_v7().to_string();
    let r = say(&svc, LLM, &conv, &nobody).await;
    assert_problem(&r, 422, "actor_not_found");
}

async fn a_principal_with_actors_speaks_only_as_those(db: TestDb) {
    let svc = start(&db).await;
    let hana = register(
        &svc,
        json!({"kind": "human", "display_name": "Hana", "external_identity": HANA}),
    )
    .await;
    let other = register(&svc, json!({"kind": "human", "display_name": "Olaf"})).await;
    let body = json!({"actor_ids": [hana, other], "title": "Work"});
    let conv = created(&svc.post(Some(ADMIN), "/v1/conversations", &body).await);
    let facts = settled_count(&svc).await;

    refused(&svc, &say(&svc, HANA_RELAY, &conv, &other).await, facts).await;
    assert_eq!(say(&svc, HANA_RELAY, &conv, &hana).await.status, 201);
    // The plain ingress token has no list: any person.
    assert_eq!(say(&svc, INGRESS, &conv, &other).await.status, 201);
}

async fn a_fenced_message_speaks_only_as_the_turns_actor(db: TestDb) {
    let svc = start(&db).await;
    let (conv, ai, _, turn) = dispatched(&svc).await;
    let claimed = claim(&svc, json!({"worker": "w-1"})).await;
    let epoch = epoch(&claimed).to_string();
    let fence = [
        ("PM-Turn-Id", turn.as_str()),
        ("PM-Turn-Epoch", epoch.as_str()),
    ];
    let other_ai = register(&svc, json!({"kind": "ai", "display_name": "Mallory"})).await;
    let human = claimed.json["context"]["message"]["actor_id"]
        .as_str()
        .expect("the human's message")
        .to_string();
    let path = format!("/v1/conversations/{conv}/messages");
    let as_actor = |actor: &str| json!({"actor_id": actor, "content": "on it"});
    let facts = settled_count(&svc).await;

    // Another AI, or the person, even with the admin's token: the turn speaks for `ai`.
    let r = post_with(&svc, Some(LLM), &path, &as_actor(&other_ai), &fence).await;
    refused(&svc, &r, facts).await;
    let r = post_with(&svc, Some(ADMIN), &path, &as_actor(&human), &fence).await;
    refused(&svc, &r, facts).await;

    let r = post_with(&svc, Some(LLM), &path, &as_actor(&ai), &fence).await;
    assert_eq!(r.status, 201, "{}", r.text);
    // The same AI unfenced is not bound by the turn.
    assert_eq!(say(&svc, LLM, &conv, &other_ai).await.status, 201);
}

on_both_backends!(
    each_role_speaks_as_its_kind_of_actor,
    a_principal_with_actors_speaks_only_as_those,
    a_fenced_message_speaks_only_as_the_turns_actor,
);
