//! The OpenAPI 3.1 document of every endpoint, generated from the handlers' annotations.

use utoipa::openapi::path::Operation;
use utoipa::openapi::{Content, OpenApi as Document, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::error::Problem;
use crate::routes::{admin, commands, events, ops, queries};

/// The API description.
#[derive(OpenApi)]
#[openapi(
    modifiers(&ProblemResponses),
    info(title = "project-manager", description = "Event-sourced CQRS service: conversations, checkpoints, tasks, messages, and the global event log."),
    paths(
        commands::register_actor,
        commands::start_conversation,
        commands::create_checkpoint,
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
        admin::processors,
        admin::parked,
        admin::rebuild_projection,
        ops::healthz,
        ops::readyz,
        ops::metrics,
        ops::openapi,
    ),
    components(schemas(
        Problem,
        commands::RegisterActorBody,
        commands::StartConversationBody,
        commands::CreateCheckpointBody,
        commands::CreateTaskBody,
        commands::CreateTaskCheckpointBody,
        commands::AddMessageBody,
        events::EventPage,
        crate::schemas::ActorKind,
        crate::schemas::CheckpointType,
        crate::schemas::TaskCheckpointType,
        crate::schemas::Actor,
        crate::schemas::Conversation,
        crate::schemas::ConversationCheckpoint,
        crate::schemas::Task,
        crate::schemas::TaskCheckpoint,
        crate::schemas::Message,
        crate::schemas::ConversationView,
        crate::schemas::TaskView,
        crate::schemas::TaskDetail,
        crate::schemas::ConversationPage,
        crate::schemas::TaskPage,
        crate::schemas::CheckpointPage,
        crate::schemas::MessagePage,
        crate::schemas::TaskStats,
        crate::schemas::CloudEvent,
        crate::schemas::ProcessorReport,
    )),
    tags(
        (name = "commands", description = "Each emits exactly one project_manager.* fact"),
        (name = "events", description = "The global, ordered event log"),
        (name = "queries", description = "Read models (eventually consistent; ?min_position= for read-your-writes)"),
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
pub fn document() -> serde_json::Value {
    serde_json::to_value(ApiDoc::openapi()).unwrap_or_default()
}
