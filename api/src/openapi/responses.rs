//! Every status an operation can answer, as the handlers, extractors and middleware
//! really answer them: the guard (`401`, `403`), the query and body extractors (`400`,
//! `413`, `415`, `422`), the `Idempotency-Key` middleware of commands (`400`, `409`,
//! `422`), read-your-writes and the store (`503`), bugs (`500`). Statuses particular to
//! one handler (`404`, a command's own `409`/`422` codes) come from its annotation; this
//! adds the codes common to its kind to their descriptions. Every error is
//! `application/problem+json` with the `Problem` schema.

use serde_json::{json, Map, Value};

use crate::routes::access::Access;
use crate::routes::scope::{path_scope, PathScope};

/// What an operation takes, as far as its possible answers depend on it.
struct Shape {
    access: Access,
    query: bool,
    positions: bool,
    min_position: bool,
    body: bool,
    /// Service-wide ([`PathScope::Service`]): refused to principals of some organizations.
    service_wide: bool,
}

impl Shape {
    fn of(op: &Map<String, Value>, path: &str, access: Access) -> Self {
        let params: Vec<(&str, &str)> = op
            .get("parameters")
            .and_then(Value::as_array)
            .map(|ps| {
                ps.iter()
                    .map(|p| {
                        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
                        (s("name"), s("in"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let named = |name: &str| params.iter().any(|(n, _)| *n == name);
        Self {
            access,
            query: params.iter().any(|(_, i)| *i == "query"),
            positions: named("min_position") || named("Last-Event-ID"),
            min_position: named("min_position"),
            body: op.contains_key("requestBody"),
            service_wide: path_scope(path) == PathScope::Service,
        }
    }

    fn command(&self) -> bool {
        matches!(self.access, Access::Command(_))
    }

    /// The sentences this kind of operation adds to `status`'s description (none: the
    /// kind never answers it).
    fn common(&self, status: &str) -> Vec<&'static str> {
        let mut parts = Vec::new();
        if self.access == Access::Open {
            if status == "503" {
                parts.push("Too many open connections (`service_unavailable`); `Retry-After: 1`.");
            }
            return parts;
        }
        match status {
            "400" => {
                if self.body {
                    parts.push("The body is not JSON (`malformed_json`).");
                }
                if self.command() {
                    parts.push("`Idempotency-Key` is not 1–255 visible ASCII characters (`invalid_parameter`).");
                }
                if self.query {
                    parts.push("A query parameter does not parse (`invalid_parameter`, the detail names it).");
                }
                if self.positions {
                    parts.push("A position that is not in the log (`invalid_position`).");
                }
            }
            "401" => parts.push(
                "No token, or an unknown one (`unauthorized`); the answer carries `WWW-Authenticate: Bearer` \
                 (`Bearer error=\"invalid_token\"` for an expired or badly signed JWT).",
            ),
            "408" if self.body => parts.push(
                "The body did not arrive whole within `PM_BODY_READ_TIMEOUT_MS` (`request_timeout`); \
                 the connection closes.",
            ),
            "429" => parts.push(
                "Too many failed authentications from this address within a minute \
                 (`too_many_requests`); `Retry-After` says how long to wait.",
            ),
            "403" if self.access.may_forbid() => {
                parts.push("The caller's role may not do this (`forbidden`); see `x-roles`.");
                if self.service_wide {
                    parts.push(
                        "It acts on every organization and the caller is of some organizations \
                         only (`organization_forbidden`).",
                    );
                }
            }
            "409" if self.command() => parts.push(
                "Every attempt lost an optimistic-concurrency race (`concurrency_conflict`), or the \
                 first request with this `Idempotency-Key` is still running \
                 (`idempotency_key_in_use`, `Retry-After: 1`).",
            ),
            "413" if self.body => parts.push("The body is over the limit (`payload_too_large`)."),
            "415" if self.body => {
                parts.push("The body is not `application/json` (`unsupported_media_type`).");
            }
            "422" if self.body => {
                parts.push("A field is missing, ill-typed, unknown or empty (`validation_failed`, the detail names it).");
                if self.command() {
                    parts.push("This `Idempotency-Key` was used for another request (`idempotency_key_reused`).");
                }
            }
            "500" => parts.push("A bug (`internal_error`); the cause is in the service's log."),
            "503" => {
                parts.push("The store is unreachable, or too many connections are open (`service_unavailable`).");
                if self.min_position {
                    parts.push("`min_position` was not reached within 5 s (`projection_lagging`).");
                }
                parts.push("`Retry-After: 1`.");
            }
            _ => {}
        }
        parts
    }
}

/// The statuses [`Shape::common`] may add.
const COMMON: &[&str] = &[
    "400", "401", "403", "408", "409", "413", "415", "422", "429", "500", "503",
];

/// Completes `op`'s responses (and, for a command, documents `Idempotency-Key`).
pub fn complete(op: &mut Map<String, Value>, path: &str, access: Access) {
    let shape = Shape::of(op, path, access);
    if shape.command() {
        add_idempotency_key(op);
    }
    let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
        return;
    };
    for status in COMMON {
        if !responses.contains_key(*status) && !shape.common(status).is_empty() {
            responses.insert((*status).to_string(), json!({"description": ""}));
        }
    }
    for (status, response) in responses.iter_mut() {
        if shape.command() && (status == "200" || status == "201") {
            response["headers"] = entity_headers(status == "201");
        }
        if !(status.starts_with('4') || status.starts_with('5')) {
            continue;
        }
        let own = response["description"]
            .as_str()
            .unwrap_or("")
            .trim()
            .to_string();
        let mut parts: Vec<String> = Vec::new();
        if !own.is_empty() {
            parts.push(own);
        }
        parts.extend(shape.common(status).into_iter().map(str::to_string));
        if parts.is_empty() && status == "404" {
            parts.push("The path names nothing (`<entity>_not_found`).".into());
        }
        response["description"] = parts.join(" ").into();
        let problem = json!({"schema": {"$ref": "#/components/schemas/Problem"}});
        response["content"] = if path == "/readyz" && status == "503" {
            // Not ready answers the readiness report; a store failure a problem.
            json!({"application/json": {"schema": {"type": "object"}}, "application/problem+json": problem})
        } else {
            json!({"application/problem+json": problem})
        };
        let header =
            |description: &str| json!({"description": description, "schema": {"type": "string"}});
        match status.as_str() {
            "401" => response["headers"] = json!({"WWW-Authenticate": header("`Bearer`")}),
            "429" => response["headers"] = json!({"Retry-After": header("Seconds to wait")}),
            "503" => response["headers"] = json!({"Retry-After": header("Seconds to wait: `1`")}),
            _ => {}
        }
    }
}

/// Adds the optional `Idempotency-Key` header parameter.
fn add_idempotency_key(op: &mut Map<String, Value>) {
    let parameters = op
        .entry("parameters")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(parameters) = parameters.as_array_mut() {
        parameters.push(json!({
            "name": "Idempotency-Key",
            "in": "header",
            "required": false,
            "description": "A repeat of the same key by the same role within 24 h gets the first answer again (`Idempotent-Replayed: true`), without a new fact.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 255}
        }));
    }
}

/// The headers of a command's success: `Location`, and `X-Event-Position` when created.
fn entity_headers(created: bool) -> Value {
    let mut headers = json!({"Location": {
        "description": "Where the entity is served",
        "schema": {"type": "string"}
    }});
    if created {
        headers["X-Event-Position"] = json!({
            "description": "The log position of the fact; pass it as `min_position` to read the entity at once",
            "schema": {"type": "string"}
        });
    }
    headers
}
