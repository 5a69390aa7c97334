//! The OpenAPI 3.1 document of every endpoint, generated from the handlers' annotations.

use serde_json::{Map, Value};
use utoipa::openapi::path::Operation;
use utoipa::openapi::{Content, OpenApi as Document, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::error::Problem;
use crate::routes::{admin, commands, events, ops, queries, sagas};

/// The API description.
#[derive(OpenApi)]
#[openapi(
    modifiers(&ProblemResponses),
    info(title = "project-manager", description = "Event-sourced CQRS service: conversations, checkpoints, tasks, messages, the global event log, and the session, agent and turn machines that run on them."),
    paths(
        commands::register_actor,
        commands::start_conversation,
        commands::create_conversation_checkpoint,
        commands::create_task,
        commands::create_task_checkpoint,
        commands::add_message,
        events::events,
        queries::actor,
        queries::conversations,
        queries::conversation,
        queries::checkpoints,
        queries::messages,
        queries::conversation_tasks,
        queries::tasks,
        queries::task,
        queries::task_stats,
        queries::checkpoint,
        queries::message,
        queries::task_checkpoint,
        sagas::session,
        sagas::agents,
        sagas::agent,
        sagas::turns,
        sagas::turn,
        sagas::anomalies,
        sagas::pause,
        sagas::resume,
        sagas::archive,
        sagas::kill,
        admin::processors,
        admin::parked,
        admin::rebuild_projection,
        ops::healthz,
        ops::readyz,
        ops::metrics,
        ops::openapi,
    ),
    components(schemas(Problem, pm_application::views::SessionSnapshot)),
    tags(
        (name = "commands", description = "Each emits exactly one project_manager.* fact"),
        (name = "events", description = "The global, ordered event log"),
        (name = "queries", description = "Read models (eventually consistent; ?min_position= for read-your-writes)"),
        (name = "sagas", description = "Sessions, agents, turns and anomalies of the saga machines; operators' controls (admin)"),
        (name = "admin", description = "Operator controls"),
        (name = "operations", description = "Health, readiness, metrics"),
    )
)]
pub struct ApiDoc;

/// Adds the answers every endpoint can give (bad input, authentication, limits, an
/// unreachable store) and serves every error as `application/problem+json`.
struct ProblemResponses;

const COMMON: &[(&str, &str, bool)] = &[
    ("400", "Malformed JSON or an invalid parameter (`malformed_json`, `invalid_parameter`)", false),
    ("401", "No or unknown token (`unauthorized`)", false),
    ("403", "The role may not do this (`forbidden`)", false),
    ("413", "Body over the limit (`payload_too_large`)", true),
    ("415", "Body is not JSON (`unsupported_media_type`)", true),
    ("422", "A field is missing, ill-typed or empty (`validation_failed`), or a rule failed", true),
    ("500", "A bug; the cause is in the service's log (`internal_error`)", false),
    ("503", "The store is unreachable (`service_unavailable`), or `min_position` not reached (`projection_lagging`)", false),
];

fn problem_content() -> Content {
    Content::new(Some(Ref::from_schema_name("Problem")))
}

fn add_problems(op: &mut Operation, with_body: bool) {
    for (status, response) in op.responses.responses.iter_mut() {
        if status.starts_with('4') || status.starts_with('5') {
            if let utoipa::openapi::RefOr::T(r) = response {
                r.content.clear();
                r.content
                    .insert("application/problem+json".into(), problem_content());
            }
        }
    }
    for (status, description, needs_body) in COMMON {
        if (*needs_body && !with_body) || op.responses.responses.contains_key(*status) {
            continue;
        }
        let response = ResponseBuilder::new()
            .description(*description)
            .content("application/problem+json", problem_content())
            .build();
        op.responses
            .responses
            .insert((*status).to_string(), response.into());
    }
}

impl Modify for ProblemResponses {
    fn modify(&self, doc: &mut Document) {
        for (path, item) in doc.paths.paths.iter_mut() {
            let open = matches!(
                path.as_str(),
                "/healthz" | "/readyz" | "/metrics" | "/openapi.json"
            );
            if open {
                continue;
            }
            if let Some(op) = item.get.as_mut() {
                add_problems(op, false);
            }
            if let Some(op) = item.post.as_mut() {
                add_problems(op, true);
            }
        }
    }
}

/// The document as JSON.
pub fn document() -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    let schemas = doc["components"]["schemas"].clone();
    flatten_all_of(&mut doc, &schemas);
    doc
}

/// Rewrites every `allOf` of object schemas (what `#[serde(flatten)]` becomes) into one
/// object schema with the union of their properties and required fields. A view that
/// flattens a fact adds fields to it, so the fact's `additionalProperties: false` must
/// apply to the whole view, not to the fact's part alone (which would reject the view's
/// own fields).
fn flatten_all_of(node: &mut Value, schemas: &Value) {
    match node {
        Value::Object(object) => {
            for child in object.values_mut() {
                flatten_all_of(child, schemas);
            }
            let Some(Value::Array(parts)) = object.get("allOf") else {
                return;
            };
            let mut resolved = Vec::with_capacity(parts.len());
            for part in parts {
                let mut part = resolve(part, schemas);
                flatten_all_of(&mut part, schemas);
                if part.get("properties").is_none() {
                    return;
                }
                resolved.push(part);
            }
            let mut properties = Map::new();
            let mut required: Vec<Value> = Vec::new();
            let mut closed = false;
            for part in resolved {
                if let Some(Value::Object(p)) = part.get("properties") {
                    properties.extend(p.clone());
                }
                if let Some(Value::Array(r)) = part.get("required") {
                    required.extend(
                        r.iter()
                            .filter(|f| !required.contains(f))
                            .cloned()
                            .collect::<Vec<_>>(),
                    );
                }
                closed |= part.get("additionalProperties") == Some(&Value::Bool(false));
            }
            object.remove("allOf");
            object.insert("type".into(), "object".into());
            object.insert("properties".into(), Value::Object(properties));
            object.insert("required".into(), Value::Array(required));
            if closed {
                object.insert("additionalProperties".into(), Value::Bool(false));
            }
        }
        Value::Array(items) => {
            for item in items {
                flatten_all_of(item, schemas);
            }
        }
        _ => {}
    }
}

/// A `$ref` to `#/components/schemas/<name>` resolved (other schemas as they are).
fn resolve(schema: &Value, schemas: &Value) -> Value {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .and_then(|name| schemas.get(name))
        .unwrap_or(schema)
        .clone()
}
