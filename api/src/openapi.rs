//! The OpenAPI 3.1 document of every endpoint, generated from the handlers' annotations.

use utoipa::OpenApi;

use crate::error::Problem;
use crate::routes::{admin, commands, events, ops, queries};

/// The API description.
#[derive(OpenApi)]
#[openapi(
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

/// The document as JSON.
pub fn document() -> serde_json::Value {
    serde_json::to_value(ApiDoc::openapi()).unwrap_or_default()
}
