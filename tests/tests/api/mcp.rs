//! The MCP server end to end (issue 17, WORKERS.md "MCP tools"), with `rmcp`'s client over
//! Streamable HTTP against the running service: initialize and `tools/list` per role; a whole
//! turn worked through tools (claim, a fenced message and checkpoint → `turn.completed` with
//! the message as deliverable); a stale epoch refused with `turn_fenced` and nothing written;
//! a validation error as a tool error naming the field; a role refused a tool it may not
//! call; no token, no session.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use pm_tests::{all_tokens, on_both_backends, TestDb, TestService, ADMIN, ANALYST, INGRESS, LLM};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::sagas::{types, wait_for};
use crate::support::{config, events};
use crate::workers::dispatched;

/// An MCP client session.
type Client = RunningService<RoleClient, ()>;

/// Every tool's name, for an `admin` or `llm` token.
const ALL: [&str; 16] = [
    "add_message",
    "claim_turn",
    "create_conversation_checkpoint",
    "create_task",
    "create_task_checkpoint",
    "get_conversation",
    "get_session",
    "get_task",
    "get_turn",
    "heartbeat_turn",
    "list_messages",
    "list_tasks",
    "release_turn",
    "report_tool_calls",
    "report_turn_error",
    "report_usage",
];

/// The reads, for every role.
const READS: [&str; 6] = [
    "get_conversation",
    "get_session",
    "get_task",
    "get_turn",
    "list_messages",
    "list_tasks",
];

/// Properties each tool's input schema must have: its ids and the HTTP body's main fields.
const PROPERTIES: [(&str, &[&str]); 16] = [
    ("add_message", &["conversation_id", "actor_id", "content"]),
    (
        "claim_turn",
        &["conversation_id", "kind", "wait_ms", "lease_ms", "worker"],
    ),
    (
        "create_conversation_checkpoint",
        &["conversation_id", "checkpoint_type", "summary"],
    ),
    ("create_task", &["conversation_id", "instructions"]),
    ("create_task_checkpoint", &["task_id", "type"]),
    ("get_conversation", &["conversation_id"]),
    ("get_session", &["conversation_id"]),
    ("get_task", &["task_id"]),
    ("get_turn", &["turn_id"]),
    ("heartbeat_turn", &["turn_id", "lease_ms"]),
    (
        "list_messages",
        &["conversation_id", "task_id", "limit", "cursor"],
    ),
    ("list_tasks", &[]),
    ("release_turn", &["turn_id", "reason"]),
    ("report_tool_calls", &["turn_id", "calls"]),
    ("report_turn_error", &["turn_id", "error_type", "message"]),
    (
        "report_usage",
        &["turn_id", "input_tokens", "output_tokens"],
    ),
];

/// A service on `db` with every role's token.
async fn start(db: &TestDb) -> TestService {
    let mut config = config(db);
    config.auth_tokens = all_tokens();
    TestService::start_with(config).await
}

/// Opens an MCP session on `/mcp` with `token` (none: no `Authorization`) and, when given,
/// the turn scope headers `PM-Turn-Id` and `PM-Turn-Epoch`.
async fn try_connect(
    svc: &TestService,
    token: Option<&str>,
    turn: Option<(&str, i64)>,
) -> Result<Client, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", svc.base));
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    if let Some((turn, epoch)) = turn {
        let headers = HashMap::from([
            (
                HeaderName::from_static("pm-turn-id"),
                HeaderValue::from_str(turn).expect("a turn id is a header value"),
            ),
            (
                HeaderName::from_static("pm-turn-epoch"),
                HeaderValue::from(epoch),
            ),
        ]);
        config = config.custom_headers(headers);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    match tokio::time::timeout(Duration::from_secs(10), ().serve(transport)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(format!("{e:?}")),
        Err(_) => Err("initialize took more than 10 s".to_string()),
    }
}

async fn connect(svc: &TestService, token: &str, turn: Option<(&str, i64)>) -> Client {
    try_connect(svc, Some(token), turn)
        .await
        .unwrap_or_else(|e| panic!("MCP initialize with token {token} and {turn:?}: {e}"))
}

/// `tools/call`; a protocol error fails the test (refusals are tool results).
async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments of {tool} are an object")
    };
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args.clone());
    client
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("tools/call {tool} {args:?} is a protocol error: {e:?}"))
}

/// A successful result's structured content, checked against its one text content.
fn ok(tool: &str, r: &CallToolResult) -> Value {
    assert_ne!(r.is_error, Some(true), "{tool} failed: {r:?}");
    let structured = r
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("{tool}: no structured content in {r:?}"));
    assert_eq!(r.content.len(), 1, "{tool}: one content block: {r:?}");
    let text = &r.content[0]
        .as_text()
        .unwrap_or_else(|| panic!("{tool}: a text content: {r:?}"))
        .text;
    let parsed: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{tool}: the text content is JSON ({e}): {text}"));
    assert_eq!(
        parsed, structured,
        "{tool}: text and structured content differ"
    );
    structured
}

/// `tool` called with `args` succeeds; answers its structured content.
async fn ok_call(client: &Client, tool: &str, args: Value) -> Value {
    ok(tool, &call(client, tool, args).await)
}

/// A refusal: `isError` with the problem as structured content; answers the problem.
fn refused(tool: &str, r: &CallToolResult, code: &str) -> Value {
    assert_eq!(r.is_error, Some(true), "{tool} was not refused: {r:?}");
    let problem = r
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("{tool}: the refusal has no structured content: {r:?}"));
    assert_eq!(problem["code"], code, "{tool}: {problem}");
    for key in ["type", "title", "status", "detail"] {
        assert!(!problem[key].is_null(), "{tool}: no {key} in {problem}");
    }
    assert!(!r.content.is_empty(), "{tool}: a refusal says why: {r:?}");
    problem
}

/// `tool` called with `args` is refused with `code`; answers the problem.
async fn refused_call(client: &Client, tool: &str, args: Value, code: &str) -> Value {
    refused(tool, &call(client, tool, args).await, code)
}

fn names(tools: &[Tool]) -> BTreeSet<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(ToString::to_string).collect()
}

/// The tools a role sees, each with a description and an object schema with its arguments.
async fn listed(svc: &TestService, token: &str) -> BTreeSet<String> {
    let client = connect(svc, token, None).await;
    let info = client.peer_info().expect("the server's initialize answer");
    assert!(info.capabilities.tools.is_some(), "{info:?}");
    let tools = client
        .list_all_tools()
        .await
        .unwrap_or_else(|e| panic!("tools/list with {token}: {e:?}"));
    let mut missing = Vec::new();
    for tool in &tools {
        let name = tool.name.as_ref();
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(!description.trim().is_empty(), "{name} has no description");
        let schema = &tool.input_schema;
        assert_eq!(
            schema.get("type"),
            Some(&json!("object")),
            "{name}: {schema:?}"
        );
        let (_, wanted) = PROPERTIES
            .iter()
            .find(|(tool, _)| *tool == name)
            .unwrap_or_else(|| panic!("an unexpected tool {name}"));
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for property in *wanted {
            if !properties.contains_key(*property) {
                missing.push(format!("{name}.{property}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "input schemas without these arguments: {missing:?}"
    );
    let listed = names(&tools);
    assert_eq!(listed.len(), tools.len(), "a tool listed twice: {listed:?}");
    client.cancel().await.expect("close");
    listed
}

async fn tools_per_role(db: TestDb) {
    let svc = start(&db).await;
    assert_eq!(listed(&svc, ANALYST).await, set(&READS), "analyst");
    let mut ingress = set(&READS);
    ingress.insert("add_message".to_string());
    assert_eq!(listed(&svc, INGRESS).await, ingress, "ingress");
    assert_eq!(listed(&svc, LLM).await, set(&ALL), "llm");
    assert_eq!(listed(&svc, ADMIN).await, set(&ALL), "admin");
    svc.stop().await;
}

async fn turn_worked_through_mcp(db: TestDb) {
    let svc = start(&db).await;
    let (conv, llm, human_message, turn) = dispatched(&svc).await;

    // The worker claims over MCP: the claim answer, as HTTP gives it.
    let worker = connect(&svc, LLM, None).await;
    let claimed = ok_call(
        &worker,
        "claim_turn",
        json!({"wait_ms": 5000, "worker": "mcp-1"}),
    )
    .await;
    assert_eq!(claimed["turn"]["id"], turn.as_str(), "{claimed}");
    assert_eq!(claimed["turn"]["state"], "streaming", "{claimed}");
    assert_eq!(claimed["worker"], "mcp-1", "{claimed}");
    assert!(claimed["lease_expires_at"].is_string(), "{claimed}");
    assert_eq!(
        claimed["context"]["message"]["id"],
        human_message.as_str(),
        "{claimed}"
    );
    assert_eq!(
        claimed["context"]["conversation"]["id"],
        conv.as_str(),
        "{claimed}"
    );
    let epoch = claimed["turn_epoch"].as_i64().expect("turn_epoch");

    // The model works the turn through a session scoped to it.
    let model = connect(&svc, LLM, Some((&turn, epoch))).await;
    let beat = ok_call(
        &model,
        "heartbeat_turn",
        json!({"turn_id": turn, "lease_ms": 60000}),
    )
    .await;
    assert_eq!(beat["turn_epoch"], epoch, "{beat}");
    assert!(beat["lease_expires_at"].is_string(), "{beat}");
    let used = ok_call(
        &model,
        "report_usage",
        json!({"turn_id": turn, "input_tokens": 10, "output_tokens": 3}),
    )
    .await;
    assert_eq!(
        (
            used["input_tokens"].as_u64(),
            used["output_tokens"].as_u64()
        ),
        (Some(10), Some(3)),
        "{used}"
    );
    let said = ok_call(
        &model,
        "add_message",
        json!({"conversation_id": conv, "actor_id": llm, "content": "on it"}),
    )
    .await;
    let said_id = said["id"].as_str().expect("the message's id").to_string();
    assert_eq!(said["content"], "on it", "{said}");
    let log = events(&svc, &format!("conversation_id={conv}")).await;
    let fact = log
        .iter()
        .find(|e| e["type"] == "project_manager.message.added" && e["data"]["id"] == said["id"])
        .expect("the message is on the log");
    assert_eq!(
        (fact["turnid"].as_str(), fact["turnepoch"].as_i64()),
        (Some(turn.as_str()), Some(epoch)),
        "the message belongs to the turn: {fact}"
    );
    let checkpoint = ok_call(
        &model,
        "create_conversation_checkpoint",
        json!({"conversation_id": conv, "checkpoint_type": "BEGIN_WORK", "summary": "plan"}),
    )
    .await;
    assert_eq!(checkpoint["checkpoint_type"], "BEGIN_WORK", "{checkpoint}");
    assert!(checkpoint["id"].is_string(), "{checkpoint}");

    // The turn completed with the message as its deliverable, over HTTP and over MCP.
    let row = wait_for(&svc, &format!("/v1/turns/{turn}"), |t| {
        t["state"] == "completed"
    })
    .await;
    assert_eq!(row["deliverable"], said_id.as_str(), "{row}");
    let seen = ok_call(&worker, "get_turn", json!({"turn_id": turn})).await;
    assert_eq!(
        (seen["state"].as_str(), seen["deliverable"].as_str()),
        (Some("completed"), Some(said_id.as_str())),
        "{seen}"
    );
    let log = events(&svc, &format!("conversation_id={conv}")).await;
    let completed = log
        .iter()
        .find(|e| e["type"] == "turn.completed")
        .expect("turn.completed on the log");
    assert_eq!(
        completed["data"]["usage"]["input_tokens"], 10,
        "{completed}"
    );

    // The reads see the message; nothing more is claimable.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let page = ok_call(&model, "list_messages", json!({"conversation_id": conv})).await;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        if items.iter().any(|m| m["id"] == said_id.as_str()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "list_messages never had it: {page}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let conversation = ok_call(&model, "get_conversation", json!({"conversation_id": conv})).await;
    assert_eq!(conversation["id"], conv.as_str(), "{conversation}");
    let session = ok_call(&model, "get_session", json!({"conversation_id": conv})).await;
    assert!(session.is_object(), "{session}");
    let none = ok_call(&worker, "claim_turn", json!({"wait_ms": 100})).await;
    assert_eq!(none, json!({"turn": null}));

    model.cancel().await.expect("close");
    worker.cancel().await.expect("close");
    svc.stop().await;
}

async fn stale_epoch_is_fenced(db: TestDb) {
    let svc = start(&db).await;
    let (conv, llm, _, turn) = dispatched(&svc).await;
    // Claimed over HTTP, worked over MCP.
    let c = svc
        .post(Some(LLM), "/v1/turns/claim", &json!({"worker": "w-1"}))
        .await;
    assert_eq!(c.status, 200, "{}", c.text);
    let epoch = c.json["turn_epoch"].as_i64().expect("turn_epoch");
    let before = types(&svc, &conv).await;
    let say = json!({"conversation_id": conv, "actor_id": llm, "content": "late"});

    for stale in [epoch - 1, epoch + 1] {
        let client = connect(&svc, LLM, Some((&turn, stale))).await;
        let p = refused_call(&client, "add_message", say.clone(), "turn_fenced").await;
        assert_eq!(p["status"], 409, "{p}");
        refused_call(
            &client,
            "create_conversation_checkpoint",
            json!({"conversation_id": conv, "checkpoint_type": "BEGIN_WORK", "summary": "s"}),
            "turn_fenced",
        )
        .await;
        refused_call(
            &client,
            "report_usage",
            json!({"turn_id": turn, "input_tokens": 1, "output_tokens": 1}),
            "turn_fenced",
        )
        .await;
        client.cancel().await.expect("close");
    }
    let unknown = uuid::Uuid::now_v7().to_string();
    let client = connect(&svc, LLM, Some((&unknown, 1))).await;
    let p = refused_call(&client, "add_message", say.clone(), "turn_not_found").await;
    assert_eq!(p["status"], 404, "{p}");
    client.cancel().await.expect("close");
    assert_eq!(types(&svc, &conv).await, before, "a refusal wrote nothing");

    // The current epoch is served.
    let client = connect(&svc, LLM, Some((&turn, epoch))).await;
    ok_call(&client, "add_message", say).await;
    client.cancel().await.expect("close");
    svc.stop().await;
}

async fn validation_error_names_the_field(db: TestDb) {
    let svc = start(&db).await;
    let (conv, llm, _, _) = dispatched(&svc).await;
    let before = types(&svc, &conv).await;
    let client = connect(&svc, LLM, None).await;
    let cases = [
        (
            "create_conversation_checkpoint",
            json!({"conversation_id": conv, "checkpoint_type": "DONE", "summary": "s"}),
            "checkpoint_type",
        ),
        (
            "create_conversation_checkpoint",
            json!({"conversation_id": conv, "checkpoint_type": "BEGIN_WORK"}),
            "summary",
        ),
        (
            "add_message",
            json!({"conversation_id": conv, "actor_id": llm, "content": " \n "}),
            "content",
        ),
    ];
    for (tool, args, field) in cases {
        let p = refused(
            tool,
            &call(&client, tool, args.clone()).await,
            "validation_failed",
        );
        assert_eq!(p["status"], 422, "{tool} {args}: {p}");
        let detail = p["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(field),
            "{tool} {args}: {detail:?} names no {field}"
        );
    }
    let unknown = uuid::Uuid::now_v7().to_string();
    let p = refused_call(
        &client,
        "get_turn",
        json!({"turn_id": unknown}),
        "turn_not_found",
    )
    .await;
    assert_eq!(p["status"], 404, "{p}");
    assert_eq!(types(&svc, &conv).await, before, "a refusal wrote nothing");
    client.cancel().await.expect("close");
    svc.stop().await;
}

async fn role_refused(db: TestDb) {
    let svc = start(&db).await;
    let (conv, llm, _, turn) = dispatched(&svc).await;
    let before = types(&svc, &conv).await;

    // The analyst reads but writes nothing.
    let analyst = connect(&svc, ANALYST, None).await;
    let seen = ok_call(
        &analyst,
        "get_conversation",
        json!({"conversation_id": conv}),
    )
    .await;
    assert_eq!(seen["id"], conv.as_str(), "{seen}");
    let p = refused_call(
        &analyst,
        "add_message",
        json!({"conversation_id": conv, "actor_id": llm, "content": "hi"}),
        "forbidden",
    )
    .await;
    assert_eq!(p["status"], 403, "{p}");
    refused_call(
        &analyst,
        "report_usage",
        json!({"turn_id": turn, "input_tokens": 1, "output_tokens": 1}),
        "forbidden",
    )
    .await;
    analyst.cancel().await.expect("close");

    // Ingress may not claim: the turn stays dispatched.
    let ingress = connect(&svc, INGRESS, None).await;
    refused_call(&ingress, "claim_turn", json!({"wait_ms": 0}), "forbidden").await;
    refused_call(
        &ingress,
        "create_conversation_checkpoint",
        json!({"conversation_id": conv, "checkpoint_type": "BEGIN_WORK", "summary": "s"}),
        "forbidden",
    )
    .await;
    ingress.cancel().await.expect("close");
    assert_eq!(types(&svc, &conv).await, before, "a refusal wrote nothing");
    let row = svc.get(Some(ADMIN), &format!("/v1/turns/{turn}")).await;
    assert_eq!(row.json["state"], "dispatched", "{}", row.text);
    svc.stop().await;
}

async fn no_token_no_session(db: TestDb) {
    let svc = start(&db).await;
    for token in [None, Some("not-a-token")] {
        let mut request = svc
            .client
            .post(format!("{}/mcp", svc.base))
            .header("accept", "application/json, text/event-stream");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let r = request
            .json(&json!({
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"}
                }
            }))
            .send()
            .await
            .expect("POST /mcp");
        assert_eq!(r.status(), 401, "token {token:?}");
        let failed = try_connect(&svc, token, None).await;
        assert!(failed.is_err(), "initialize with token {token:?} succeeded");
    }
    svc.stop().await;
}

on_both_backends!(
    tools_per_role,
    turn_worked_through_mcp,
    stale_epoch_is_fenced,
    validation_error_names_the_field,
    role_refused,
    no_token_no_session,
);
