//! The MCP tools (WORKERS.md "MCP tools"): each is one HTTP endpoint of the route table,
//! its input schema generated from that endpoint's OpenAPI operation (path ids, query
//! filters, request body), its roles the endpoint's. A call is that HTTP request, sent to
//! the service's own router with the caller's token and turn fence: the same validation,
//! idempotency, facts and answers, and no business logic here.

use std::sync::LazyLock;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request};
use axum::Router;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{json, Map, Value};
use tower::ServiceExt;

use crate::auth::Caller;
use crate::routes::access::Access;

/// One tool: a name a model calls, the endpoint it stands for, what it is for.
pub struct McpTool {
    /// The tool's name.
    pub name: &'static str,
    /// The endpoint's method.
    method: Method,
    /// The endpoint's path template, as the route table and `/openapi.json` name it.
    path: &'static str,
    /// The path parameter (`{id}`) and the argument that fills it, when there is one.
    id: Option<(&'static str, &'static str)>,
    /// What a model should know to use it.
    description: &'static str,
    /// Its endpoint's access (from the route table) and its `tools/list` entry (schema
    /// generated from the OpenAPI document): fixed for the process, made on first use.
    made: std::sync::OnceLock<(Access, Tool)>,
}

const fn tool(
    name: &'static str,
    method: Method,
    path: &'static str,
    id: Option<(&'static str, &'static str)>,
    description: &'static str,
) -> McpTool {
    McpTool {
        name,
        method,
        path,
        id,
        description,
        made: std::sync::OnceLock::new(),
    }
}

/// The tools, in the order `tools/list` shows them.
pub static TOOLS: LazyLock<Vec<McpTool>> = LazyLock::new(|| {
    let conversation = Some(("id", "conversation_id"));
    let task = Some(("id", "task_id"));
    let turn = Some(("id", "turn_id"));
    vec![
        tool("claim_turn", Method::POST, "/v1/turns/claim", None,
            "Claim the oldest claimable turn (optionally of one agent, actor, conversation or kind), \
             long-polling up to wait_ms. Answers the turn, its turn_epoch, the lease and the context \
             (conversation, message or task, tool calls), or {\"turn\": null} when nothing is claimable. \
             Send PM-Turn-Id and PM-Turn-Epoch on the MCP connection that works the turn."),
        tool("heartbeat_turn", Method::POST, "/v1/turns/{id}/heartbeat", turn,
            "Keep the claim's lease alive for lease_ms more (fenced by the turn headers; writes nothing)."),
        tool("release_turn", Method::POST, "/v1/turns/{id}/release", turn,
            "Give the claimed turn back: another worker may claim it (fenced)."),
        tool("report_turn_error", Method::POST, "/v1/turns/{id}/error", turn,
            "End the claimed turn in error (error_type, message); counts toward the session's error threshold (fenced)."),
        tool("report_usage", Method::POST, "/v1/turns/{id}/usage", turn,
            "Report tokens spent on the claimed turn (input_tokens, output_tokens; added up; fenced)."),
        tool("report_tool_calls", Method::POST, "/v1/turns/{id}/tool-calls", turn,
            "Ask for tool calls (a batch of 1-64 with unique call_ids): the turn suspends until every \
             call has its result (approvals, executors, timeouts), then it can be claimed again with the \
             results in its context. Ends this claim (fenced). The service's tool policies decide each call: \
             it runs, waits for a person, or is denied at once; requires_approval can only ask for more care."),
        tool("add_message", Method::POST, "/v1/conversations/{id}/messages", conversation,
            "Add a message to a conversation as one of its actors (task_id: about that task). Fenced to the \
             claimed turn when the turn headers are sent."),
        tool("create_conversation_checkpoint", Method::POST, "/v1/conversations/{id}/checkpoints", conversation,
            "Record a decision on the conversation: BEGIN_WORK (tasks may follow), NEED_INFORMATION (ask the \
             user), CLOSE_CONVERSATION, ... It completes the claimed conversation turn, delivering its last message."),
        tool("create_task", Method::POST, "/v1/conversations/{id}/tasks", conversation,
            "Create a task from a BEGIN_WORK checkpoint of the conversation, with instructions and an optional assignee."),
        tool("create_task_checkpoint", Method::POST, "/v1/tasks/{id}/checkpoints", task,
            "Report progress on a task: WORK_STARTED, WORK_PAUSED, WORK_COMPLETED, ... (the task's status is its latest)."),
        tool("get_conversation", Method::GET, "/v1/conversations/{id}", conversation,
            "A conversation with its latest checkpoint, counts and task counts by status."),
        tool("list_messages", Method::GET, "/v1/conversations/{id}/messages", conversation,
            "A conversation's messages, oldest first, a page at a time (pass next_cursor back as cursor)."),
        tool("list_tasks", Method::GET, "/v1/tasks", None,
            "Tasks matching the filters (conversation, status, assignee, ...), a page at a time."),
        tool("get_task", Method::GET, "/v1/tasks/{id}", task,
            "A task with its status and its checkpoint history."),
        tool("get_session", Method::GET, "/v1/sessions/{conversation_id}", Some(("conversation_id", "conversation_id")),
            "A conversation's session: lifecycle and conversation state, agents, tokens used and budget."),
        tool("get_turn", Method::GET, "/v1/turns/{id}", turn,
            "A turn with its state, lease and tool calls (with their results)."),
    ]
});

impl McpTool {
    /// The roles that may call it (admin always may), as its endpoint allows.
    pub fn allows(&self, caller: &Caller) -> bool {
        caller.require(&self.made().0.roles()).is_ok()
    }

    /// The tool as `tools/list` shows it.
    pub fn describe(&self) -> Tool {
        self.made().1.clone()
    }

    fn made(&self) -> &(Access, Tool) {
        self.made.get_or_init(|| {
            let access = crate::routes::table::endpoints()
                .into_iter()
                .find(|e| e.method == self.method && e.path == self.path)
                .map_or(Access::Admin, |e| e.access);
            let schema = input_schema(self, access);
            let tool = Tool::new(self.name, self.description, std::sync::Arc::new(schema));
            (access, tool)
        })
    }

    /// Calls the endpoint through `router` with `headers` (the caller's token and turn
    /// fence) and `arguments`; answers the endpoint's answer as the tool's result.
    pub async fn call(
        &self,
        router: &Router,
        headers: &HeaderMap,
        arguments: JsonObject,
    ) -> CallToolResult {
        let request = match self.request(headers, arguments) {
            Ok(request) => request,
            Err(problem) => return CallToolResult::structured_error(problem),
        };
        let (ok, body) = send(router, request).await;
        match (ok, body) {
            // `claim_turn`'s 204: nothing claimable within wait_ms.
            (true, Value::Null) => CallToolResult::structured(json!({"turn": null})),
            (true, body) => CallToolResult::structured(body),
            (false, body) => CallToolResult::structured_error(body),
        }
    }

    /// The HTTP request of a call: the id argument in the path, the others in the query
    /// (a read) or the body (a write); `idempotency_key` as the header.
    fn request(&self, headers: &HeaderMap, arguments: JsonObject) -> Result<Request<Body>, Value> {
        let mut args = arguments;
        let mut path = self.path.to_string();
        if let Some((param, name)) = self.id {
            let id = match args.remove(name) {
                Some(Value::String(id)) => id,
                Some(_) => return Err(validation(name, "must be a string (a UUID)")),
                None => return Err(validation(name, "is required")),
            };
            let encoded: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
            path = path.replace(&format!("{{{param}}}"), &encoded);
        }
        let key = match args.remove("idempotency_key") {
            None => None,
            // A key no header can carry (a control character) is refused as HTTP refuses
            // a key it cannot read: `400 invalid_parameter` naming `Idempotency-Key`.
            Some(Value::String(key)) => match HeaderValue::from_str(&key) {
                Ok(key) => Some(key),
                Err(_) => return Err(invalid_key()),
            },
            Some(_) => return Err(validation("idempotency_key", "must be a string")),
        };
        let mut builder = Request::builder().method(self.method.clone());
        for name in [
            "authorization",
            crate::extract::TURN_ID_HEADER,
            crate::extract::TURN_EPOCH_HEADER,
            "x-correlation-id",
            // The call's facts join the trace of the MCP request.
            "traceparent",
            "tracestate",
        ] {
            if let Some(value) = headers.get(name) {
                builder = builder.header(name, value);
            }
        }
        if let Some(key) = key {
            builder = builder.header(crate::routes::idempotency::HEADER, key);
        }
        let request = if self.method == Method::GET {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for (name, value) in &args {
                let value = match value {
                    Value::String(s) => s.clone(),
                    Value::Null => continue,
                    other => other.to_string(),
                };
                query.append_pair(name, &value);
            }
            let query = query.finish();
            let uri = if query.is_empty() {
                path
            } else {
                format!("{path}?{query}")
            };
            builder.uri(uri).body(Body::empty())
        } else {
            builder
                .uri(path)
                .header("content-type", "application/json")
                .body(Body::from(Value::Object(args).to_string()))
        };
        request.map_err(|e| validation("arguments", e))
    }
}

/// Sends `request` to the service's router: (whether it succeeded, its JSON answer —
/// `null` for none).
pub(super) async fn send(router: &Router, request: Request<Body>) -> (bool, Value) {
    let response = match router.clone().oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let ok = response.status().is_success();
    let bytes = match axum::body::to_bytes(response.into_body(), usize::MAX).await {
        Ok(bytes) => bytes,
        // An answer that could not be read is not a success (never `{"turn": null}`).
        Err(e) => {
            let problem = json!({
                "type": "about:blank", "title": "Internal Server Error", "status": 500,
                "code": "internal_error", "detail": format!("the answer could not be read: {e}"),
            });
            return (false, problem);
        }
    };
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    (ok, body)
}

/// A `GET` of `path` as the caller (its token, its correlation id).
pub(super) async fn get(router: &Router, headers: &HeaderMap, path: &str) -> (bool, Value) {
    let mut builder = Request::builder().method(Method::GET).uri(path);
    for name in ["authorization", "x-correlation-id"] {
        if let Some(value) = headers.get(name) {
            builder = builder.header(name, value);
        }
    }
    match builder.body(Body::empty()) {
        Ok(request) => send(router, request).await,
        Err(e) => (false, validation("uri", e)),
    }
}

/// The problem of an argument a call cannot even be sent with (`422`, as HTTP would).
/// The problem HTTP answers for an `Idempotency-Key` it cannot read.
fn invalid_key() -> Value {
    let problem = crate::routes::idempotency::invalid_key().problem();
    serde_json::to_value(problem).unwrap_or_else(|e| validation("idempotency_key", e))
}

fn validation(field: &str, reason: impl std::fmt::Display) -> Value {
    json!({
        "type": "about:blank",
        "title": "Unprocessable Entity",
        "status": 422,
        "code": "validation_failed",
        "detail": format!("{field}: {reason}"),
    })
}

/// The OpenAPI document the schemas come from (the same types as the HTTP API).
static DOCUMENT: LazyLock<Value> = LazyLock::new(crate::openapi::document);

/// A tool's input: its endpoint's path id (renamed), query parameters (reads) and request
/// body's properties, with the components they refer to under `$defs`.
fn input_schema(tool: &McpTool, access: Access) -> JsonObject {
    let doc = &*DOCUMENT;
    let method = tool.method.as_str().to_ascii_lowercase();
    let op = doc
        .pointer(&format!("/paths/{}/{method}", pointer_escape(tool.path)))
        .cloned()
        .unwrap_or(Value::Null);
    let mut properties = Map::new();
    let mut required: Vec<Value> = Vec::new();
    for param in op["parameters"].as_array().into_iter().flatten() {
        let name = param["name"].as_str().unwrap_or_default();
        let place = param["in"].as_str().unwrap_or_default();
        let name = match (place, tool.id) {
            ("path", Some((p, renamed))) if p == name => renamed,
            ("path", _) => name,
            // A single entity's read pages nothing: only `min_position` applies.
            ("query", _) if tool.name.starts_with("get_") && matches!(name, "cursor" | "limit") => {
                continue
            }
            ("query", _) if tool.method == Method::GET => name,
            _ => continue,
        };
        let mut schema = param["schema"].clone();
        if let Some(description) = param["description"].as_str() {
            schema["description"] = description.into();
        }
        properties.insert(name.to_string(), schema);
        if place == "path" || param["required"] == true {
            required.push(name.into());
        }
    }
    let body = &op["requestBody"]["content"]["application/json"]["schema"];
    let body = resolve(doc, body);
    if let Some(fields) = body["properties"].as_object() {
        properties.extend(fields.clone());
    }
    let body_required = op["requestBody"]["required"] != false;
    if body_required {
        required.extend(body["required"].as_array().cloned().unwrap_or_default());
    }
    if tool.method != Method::GET && !matches!(access, Access::Call(_)) {
        properties.insert(
            "idempotency_key".into(),
            json!({"type": "string", "description": "Sent as Idempotency-Key: a retry with the same key gets the first answer again, without a new fact."}),
        );
    }
    let mut defs = Map::new();
    let mut properties = Value::Object(properties);
    collect_refs(doc, &mut properties, &mut defs);
    let mut schema = Map::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), properties);
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    if !defs.is_empty() {
        schema.insert("$defs".into(), Value::Object(defs));
    }
    schema
}

/// A schema, or the component it refers to; an optional body (`oneOf` null or X) is X.
fn resolve<'d>(doc: &'d Value, schema: &'d Value) -> &'d Value {
    let optional = ["oneOf", "anyOf"].iter().find_map(|k| {
        schema[*k]
            .as_array()?
            .iter()
            .find(|branch| branch["type"] != "null")
    });
    if let Some(branch) = optional {
        return resolve(doc, branch);
    }
    match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/")) {
        Some(pointer) => doc.pointer(&format!("/{pointer}")).unwrap_or(schema),
        None => schema,
    }
}

/// Rewrites `#/components/schemas/X` to `#/$defs/X` and copies each X (and what it refers
/// to) into `defs`.
fn collect_refs(doc: &Value, value: &mut Value, defs: &mut Map<String, Value>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref") {
                if let Some(name) = r.strip_prefix("#/components/schemas/").map(str::to_string) {
                    *r = format!("#/$defs/{name}");
                    if !defs.contains_key(&name) {
                        let mut component = doc["components"]["schemas"][&name].clone();
                        defs.insert(name.clone(), Value::Null);
                        collect_refs(doc, &mut component, defs);
                        defs.insert(name, component);
                    }
                }
            }
            for (_, v) in map.iter_mut() {
                collect_refs(doc, v, defs);
            }
        }
        Value::Array(items) => {
            for v in items {
                collect_refs(doc, v, defs);
            }
        }
        _ => {}
    }
}

fn pointer_escape(path: &str) -> String {
    path.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool whose endpoint is missing would fall back to admin-only with an empty
    /// schema: every tool must name an endpoint of the table and an OpenAPI operation.
    #[test]
    fn every_tool_names_a_route_and_an_openapi_operation() {
        let endpoints = crate::routes::table::endpoints();
        for tool in TOOLS.iter() {
            assert!(
                endpoints
                    .iter()
                    .any(|e| e.method == tool.method && e.path == tool.path),
                "{}: no route {} {}",
                tool.name,
                tool.method,
                tool.path
            );
            let method = tool.method.as_str().to_ascii_lowercase();
            let pointer = format!("/paths/{}/{method}", pointer_escape(tool.path));
            assert!(
                DOCUMENT.pointer(&pointer).is_some(),
                "{}: no operation {pointer}",
                tool.name
            );
        }
    }
}
