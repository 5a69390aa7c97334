//! The MCP server end to end (issue 17, WORKERS.md "MCP tools"), with `rmcp`'s client over
//! Streamable HTTP against the running service: initialize and `tools/list` per role; a whole
//! turn worked through tools (claim, a fenced message and checkpoint → `turn.completed` with
//! the message as deliverable); a stale epoch refused with `turn_fenced` and nothing written;
//! a validation error as a tool error naming the field; a role refused a tool it may not
//! call; no token, no session. Resources: the templates, reads as the `GET` views, an
//! unknown resource as a protocol error, and subscriptions notified as a message is posted
//! or a turn claimed over HTTP; the `work_turn` prompt rendering a dispatched turn.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use pm_tests::{all_tokens, on_both_backends, TestDb, TestService, ADMIN, ANALYST, INGRESS, LLM};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorCode, GetPromptRequestParams,
    ReadResourceRequestParams, ResourceContents, ResourceUpdatedNotificationParam, Role,
    SubscribeRequestParams, Tool,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::reads::message;
use crate::sagas::{types, wait_for};
use crate::support::{config, events};
use crate::workers::{claim, dispatched};

/// An MCP client session.
pub(crate) type Client = RunningService<RoleClient, ()>;

/// An MCP client session that hears `notifications/resources/updated`.
type Listener = RunningService<RoleClient, Updates>;

/// A client handler forwarding each updated resource's URI.
struct Updates(mpsc::UnboundedSender<String>);

impl ClientHandler for Updates {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // The test may have stopped listening; nothing to tell then.
        let _ = self.0.send(params.uri);
    }
}

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
    try_connect_with(svc, token, turn, ()).await
}

/// [`try_connect`] with `handler` answering the server's requests and notifications.
async fn try_connect_with<H: ClientHandler>(
    svc: &TestService,
    token: Option<&str>,
    turn: Option<(&str, i64)>,
    handler: H,
) -> Result<RunningService<RoleClient, H>, String> {
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
    match tokio::time::timeout(Duration::from_secs(10), handler.serve(transport)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(format!("{e:?}")),
        Err(_) => Err("initialize took more than 10 s".to_string()),
    }
}

pub(crate) async fn connect(svc: &TestService, token: &str, turn: Option<(&str, i64)>) -> Client {
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
pub(crate) async fn ok_call(client: &Client, tool: &str, args: Value) -> Value {
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
    // The claim hands the worker the turn's span in the trace of the message it answers.
    let log = events(&svc, &format!("conversation_id={conv}")).await;
    let said = log
        .iter()
        .find(|e| e["data"]["id"] == human_message.as_str())
        .expect("the message's fact");
    let cause = pm_application::trace::TraceContext {
        traceparent: said["traceparent"].as_str().expect("traced").to_string(),
        tracestate: None,
    };
    let turn_id = uuid::Uuid::parse_str(&turn).expect("a turn id");
    assert_eq!(
        claimed["trace_context"]["traceparent"],
        cause.of_turn(turn_id).traceparent.as_str(),
        "{claimed}"
    );

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

/// A `claim_turn` its client gives up on while it waits (a timeout drops the call, and
/// rmcp's client sends `notifications/cancelled`) claims nothing: the turn dispatched
/// afterwards goes to the next caller, as its first claim.
async fn an_abandoned_claim_claims_nothing(db: TestDb) {
    let svc = start(&db).await;
    let worker = connect(&svc, LLM, None).await;
    let Value::Object(args) = json!({"wait_ms": 20000, "worker": "gone"}) else {
        unreachable!("an object")
    };
    let waiting = worker.call_tool(CallToolRequestParams::new("claim_turn").with_arguments(args));
    let gave_up = tokio::time::timeout(Duration::from_millis(500), waiting).await;
    assert!(gave_up.is_err(), "nothing was claimable: {gave_up:?}");
    // The cancellation is a notification: let the server hear it.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (_, _, _, turn) = dispatched(&svc).await;
    let claimed = claim(&svc, json!({"wait_ms": 2000, "worker": "next"})).await;
    assert_eq!(claimed.status, 200, "{}", claimed.text);
    let claimed = claimed.json;
    assert_eq!(claimed["turn"]["id"], turn.as_str(), "{claimed}");
    assert_eq!(claimed["worker"], "next", "{claimed}");
    assert_eq!(claimed["turn"]["claims"], 1, "{claimed}");
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
    // A key no header can carry, and one HTTP cannot read: refused as HTTP refuses them.
    for key in ["a\nb", "clé"] {
        let args = json!({"conversation_id": conv, "actor_id": llm, "content": "hi",
                          "idempotency_key": key});
        let p = refused_call(&client, "add_message", args, "invalid_parameter").await;
        assert_eq!(p["status"], 400, "{key:?}: {p}");
        let detail = p["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("Idempotency-Key"), "{key:?}: {detail}");
    }
    assert_eq!(types(&svc, &conv).await, before, "a refusal wrote nothing");
    client.cancel().await.expect("close");
    svc.stop().await;
}

async fn role_refused(db: TestDb) {
    let svc = start(&db).await;
    let (conv, llm, human_message, turn) = dispatched(&svc).await;
    projected(&svc, &conv, &human_message).await;
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
    // Nor speak as the AI: who may speak as whom (TRUST.md) holds through MCP too.
    refused_call(
        &ingress,
        "add_message",
        json!({"conversation_id": conv, "actor_id": llm, "content": "hi"}),
        "actor_forbidden",
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

/// A session with `token` that forwards the URIs of `notifications/resources/updated`.
async fn listen(svc: &TestService, token: &str) -> (Listener, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let client = try_connect_with(svc, Some(token), None, Updates(tx))
        .await
        .unwrap_or_else(|e| panic!("MCP initialize with token {token}: {e}"));
    (client, rx)
}

/// `resources/read` of `uri`: one JSON text content for that URI; answers the JSON.
async fn read(client: &Listener, uri: &str) -> Value {
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|e| panic!("resources/read {uri}: {e:?}"));
    assert_eq!(read.contents.len(), 1, "{uri}: one content: {read:?}");
    let ResourceContents::TextResourceContents {
        uri: read_uri,
        mime_type,
        text,
        ..
    } = &read.contents[0]
    else {
        panic!("{uri}: a text content: {read:?}")
    };
    assert_eq!(read_uri, uri, "{read:?}");
    assert_eq!(mime_type.as_deref(), Some("application/json"), "{read:?}");
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{uri}: the text content is JSON ({e}): {text}"))
}

/// The protocol error a request answered (`what` names it for the failure message).
fn protocol_error<T: std::fmt::Debug>(what: &str, r: Result<T, ServiceError>) -> rmcp::ErrorData {
    match r {
        Err(ServiceError::McpError(e)) => e,
        other => panic!("{what} is not a protocol error: {other:?}"),
    }
}

/// `resources/read` of `uri` is refused with "resource not found".
async fn not_found(client: &Listener, uri: &str) -> rmcp::ErrorData {
    let what = format!("resources/read {uri}");
    let e = protocol_error(
        &what,
        client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await,
    );
    // A session opened with `initialize` keeps -32002 (2026-07-28 would say -32602).
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{what}: {e:?}");
    assert!(!e.message.trim().is_empty(), "{what}: {e:?}");
    e
}

/// `resources/subscribe` to `uri` (legacy-only in the SDK: sessions opened with
/// `initialize` keep it).
#[allow(deprecated)]
async fn subscribe(client: &Listener, uri: &str) -> Result<(), ServiceError> {
    client.subscribe(SubscribeRequestParams::new(uri)).await
}

/// Drops the notifications already sent: waits until none came for 300 ms (3 s at most).
async fn quiet(heard: &mut mpsc::UnboundedReceiver<String>) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(300), heard.recv()).await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the client's notifications ended"),
            Err(_) => return,
        }
    }
}

/// Waits (5 s at most) for `notifications/resources/updated` about `uri`.
async fn updated(heard: &mut mpsc::UnboundedReceiver<String>, uri: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut others = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, heard.recv()).await {
            Ok(Some(got)) if got == uri => return,
            Ok(Some(got)) => others.push(got),
            Ok(None) => panic!("the client's notifications ended before {uri}; heard {others:?}"),
            Err(_) => panic!("no resources/updated for {uri} within 5 s; heard {others:?}"),
        }
    }
}

/// Reads `uri` until `done` holds (10 s at most); answers the last read.
async fn read_until(client: &Listener, uri: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = read(client, uri).await;
        if done(&seen) {
            return seen;
        }
        assert!(Instant::now() < deadline, "{uri} never got there: {seen}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the read model shows the conversation with its one human message (resources
/// and prompts read it without `min_position`).
async fn projected(svc: &TestService, conv: &str, human_message: &str) {
    wait_for(svc, &format!("/v1/conversations/{conv}"), |c| {
        c["message_count"] == 1
    })
    .await;
    wait_for(
        svc,
        &format!("/v1/conversations/{conv}/messages/{human_message}"),
        |m| m["id"] == human_message,
    )
    .await;
}

async fn resources_read_and_notify(db: TestDb) {
    let svc = start(&db).await;
    let (conv, llm, human_message, turn) = dispatched(&svc).await;
    projected(&svc, &conv, &human_message).await;
    let (client, mut heard) = listen(&svc, ANALYST).await;
    let info = client.peer_info().expect("the server's initialize answer");
    let resources = info.capabilities.resources.clone();
    assert_eq!(
        resources.and_then(|r| r.subscribe),
        Some(true),
        "resources with subscribe: {info:?}"
    );

    // The three templates, JSON each.
    let templates = client
        .list_all_resource_templates()
        .await
        .unwrap_or_else(|e| panic!("resources/templates/list: {e:?}"));
    let uris: BTreeSet<String> = templates.iter().map(|t| t.uri_template.clone()).collect();
    assert_eq!(
        uris,
        set(&[
            "pm://conversations/{id}",
            "pm://tasks/{id}",
            "pm://turns/{id}"
        ]),
        "{templates:?}"
    );
    assert_eq!(uris.len(), templates.len(), "{templates:?}");
    for template in &templates {
        assert_eq!(
            template.mime_type.as_deref(),
            Some("application/json"),
            "{template:?}"
        );
        let description = template.description.as_deref().unwrap_or_default();
        assert!(!description.trim().is_empty(), "{template:?}");
    }

    // Reads are the GET views.
    let conv_uri = format!("pm://conversations/{conv}");
    let view = read(&client, &conv_uri).await;
    assert_eq!(view["id"], conv.as_str(), "{view}");
    assert_eq!(view["title"], "Work", "{view}");
    let count = view["message_count"].as_i64().expect("message_count");
    assert_eq!(count, 1, "{view}");
    let turn_uri = format!("pm://turns/{turn}");
    let row = read(&client, &turn_uri).await;
    assert_eq!(row["id"], turn.as_str(), "{row}");
    assert_eq!(row["state"], "dispatched", "{row}");
    assert_eq!(row["conversation_id"], conv.as_str(), "{row}");
    assert_eq!(row["input"]["message_id"], human_message.as_str(), "{row}");

    // An unknown resource is a protocol error, unlike a tool's refusal.
    let unknown = uuid::Uuid::now_v7();
    for uri in [
        "pm://nope/x".to_string(),
        "pm://conversations/not-a-uuid".to_string(),
        format!("pm://widgets/{unknown}"),
    ] {
        not_found(&client, &uri).await;
    }
    for uri in [
        format!("pm://conversations/{unknown}"),
        format!("pm://turns/{unknown}"),
        format!("pm://tasks/{unknown}"),
    ] {
        let e = not_found(&client, &uri).await;
        let problem = e.data.unwrap_or_default();
        assert_eq!(problem["status"], 404, "{uri}: {problem}");
    }
    let e = protocol_error(
        "subscribe to an unknown conversation",
        subscribe(&client, &format!("pm://conversations/{unknown}")).await,
    );
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{e:?}");

    // A subscriber hears of a message posted over HTTP, then reads it counted.
    subscribe(&client, &conv_uri)
        .await
        .unwrap_or_else(|e| panic!("resources/subscribe {conv_uri}: {e:?}"));
    quiet(&mut heard).await;
    let human = view["actor_ids"]
        .as_array()
        .and_then(|a| a.iter().find_map(|id| id.as_str().filter(|id| *id != llm)))
        .expect("the human actor")
        .to_string();
    message(&svc, &conv, &human, json!({"content": "one more thing"})).await;
    updated(&mut heard, &conv_uri).await;
    let view = read_until(&client, &conv_uri, |v| v["message_count"] != count).await;
    assert_eq!(view["message_count"], count + 1, "{view}");
    client.cancel().await.expect("close");
    svc.stop().await;
}

async fn work_turn_prompt(db: TestDb) {
    let svc = start(&db).await;
    let (conv, _, human_message, turn) = dispatched(&svc).await;
    projected(&svc, &conv, &human_message).await;
    let client = connect(&svc, LLM, None).await;
    let info = client.peer_info().expect("the server's initialize answer");
    assert!(info.capabilities.prompts.is_some(), "{info:?}");

    let prompts = client
        .list_all_prompts()
        .await
        .unwrap_or_else(|e| panic!("prompts/list: {e:?}"));
    let prompt = prompts
        .iter()
        .find(|p| p.name == "work_turn")
        .unwrap_or_else(|| panic!("no work_turn in {prompts:?}"));
    let description = prompt.description.as_deref().unwrap_or_default();
    assert!(!description.trim().is_empty(), "{prompt:?}");
    let arguments = prompt.arguments.clone().unwrap_or_default();
    assert_eq!(arguments.len(), 1, "{prompt:?}");
    assert_eq!(arguments[0].name, "turn_id", "{prompt:?}");
    assert_eq!(arguments[0].required, Some(true), "{prompt:?}");

    // The dispatched turn's context, as one user message.
    let Value::Object(args) = json!({"turn_id": turn}) else {
        unreachable!()
    };
    let got = client
        .get_prompt(GetPromptRequestParams::new("work_turn").with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("prompts/get work_turn {turn}: {e:?}"));
    assert_eq!(got.messages.len(), 1, "{got:?}");
    assert_eq!(got.messages[0].role, Role::User, "{got:?}");
    let text = &got.messages[0]
        .content
        .as_text()
        .unwrap_or_else(|| panic!("a text message: {got:?}"))
        .text;
    for wanted in [
        "please",
        "\"Work\"",
        turn.as_str(),
        "add_message",
        "create_conversation_checkpoint",
    ] {
        assert!(text.contains(wanted), "{wanted:?} is not in {text:?}");
    }

    // No turn, an unknown turn or prompt: invalid params.
    let unknown = uuid::Uuid::now_v7().to_string();
    let cases = [
        ("work_turn", json!({})),
        ("work_turn", json!({"turn_id": "not-a-uuid"})),
        ("work_turn", json!({"turn_id": unknown})),
        ("no_such_prompt", json!({"turn_id": turn})),
    ];
    for (name, args) in cases {
        let Value::Object(args) = args else {
            unreachable!()
        };
        let mut params = GetPromptRequestParams::new(name);
        if !args.is_empty() {
            params = params.with_arguments(args.clone());
        }
        let what = format!("prompts/get {name} {args:?}");
        let e = protocol_error(&what, client.get_prompt(params).await);
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{what}: {e:?}");
    }
    client.cancel().await.expect("close");
    svc.stop().await;
}

async fn turn_subscription(db: TestDb) {
    let svc = start(&db).await;
    let (conv, _, _, turn) = dispatched(&svc).await;
    let (client, mut heard) = listen(&svc, LLM).await;
    let turn_uri = format!("pm://turns/{turn}");
    subscribe(&client, &turn_uri)
        .await
        .unwrap_or_else(|e| panic!("resources/subscribe {turn_uri}: {e:?}"));
    quiet(&mut heard).await;

    // Claimed over HTTP: the subscriber hears of it and reads it streaming.
    let c = svc
        .post(Some(LLM), "/v1/turns/claim", &json!({"worker": "w-1"}))
        .await;
    assert_eq!(c.status, 200, "{}", c.text);
    assert_eq!(c.json["turn"]["id"], turn.as_str(), "{}", c.text);
    updated(&mut heard, &turn_uri).await;
    let row = read_until(&client, &turn_uri, |t| t["state"] != "dispatched").await;
    assert_eq!(row["state"], "streaming", "{row}");
    assert_eq!(row["conversation_id"], conv.as_str(), "{row}");
    client.cancel().await.expect("close");
    svc.stop().await;
}

/// TRUST.md "Organizations" over MCP: tools and resources call the HTTP API as the
/// session's principal, so another organization's things are missing ones.
async fn organizations_scope_tools_and_resources(db: TestDb) {
    use crate::organizations::{org, two_organizations, ACME, GLOBEX};
    let svc = two_organizations(&db).await;
    let globex = org(&svc, "globex", GLOBEX).await;
    let acme = org(&svc, "acme", ACME).await;
    wait_for(&svc, "/v1/tasks", |b| {
        b["items"].as_array().is_some_and(|i| i.len() == 2)
    })
    .await;
    let client = connect(&svc, ACME.model, None).await;
    let theirs = json!({"conversation_id": globex.conversation});
    refused_call(
        &client,
        "get_conversation",
        theirs,
        "conversation_not_found",
    )
    .await;
    let say = json!({"conversation_id": globex.conversation, "actor_id": globex.human,
                     "content": "from acme"});
    refused_call(&client, "add_message", say, "conversation_not_found").await;
    let theirs = json!({"task_id": globex.task});
    refused_call(&client, "get_task", theirs, "task_not_found").await;
    let mine = json!({"conversation_id": acme.conversation});
    let mine = ok(
        "get_conversation",
        &call(&client, "get_conversation", mine).await,
    );
    assert_eq!(mine["id"], acme.conversation.as_str());
    let tasks = ok("list_tasks", &call(&client, "list_tasks", json!({})).await);
    let ids: Vec<&Value> = tasks["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ids, vec![&json!(acme.task)], "{tasks}");

    let (listener, _heard) = listen(&svc, ACME.analyst).await;
    not_found(
        &listener,
        &format!("pm://conversations/{}", globex.conversation),
    )
    .await;
    not_found(&listener, &format!("pm://tasks/{}", globex.task)).await;
    let e = protocol_error(
        "subscribe to another organization's conversation",
        subscribe(
            &listener,
            &format!("pm://conversations/{}", globex.conversation),
        )
        .await,
    );
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{e:?}");
    let mine = read(
        &listener,
        &format!("pm://conversations/{}", acme.conversation),
    )
    .await;
    assert_eq!(mine["id"], acme.conversation.as_str());
    svc.stop().await;
}

on_both_backends!(
    organizations_scope_tools_and_resources,
    tools_per_role,
    turn_worked_through_mcp,
    an_abandoned_claim_claims_nothing,
    stale_epoch_is_fenced,
    validation_error_names_the_field,
    role_refused,
    no_token_no_session,
    resources_read_and_notify,
    work_turn_prompt,
    turn_subscription,
);
