//! The OpenAPI 3.1 document of every endpoint: generated from the handlers' annotations,
//! then completed from the route table — each operation's security and roles
//! ([`security`]) and every status it can answer ([`responses`]).

mod flatten;
mod forgotten;
mod responses;
mod security;

use serde_json::Value;
use utoipa::OpenApi;

use crate::error::Problem;
use crate::routes::{admin, commands, events, ops, queries, sagas};

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(title = "project-manager", description = "Event-sourced CQRS service: conversations, checkpoints, tasks, messages, the global event log, and the session, agent and turn machines that run on them. A Model Context Protocol server at /mcp (Streamable HTTP, the same bearer tokens; docs/MCP.md) exposes the commands, the turn reports and the reads as tools a model calls, fenced by PM-Turn-Id and PM-Turn-Epoch like HTTP."),
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
        sagas::sessions,
        sagas::agents,
        sagas::agent,
        sagas::turns,
        sagas::turn,
        sagas::anomalies,
        sagas::pause,
        sagas::resume,
        sagas::archive,
        sagas::kill,
        sagas::budget,
        crate::routes::workers::claim,
        crate::routes::workers::heartbeat,
        crate::routes::workers::release,
        crate::routes::workers::error,
        crate::routes::workers::usage,
        crate::routes::workers::interrupt,
        crate::routes::tools::report_calls,
        crate::routes::tools::call,
        crate::routes::tools::approve,
        crate::routes::tools::deny,
        crate::routes::tools::progress,
        crate::routes::tools::result,
        crate::routes::tools::tool_calls,
        crate::routes::tool_policies::put,
        crate::routes::tool_policies::delete,
        crate::routes::tool_policies::list,
        crate::routes::tool_policies::get,
        crate::routes::webhooks::create,
        crate::routes::webhooks::list,
        crate::routes::webhooks::get,
        crate::routes::webhooks::delete,
        crate::routes::webhooks::resume,
        admin::processors,
        admin::parked,
        admin::rebuild_projection,
        crate::routes::forget::actor,
        crate::routes::forget::conversation,
        crate::routes::me::me,
        ops::healthz,
        ops::readyz,
        ops::metrics,
        ops::openapi,
        ops::asyncapi,
    ),
    components(schemas(Problem, pm_application::views::SessionSnapshot)),
    tags(
        (name = "commands", description = "Each emits exactly one project_manager.* fact"),
        (name = "events", description = "The global, ordered event log"),
        (name = "queries", description = "Read models (eventually consistent; ?min_position= for read-your-writes)"),
        (name = "sagas", description = "Sessions, agents, turns and anomalies of the saga machines; operators' controls (admin)"),
        (name = "workers", description = "The LLM service's workers: claim a turn, hold it with a lease, report on it; tool calls with approvals (WORKERS.md)"),
        (name = "admin", description = "Operator controls"),
        (name = "webhooks", description = "Signed deliveries of facts and runes to subscribers' URLs (admin; DELIVERY.md)"),
        (name = "operations", description = "Health, readiness, metrics"),
    )
)]
pub struct ApiDoc;

/// The document as JSON.
pub fn document() -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    for endpoint in crate::routes::table::endpoints() {
        let method = endpoint.method.as_str().to_ascii_lowercase();
        let Some(op) = doc
            .pointer_mut(&format!(
                "/paths/{}/{method}",
                pointer_escape(endpoint.path)
            ))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        security::annotate(op, endpoint.access);
        responses::complete(op, endpoint.path, endpoint.access);
    }
    security::add_scheme(&mut doc);
    forgotten::describe(&mut doc["components"]["schemas"]);
    let schemas = doc["components"]["schemas"].clone();
    flatten::flatten_all_of(&mut doc, &schemas);
    doc
}

/// `path` as one JSON Pointer token (RFC 6901).
fn pointer_escape(path: &str) -> String {
    path.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::routes::table::endpoints;

    #[test]
    fn the_document_and_the_route_table_name_the_same_operations() {
        let doc = document();
        let documented: BTreeSet<(String, String)> = doc["paths"]
            .as_object()
            .expect("paths")
            .iter()
            .flat_map(|(path, item)| {
                let methods = item.as_object().expect("path item").keys();
                methods.map(move |m| (m.clone(), path.clone()))
            })
            .collect();
        let routed: BTreeSet<(String, String)> = endpoints()
            .iter()
            .map(|e| (e.method.as_str().to_ascii_lowercase(), e.path.to_string()))
            .collect();
        assert_eq!(documented, routed);
    }

    #[test]
    fn commands_name_the_roles_of_api_md() {
        let doc = document();
        let roles = |method: &str, path: &str| doc["paths"][path][method]["x-roles"].clone();
        let json = |v: &[&str]| serde_json::json!(v);
        assert_eq!(roles("post", "/v1/actors"), json(&["admin", "ingress"]));
        assert_eq!(
            roles("post", "/v1/conversations/{id}/messages"),
            json(&["admin", "ingress", "llm"])
        );
        assert_eq!(
            roles("post", "/v1/tasks/{id}/checkpoints"),
            json(&["admin", "llm"])
        );
        assert_eq!(
            roles("get", "/v1/events"),
            json(&["admin", "ingress", "llm", "analyst"])
        );
        assert_eq!(roles("post", "/v1/agents/{id}/kill"), json(&["admin"]));
        assert_eq!(roles("get", "/healthz"), json(&[]));
    }
}
