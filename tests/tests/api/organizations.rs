//! Organizations (TRUST.md): two organizations' principals side by side, each endpoint
//! family showing one organization nothing of the other — commands, queries, statistics,
//! the event log (JSON, SSE and its snapshot), claims, turn reports, tool calls and
//! approvals, operators' controls, webhooks — with the refusal codes, and a `*` principal
//! seeing both.

use pm_tests::{on_both_backends, Response, TestDb, TestService, ADMIN};
use serde_json::{json, Value};

use crate::principals::{principals_file, sha256_hex};
use crate::sagas::wait_for;
use crate::sse::Sse;
use crate::support::{assert_problem, config, post_with};

/// One organization's principals' tokens.
#[derive(Debug, Clone, Copy)]
pub struct Tokens {
    pub bridge: &'static str,
    pub model: &'static str,
    pub analyst: &'static str,
    pub ops: &'static str,
}

pub const ACME: Tokens = Tokens {
    bridge: "acme-bridge-token-0001",
    model: "acme-model-token-0001",
    analyst: "acme-analyst-token-0001",
    ops: "acme-ops-token-0001",
};

pub const GLOBEX: Tokens = Tokens {
    bridge: "globex-bridge-token-0001",
    model: "globex-model-token-0001",
    analyst: "globex-analyst-token-0001",
    ops: "globex-ops-token-0001",
};

/// The principals of `organization` with `tokens`, one per role.
fn principals_of(organization: &str, tokens: Tokens) -> Vec<Value> {
    [
        ("bridge", tokens.bridge, "ingress"),
        ("model", tokens.model, "llm"),
        ("analyst", tokens.analyst, "analyst"),
        ("ops", tokens.ops, "admin"),
    ]
    .into_iter()
    .map(|(name, token, role)| {
        json!({"name": format!("{name}@{organization}"), "token_sha256": sha256_hex(token),
               "roles": [role], "organizations": [organization]})
    })
    .collect()
}

/// A service with an admin role token (`*`) and both organizations' principals.
pub async fn two_organizations(db: &TestDb) -> TestService {
    let mut c = config(db);
    c.auth_tokens = format!("admin:{ADMIN}");
    c.webhook_allowed_hosts = "127.0.0.1/32".into();
    let mut principals = principals_of("acme", ACME);
    principals.extend(principals_of("globex", GLOBEX));
    c.principals_file = Some(principals_file(&Value::Array(principals)));
    TestService::start_with(c).await
}

/// What one organization has: a conversation of a human and an AI actor whose human
/// message dispatched a turn, a BEGIN_WORK checkpoint, a task, and a tool call of the turn
/// awaiting approval.
#[derive(Debug, Clone)]
pub struct Org {
    pub human: String,
    pub conversation: String,
    pub checkpoint: String,
    pub message: String,
    pub task: String,
    pub turn: String,
    pub agent: String,
    pub epoch: i64,
}

fn created(r: &Response) -> String {
    assert_eq!(r.status, 201, "{}", r.text);
    r.id()
}

/// Builds `organization`'s world with its own principals.
pub async fn org(svc: &TestService, organization: &str, t: Tokens) -> Org {
    let actor =
        |kind: &str| json!({"kind": kind, "display_name": format!("{kind} of {organization}")});
    let human = created(
        &svc.post(Some(t.bridge), "/v1/actors", &actor("human"))
            .await,
    );
    let ai = created(&svc.post(Some(t.bridge), "/v1/actors", &actor("ai")).await);
    let body = json!({"actor_ids": [human, ai], "title": "Work", "organization": organization});
    let conversation = created(&svc.post(Some(t.bridge), "/v1/conversations", &body).await);
    let path = format!("/v1/conversations/{conversation}/checkpoints");
    let body = json!({"checkpoint_type": "BEGIN_WORK", "summary": "Goal"});
    let checkpoint = created(&svc.post(Some(t.model), &path, &body).await);
    let path = format!("/v1/conversations/{conversation}/tasks");
    let body = json!({"checkpoint_id": checkpoint, "instructions": "Do it"});
    let task = created(&svc.post(Some(t.model), &path, &body).await);
    let path = format!("/v1/conversations/{conversation}/messages");
    let body = json!({"actor_id": human, "content": "please"});
    let message = created(&svc.post(Some(t.bridge), &path, &body).await);
    wait_for(
        svc,
        &format!("/v1/turns?conversation_id={conversation}&state=dispatched"),
        |b| b["items"].as_array().is_some_and(|i| !i.is_empty()),
    )
    .await;
    Org {
        human,
        conversation,
        checkpoint,
        message,
        task,
        turn: String::new(),
        agent: String::new(),
        epoch: 0,
    }
}

/// `t`'s model claims (only its organization's turns) and reports a call needing approval.
async fn claim_and_report(svc: &TestService, t: Tokens, o: &mut Org) {
    let r = svc
        .post(Some(t.model), "/v1/turns/claim", &json!({"worker": "w"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json["turn"]["conversation_id"],
        o.conversation.as_str(),
        "{}",
        r.text
    );
    o.turn = r.json["turn"]["id"].as_str().expect("turn").to_string();
    o.agent = r.json["turn"]["agent_id"]
        .as_str()
        .expect("agent")
        .to_string();
    o.epoch = r.json["turn_epoch"].as_i64().expect("epoch");
    let epoch = o.epoch.to_string();
    let fence = [
        ("PM-Turn-Id", o.turn.as_str()),
        ("PM-Turn-Epoch", epoch.as_str()),
    ];
    let call = json!({"calls": [{"call_id": "c1", "tool_name": "shell", "arguments": {},
                      "requires_approval": true, "policy_reason": "shell"}]});
    let path = format!("/v1/turns/{}/tool-calls", o.turn);
    let r = post_with(svc, Some(t.model), &path, &call, &fence).await;
    assert_eq!(r.status, 201, "{}", r.text);
}

/// The ids in a page's items under `key`.
fn ids(page: &Value, key: &str) -> Vec<String> {
    page["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i[key].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `GET path` with `token`: 200, the body.
async fn read(svc: &TestService, token: &str, path: &str) -> Value {
    let r = svc.get(Some(token), path).await;
    assert_eq!(r.status, 200, "GET {path}: {}", r.text);
    r.json
}

/// Asserts `r` is exactly the `404` of a thing that does not exist: same status, code
/// and detail as `missing` (the same endpoint asked for a random id).
fn as_missing(r: &Response, missing: &Response, code: &str, hidden: &str, random: &str) {
    assert_problem(r, 404, code);
    assert_problem(missing, 404, code);
    assert_eq!(
        r.json["detail"].as_str().map(|d| d.replace(hidden, "ID")),
        missing.json["detail"]
            .as_str()
            .map(|d| d.replace(random, "ID")),
        "{} vs {}",
        r.text,
        missing.text
    );
}

async fn each_organization_sees_and_touches_only_its_own(db: TestDb) {
    let svc = two_organizations(&db).await;
    // Globex first: its turn is the older, so a claim that ignored scopes would take it.
    let mut globex = org(&svc, "globex", GLOBEX).await;
    let mut acme = org(&svc, "acme", ACME).await;
    let body = json!({"conversation_id": globex.conversation, "wait_ms": 100});
    let r = svc.post(Some(ACME.model), "/v1/turns/claim", &body).await;
    assert_eq!(
        r.status, 204,
        "acme's model claimed globex's turn: {}",
        r.text
    );
    claim_and_report(&svc, ACME, &mut acme).await;
    claim_and_report(&svc, GLOBEX, &mut globex).await;
    let random = uuid::Uuid::now_v7().to_string();
    // Both organizations' rows are in the read model and the saga tables.
    let two = |b: &Value| b["items"].as_array().is_some_and(|i| i.len() == 2);
    for path in ["/v1/conversations", "/v1/tasks", "/v1/tool-calls"] {
        wait_for(&svc, path, two).await;
    }

    // Starting conversations: only in one's own organizations.
    let body = json!({"actor_ids": [acme.human], "title": "t"});
    let r = svc
        .post(Some(ACME.bridge), "/v1/conversations", &body)
        .await;
    assert_problem(&r, 422, "organization_required");
    let body = json!({"actor_ids": [acme.human], "title": "t", "organization": "globex"});
    let r = svc
        .post(Some(ACME.bridge), "/v1/conversations", &body)
        .await;
    assert_problem(&r, 403, "organization_forbidden");

    // Single reads: another organization's things answer as missing ones do.
    let g = &globex;
    for (path, code, hidden) in [
        (
            format!("/v1/conversations/{}", g.conversation),
            "conversation_not_found",
            &g.conversation,
        ),
        (
            format!("/v1/conversations/{}/checkpoints", g.conversation),
            "conversation_not_found",
            &g.conversation,
        ),
        (
            format!("/v1/conversations/{}/messages", g.conversation),
            "conversation_not_found",
            &g.conversation,
        ),
        (
            format!("/v1/conversations/{}/tasks", g.conversation),
            "conversation_not_found",
            &g.conversation,
        ),
        (format!("/v1/tasks/{}", g.task), "task_not_found", &g.task),
        (
            format!("/v1/sessions/{}", g.conversation),
            "session_not_found",
            &g.conversation,
        ),
        (
            format!("/v1/agents/{}", g.agent),
            "agent_not_found",
            &g.agent,
        ),
        (format!("/v1/turns/{}", g.turn), "turn_not_found", &g.turn),
        (
            format!("/v1/turns/{}/tool-calls/c1", g.turn),
            "turn_not_found",
            &g.turn,
        ),
        (
            format!("/v1/actors/{}", g.human),
            "actor_not_found",
            &g.human,
        ),
    ] {
        let r = svc.get(Some(ACME.analyst), &path).await;
        let missing = svc
            .get(Some(ACME.analyst), &path.replace(hidden.as_str(), &random))
            .await;
        as_missing(&r, &missing, code, hidden, &random);
        // Their own organization, and `*`, see it.
        let theirs = svc.get(Some(GLOBEX.analyst), &path).await;
        assert_eq!(theirs.status, 200, "GET {path} by globex: {}", theirs.text);
        assert_eq!(
            svc.get(Some(ADMIN), &path).await.status,
            200,
            "GET {path} by *"
        );
    }
    let path = format!(
        "/v1/conversations/{}/checkpoints/{}",
        g.conversation, g.checkpoint
    );
    assert_problem(
        &svc.get(Some(ACME.analyst), &path).await,
        404,
        "conversation_not_found",
    );
    let path = format!(
        "/v1/conversations/{}/messages/{}",
        g.conversation, g.message
    );
    assert_problem(
        &svc.get(Some(ACME.analyst), &path).await,
        404,
        "conversation_not_found",
    );
    let own = read(&svc, ACME.analyst, &format!("/v1/actors/{}", acme.human)).await;
    assert_eq!(own["id"], acme.human.as_str());

    // Lists and statistics: filtered.
    for (path, key, mine, theirs) in [
        (
            "/v1/conversations",
            "id",
            &acme.conversation,
            &g.conversation,
        ),
        ("/v1/tasks", "id", &acme.task, &g.task),
        (
            "/v1/sessions",
            "conversation_id",
            &acme.conversation,
            &g.conversation,
        ),
        (
            "/v1/agents",
            "conversation_id",
            &acme.conversation,
            &g.conversation,
        ),
        (
            "/v1/turns",
            "conversation_id",
            &acme.conversation,
            &g.conversation,
        ),
        ("/v1/tool-calls", "turn_id", &acme.turn, &g.turn),
    ] {
        let page = read(&svc, ACME.analyst, path).await;
        let seen = ids(&page, key);
        assert!(seen.contains(mine), "{path} by acme lacks its own: {page}");
        assert!(
            !seen.contains(theirs),
            "{path} by acme shows globex's: {page}"
        );
        let every = ids(&read(&svc, ADMIN, path).await, key);
        assert!(
            every.contains(mine) && every.contains(theirs),
            "{path} by *"
        );
    }
    let page = read(&svc, ACME.analyst, "/v1/tasks?organization=globex").await;
    assert_eq!(page["items"], json!([]), "{page}");
    let stats = read(&svc, ACME.analyst, "/v1/stats/tasks").await;
    assert_eq!(stats["total"], 1, "{stats}");
    let stats = read(&svc, ACME.analyst, "/v1/stats/tasks?group_by=organization").await;
    let keys: Vec<&Value> = stats["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| &g["organization"])
        .collect();
    assert_eq!(keys, vec![&json!("acme")], "{stats}");
    assert_eq!(read(&svc, ADMIN, "/v1/stats/tasks").await["total"], 2);

    // Writes aimed at another organization: as if it did not exist.
    let commands = [
        (
            ACME.model,
            format!("/v1/conversations/{}/checkpoints", g.conversation),
            json!({"checkpoint_type": "BEGIN_WORK", "summary": "x"}),
            "conversation_not_found",
        ),
        (
            ACME.model,
            format!("/v1/conversations/{}/tasks", g.conversation),
            json!({"checkpoint_id": g.checkpoint, "instructions": "x"}),
            "conversation_not_found",
        ),
        (
            ACME.bridge,
            format!("/v1/conversations/{}/messages", g.conversation),
            json!({"actor_id": g.human, "content": "x"}),
            "conversation_not_found",
        ),
        (
            ACME.model,
            format!("/v1/tasks/{}/checkpoints", g.task),
            json!({"type": "WORK_STARTED"}),
            "task_not_found",
        ),
        (
            ACME.model,
            format!("/v1/turns/{}/heartbeat", g.turn),
            json!({}),
            "turn_not_found",
        ),
        (
            ACME.model,
            format!("/v1/turns/{}/release", g.turn),
            json!({}),
            "turn_not_found",
        ),
        (
            ACME.ops,
            format!("/v1/turns/{}/tool-calls/c1/approve", g.turn),
            json!({}),
            "turn_not_found",
        ),
        (
            ACME.ops,
            format!("/v1/turns/{}/tool-calls/c1/deny", g.turn),
            json!({}),
            "turn_not_found",
        ),
        (
            ACME.ops,
            format!("/v1/turns/{}/interrupt", g.turn),
            json!({}),
            "turn_not_found",
        ),
        (
            ACME.ops,
            format!("/v1/sessions/{}/pause", g.conversation),
            json!({}),
            "session_not_found",
        ),
        (
            ACME.ops,
            format!("/v1/sessions/{}/budget", g.conversation),
            json!({"token_budget": 10}),
            "session_not_found",
        ),
        (
            ACME.ops,
            format!("/v1/agents/{}/kill", g.agent),
            json!({}),
            "agent_not_found",
        ),
    ];
    let before = read(&svc, ADMIN, "/v1/events?limit=500").await["items"]
        .as_array()
        .map(Vec::len);
    let epoch = g.epoch.to_string();
    let fence = [
        ("PM-Turn-Id", g.turn.as_str()),
        ("PM-Turn-Epoch", epoch.as_str()),
    ];
    for (token, path, body, code) in &commands {
        // Even with globex's claim's fence: the claim is not acme's to use.
        let r = post_with(&svc, Some(token), path, body, &fence).await;
        assert_problem(&r, 404, code);
    }
    let after = read(&svc, ADMIN, "/v1/events?limit=500").await["items"]
        .as_array()
        .map(Vec::len);
    assert_eq!(before, after, "a refused write wrote something");
    let r = svc.get(Some(ACME.ops), "/v1/admin/processors").await;
    assert_problem(&r, 403, "organization_forbidden");
    // Globex's call is still waiting for its own approver.
    let call = read(
        &svc,
        GLOBEX.ops,
        &format!("/v1/turns/{}/tool-calls/c1", g.turn),
    )
    .await;
    assert_eq!(call["state"], "awaiting_approval", "{call}");

    // The log: only one's own organization's events, none of no conversation.
    let log = read(&svc, ACME.analyst, "/v1/events?limit=500").await;
    let items = log["items"].as_array().expect("items");
    assert!(!items.is_empty());
    for e in items {
        assert_eq!(e["conversationid"], acme.conversation.as_str(), "{e}");
    }
    let every = read(&svc, ADMIN, "/v1/events?limit=500").await;
    let types: Vec<&str> = every["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        types.contains(&"project_manager.actor.registered"),
        "* sees actors"
    );
    let path = format!("/v1/events?conversation_id={}", g.conversation);
    assert_eq!(read(&svc, ACME.analyst, &path).await["items"], json!([]));
    // SSE: the snapshot of a hidden conversation is that of a missing one; the stream
    // carries only one's own events.
    let mut hidden = Sse::connect_as(
        &svc,
        ACME.analyst,
        &format!("conversation_id={}", g.conversation),
        None,
    )
    .await;
    let snapshot = hidden.expect().await;
    assert_eq!(snapshot.event.as_deref(), Some("snapshot"));
    let snapshot = snapshot.json();
    assert!(snapshot["session"].is_null(), "{snapshot}");
    assert_eq!(snapshot["agents"], json!([]));
    assert_eq!(snapshot["turns"], json!([]));
    let mut stream = Sse::connect_as(&svc, ACME.analyst, "", None).await;
    let head = every["next_cursor"].as_str().expect("cursor").to_string();
    let mut stream_live =
        Sse::connect_as(&svc, ACME.analyst, &format!("cursor={head}"), None).await;
    let body = json!({"actor_id": g.human, "content": "globex later"});
    let path = format!("/v1/conversations/{}/messages", g.conversation);
    created(&svc.post(Some(GLOBEX.bridge), &path, &body).await);
    let body = json!({"actor_id": acme.human, "content": "acme later"});
    let path = format!("/v1/conversations/{}/messages", acme.conversation);
    created(&svc.post(Some(ACME.bridge), &path, &body).await);
    let live = stream_live.expect().await.json();
    assert_eq!(live["conversationid"], acme.conversation.as_str(), "{live}");
    for _ in 0..items.len() {
        let e = stream.expect().await.json();
        assert_eq!(e["conversationid"], acme.conversation.as_str(), "{e}");
    }
    svc.stop().await;
}

async fn webhooks_belong_to_their_registrants_organizations(db: TestDb) {
    let svc = two_organizations(&db).await;
    let body = json!({"url": "http://127.0.0.1:9/acme", "types": ["*"]});
    let r = svc.post(Some(ACME.ops), "/v1/webhooks", &body).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["organizations"], json!(["acme"]));
    let id = r.id();
    let list = read(&svc, GLOBEX.ops, "/v1/webhooks").await;
    assert_eq!(list["items"], json!([]), "{list}");
    let path = format!("/v1/webhooks/{id}");
    assert_problem(
        &svc.get(Some(GLOBEX.ops), &path).await,
        404,
        "webhook_not_found",
    );
    let r = svc
        .post(Some(GLOBEX.ops), &format!("{path}/resume"), &json!({}))
        .await;
    assert_problem(&r, 404, "webhook_not_found");
    let r = svc
        .client
        .delete(format!("{}{path}", svc.base))
        .bearer_auth(GLOBEX.ops)
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(
        ids(&read(&svc, ACME.ops, "/v1/webhooks").await, "id"),
        vec![id.clone()]
    );
    let every = read(&svc, ADMIN, &path).await;
    assert_eq!(every["organizations"], json!(["acme"]));
    svc.stop().await;
}

async fn single_tenant_tokens_see_everything_as_before(db: TestDb) {
    let svc = two_organizations(&db).await;
    let body = json!({"kind": "human", "display_name": "Solo"});
    let actor = created(&svc.post(Some(ADMIN), "/v1/actors", &body).await);
    // `*` starts conversations with or without an organization.
    let body = json!({"actor_ids": [actor], "title": "no organization"});
    let none = created(&svc.post(Some(ADMIN), "/v1/conversations", &body).await);
    let body = json!({"actor_ids": [actor], "title": "t", "organization": "initech"});
    created(&svc.post(Some(ADMIN), "/v1/conversations", &body).await);
    wait_for(&svc, "/v1/conversations", |b| {
        b["items"].as_array().is_some_and(|i| i.len() == 2)
    })
    .await;
    // A conversation without an organization is nobody's but `*`'s.
    let path = format!("/v1/conversations/{none}");
    assert_problem(
        &svc.get(Some(ACME.analyst), &path).await,
        404,
        "conversation_not_found",
    );
    assert_eq!(
        read(&svc, ACME.analyst, "/v1/conversations").await["items"],
        json!([])
    );
    svc.stop().await;
}

on_both_backends!(
    each_organization_sees_and_touches_only_its_own,
    webhooks_belong_to_their_registrants_organizations,
    single_tenant_tokens_see_everything_as_before,
);
