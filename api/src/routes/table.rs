//! Every endpoint of API.md in one table: method, path (as `/openapi.json` documents it),
//! who may call it, and its handler. The router is built from it, and the OpenAPI
//! document takes each operation's security and roles from it, so the two cannot drift.

use axum::http::Method;
use axum::routing::{delete, get, post, MethodRouter};

use super::access::{Access, INGRESS, INGRESS_LLM, LLM, READERS};
use super::{
    admin, commands, events, forget, me, ops, queries, sagas, tool_policies, tools, webhooks,
    workers,
};
use crate::state::AppState;

/// One endpoint.
pub struct Endpoint {
    /// The HTTP method.
    pub method: Method,
    /// The path template (`{name}` for a path parameter).
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
    /// The handler, without its guard.
    pub route: MethodRouter<AppState>,
}

fn ep(
    method: Method,
    path: &'static str,
    access: Access,
    route: MethodRouter<AppState>,
) -> Endpoint {
    Endpoint {
        method,
        path,
        access,
        route,
    }
}

/// Every endpoint.
pub fn endpoints() -> Vec<Endpoint> {
    use Access::{Admin, Call, Command, Open, Read};
    use Method as M;
    vec![
        ep(
            M::POST,
            "/v1/actors",
            Command(INGRESS),
            post(commands::register_actor),
        ),
        ep(M::GET, "/v1/actors/{id}", Read, get(queries::actor)),
        ep(
            M::POST,
            "/v1/actors/{id}/forget",
            Admin,
            post(forget::actor),
        ),
        ep(
            M::POST,
            "/v1/conversations",
            Command(INGRESS),
            post(commands::start_conversation),
        ),
        ep(
            M::GET,
            "/v1/conversations",
            Read,
            get(queries::conversations),
        ),
        ep(
            M::GET,
            "/v1/conversations/{id}",
            Read,
            get(queries::conversation),
        ),
        ep(
            M::POST,
            "/v1/conversations/{id}/forget",
            Admin,
            post(forget::conversation),
        ),
        ep(
            M::POST,
            "/v1/conversations/{id}/checkpoints",
            Command(LLM),
            post(commands::create_conversation_checkpoint),
        ),
        ep(
            M::GET,
            "/v1/conversations/{id}/checkpoints",
            Read,
            get(queries::checkpoints),
        ),
        ep(
            M::POST,
            "/v1/conversations/{id}/tasks",
            Command(LLM),
            post(commands::create_task),
        ),
        ep(
            M::GET,
            "/v1/conversations/{id}/tasks",
            Read,
            get(queries::conversation_tasks),
        ),
        ep(
            M::POST,
            "/v1/conversations/{id}/messages",
            Command(INGRESS_LLM),
            post(commands::add_message),
        ),
        ep(
            M::GET,
            "/v1/conversations/{id}/messages",
            Read,
            get(queries::messages),
        ),
        ep(
            M::GET,
            "/v1/conversations/{id}/checkpoints/{child}",
            Read,
            get(queries::checkpoint),
        ),
        ep(
            M::GET,
            "/v1/conversations/{id}/messages/{child}",
            Read,
            get(queries::message),
        ),
        ep(
            M::GET,
            "/v1/tasks/{id}/checkpoints/{child}",
            Read,
            get(queries::task_checkpoint),
        ),
        ep(M::GET, "/v1/tasks", Read, get(queries::tasks)),
        ep(M::GET, "/v1/tasks/{id}", Read, get(queries::task)),
        ep(
            M::POST,
            "/v1/tasks/{id}/checkpoints",
            Command(LLM),
            post(commands::create_task_checkpoint),
        ),
        ep(M::GET, "/v1/stats/tasks", Read, get(queries::task_stats)),
        ep(
            M::GET,
            "/v1/admin/processors",
            Admin,
            get(admin::processors),
        ),
        ep(
            M::GET,
            "/v1/admin/processors/{name}/parked",
            Admin,
            get(admin::parked),
        ),
        ep(
            M::POST,
            "/v1/admin/projections/{name}/rebuild",
            Admin,
            post(admin::rebuild_projection),
        ),
        ep(
            M::GET,
            "/v1/sessions/{conversation_id}",
            Read,
            get(sagas::session),
        ),
        ep(
            M::POST,
            "/v1/sessions/{conversation_id}/pause",
            Admin,
            post(sagas::pause),
        ),
        ep(
            M::POST,
            "/v1/sessions/{conversation_id}/resume",
            Admin,
            post(sagas::resume),
        ),
        ep(
            M::POST,
            "/v1/sessions/{conversation_id}/archive",
            Admin,
            post(sagas::archive),
        ),
        ep(
            M::POST,
            "/v1/sessions/{conversation_id}/budget",
            Admin,
            post(sagas::budget),
        ),
        ep(M::GET, "/v1/sessions", Read, get(sagas::sessions)),
        ep(M::GET, "/v1/agents", Read, get(sagas::agents)),
        ep(M::GET, "/v1/agents/{id}", Read, get(sagas::agent)),
        ep(M::POST, "/v1/agents/{id}/kill", Admin, post(sagas::kill)),
        ep(M::GET, "/v1/turns", Read, get(sagas::turns)),
        ep(M::GET, "/v1/turns/{id}", Read, get(sagas::turn)),
        ep(M::POST, "/v1/turns/claim", Call(LLM), post(workers::claim)),
        ep(
            M::POST,
            "/v1/turns/{id}/heartbeat",
            Call(LLM),
            post(workers::heartbeat),
        ),
        ep(
            M::POST,
            "/v1/turns/{id}/release",
            Call(LLM),
            post(workers::release),
        ),
        ep(
            M::POST,
            "/v1/turns/{id}/error",
            Call(LLM),
            post(workers::error),
        ),
        ep(
            M::POST,
            "/v1/turns/{id}/usage",
            Call(LLM),
            post(workers::usage),
        ),
        ep(
            M::POST,
            "/v1/turns/{id}/interrupt",
            Admin,
            post(workers::interrupt),
        ),
        ep(
            M::POST,
            "/v1/turns/{id}/tool-calls",
            Call(LLM),
            post(tools::report_calls),
        ),
        ep(
            M::GET,
            "/v1/turns/{turn_id}/tool-calls/{call_id}",
            Read,
            get(tools::call),
        ),
        ep(
            M::POST,
            "/v1/turns/{turn_id}/tool-calls/{call_id}/approve",
            // Every role reaches it: the call's tool policy decides who may.
            Call(READERS),
            post(tools::approve),
        ),
        ep(
            M::POST,
            "/v1/turns/{turn_id}/tool-calls/{call_id}/deny",
            // Every role reaches it: the call's tool policy decides who may.
            Call(READERS),
            post(tools::deny),
        ),
        ep(
            M::POST,
            "/v1/turns/{turn_id}/tool-calls/{call_id}/progress",
            Call(LLM),
            post(tools::progress),
        ),
        ep(
            M::POST,
            "/v1/turns/{turn_id}/tool-calls/{call_id}/result",
            Call(LLM),
            post(tools::result),
        ),
        ep(M::GET, "/v1/tool-calls", Read, get(tools::tool_calls)),
        ep(
            M::PUT,
            "/v1/tool-policies/{name}",
            Admin,
            axum::routing::put(tool_policies::put),
        ),
        ep(
            M::DELETE,
            "/v1/tool-policies/{name}",
            Admin,
            delete(tool_policies::delete),
        ),
        ep(
            M::GET,
            "/v1/tool-policies/{name}",
            Read,
            get(tool_policies::get),
        ),
        ep(M::GET, "/v1/tool-policies", Read, get(tool_policies::list)),
        ep(M::GET, "/v1/anomalies", Read, get(sagas::anomalies)),
        ep(M::GET, "/v1/events", Read, get(events::events)),
        ep(M::POST, "/v1/webhooks", Admin, post(webhooks::create)),
        ep(M::GET, "/v1/webhooks", Admin, get(webhooks::list)),
        ep(M::GET, "/v1/webhooks/{id}", Admin, get(webhooks::get)),
        ep(
            M::DELETE,
            "/v1/webhooks/{id}",
            Admin,
            delete(webhooks::delete),
        ),
        ep(
            M::POST,
            "/v1/webhooks/{id}/resume",
            Admin,
            post(webhooks::resume),
        ),
        ep(M::GET, "/v1/me", Read, get(me::me)),
        ep(M::GET, "/healthz", Open, get(ops::healthz)),
        ep(M::GET, "/readyz", Open, get(ops::readyz)),
        ep(M::GET, "/metrics", Open, get(ops::metrics)),
        ep(M::GET, "/openapi.json", Open, get(ops::openapi)),
        ep(M::GET, "/asyncapi.json", Open, get(ops::asyncapi)),
    ]
}
