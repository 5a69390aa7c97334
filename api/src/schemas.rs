//! Response shapes for the OpenAPI document. The service builds its answers from the
//! facts and the read model; these structs only describe them (they are never
//! serialized), so the document shows every endpoint's schemas.
#![allow(dead_code)]

use utoipa::ToSchema;

// Times are RFC 3339 UTC with microseconds (`2026-11-22T05:35:27.123456Z`); ids are UUIDs.

/// Whether an actor is a person or an AI.
#[derive(ToSchema)]
#[allow(non_camel_case_types)]
pub enum ActorKind {
    /// A person.
    human,
    /// An AI (LLM) actor.
    ai,
}

/// The type of a conversation checkpoint.
#[derive(ToSchema)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum CheckpointType {
    /// Initial checkpoint when the conversation begins.
    CONVERSATION_STARTED,
    /// Understanding is sufficient and work may be initiated.
    BEGIN_WORK,
    /// Progress requires additional input.
    NEED_INFORMATION,
    /// No further work will occur.
    CLOSE_CONVERSATION,
    /// All work for this conversation has been completed.
    WORK_COMPLETED,
}

/// The type of a task checkpoint.
#[derive(ToSchema)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum TaskCheckpointType {
    /// Work on the task has begun.
    WORK_STARTED,
    /// Work on the task has completed.
    WORK_COMPLETED,
    /// A human has signified that the work meets the requirements.
    WORK_APPROVED,
    /// A human has rejected the work.
    WORK_REJECTED,
    /// Work has paused.
    WORK_PAUSED,
}

/// An actor (`project_manager.actor.registered`).
#[derive(ToSchema)]
pub struct Actor {
    id: String,
    /// `human` or `ai`.
    kind: String,
    display_name: String,
    external_identity: Option<String>,
    created_at: String,
}

/// A conversation as started (`project_manager.conversation.started`).
#[derive(ToSchema)]
pub struct Conversation {
    id: String,
    actor_ids: Vec<String>,
    title: String,
    external_id: Option<String>,
    external_source: Option<String>,
    status: Option<String>,
    organization: Option<String>,
    created_at: String,
    updated_at: String,
}

/// A conversation checkpoint (`project_manager.conversation.checkpoint.created`).
#[derive(ToSchema)]
pub struct ConversationCheckpoint {
    id: String,
    conversation_id: String,
    /// CONVERSATION_STARTED, BEGIN_WORK, NEED_INFORMATION, CLOSE_CONVERSATION, WORK_COMPLETED.
    checkpoint_type: String,
    summary: String,
    created_at: String,
}

/// A task as created (`project_manager.task.created`).
#[derive(ToSchema)]
pub struct Task {
    id: String,
    conversation_id: String,
    checkpoint_id: String,
    instructions: String,
    assigned_to: Option<String>,
    created_at: String,
}

/// A task checkpoint (`project_manager.task.checkpoint.created`); in a task's history it
/// also carries its stream `sequence`.
#[derive(ToSchema)]
pub struct TaskCheckpoint {
    id: String,
    task_id: String,
    /// WORK_STARTED, WORK_COMPLETED, WORK_APPROVED, WORK_REJECTED, WORK_PAUSED.
    #[schema(rename = "type")]
    kind: String,
    created_at: String,
    sequence: Option<i64>,
}

/// A message (`project_manager.message.added`).
#[derive(ToSchema)]
pub struct Message {
    id: String,
    time: String,
    actor_id: String,
    conversation_id: String,
    task_id: Option<String>,
    content: String,
    external_identity: Option<String>,
}

/// The latest checkpoint of a conversation.
#[derive(ToSchema)]
pub struct LatestCheckpoint {
    id: String,
    checkpoint_type: String,
    summary: String,
    created_at: String,
}

/// Task counts by derived status.
#[derive(ToSchema)]
#[allow(non_snake_case)]
pub struct TaskCounts {
    NOT_STARTED: i64,
    WORK_STARTED: i64,
    WORK_COMPLETED: i64,
    WORK_APPROVED: i64,
    WORK_REJECTED: i64,
    WORK_PAUSED: i64,
}

/// A conversation in the read model.
#[derive(ToSchema)]
pub struct ConversationView {
    #[serde(flatten)]
    conversation: Conversation,
    latest_checkpoint: Option<LatestCheckpoint>,
    checkpoint_count: i64,
    message_count: i64,
    task_count: i64,
    task_counts: TaskCounts,
}

/// A task in the read model with its derived status.
#[derive(ToSchema)]
pub struct TaskView {
    #[serde(flatten)]
    task: Task,
    /// The conversation's organization.
    organization: Option<String>,
    /// NOT_STARTED, or the type of its latest task checkpoint.
    status: String,
    status_changed_at: Option<String>,
    checkpoint_count: i64,
}

/// A task with its checkpoint history in the task's event order.
#[derive(ToSchema)]
pub struct TaskDetail {
    #[serde(flatten)]
    task: TaskView,
    checkpoints: Vec<TaskCheckpoint>,
}

/// A page of conversations.
#[derive(ToSchema)]
pub struct ConversationPage {
    items: Vec<ConversationView>,
    next_cursor: Option<String>,
}

/// A page of tasks.
#[derive(ToSchema)]
pub struct TaskPage {
    items: Vec<TaskView>,
    next_cursor: Option<String>,
}

/// A page of conversation checkpoints.
#[derive(ToSchema)]
pub struct CheckpointPage {
    items: Vec<ConversationCheckpoint>,
    next_cursor: Option<String>,
}

/// A page of messages.
#[derive(ToSchema)]
pub struct MessagePage {
    items: Vec<Message>,
    next_cursor: Option<String>,
}

/// Cycle time from first WORK_STARTED to latest WORK_COMPLETED.
#[derive(ToSchema)]
pub struct CycleTime {
    count: i64,
    p50_seconds: Option<f64>,
    p90_seconds: Option<f64>,
}

/// Task statistics (one group, or `groups` keyed by `assigned_to`/`organization`).
#[derive(ToSchema)]
pub struct TaskStats {
    total: Option<i64>,
    counts: Option<TaskCounts>,
    cycle_time: Option<CycleTime>,
    group_by: Option<String>,
    groups: Option<Vec<TaskStatsGroup>>,
}

/// One group of task statistics.
#[derive(ToSchema)]
pub struct TaskStatsGroup {
    assigned_to: Option<String>,
    organization: Option<String>,
    total: i64,
    counts: TaskCounts,
    cycle_time: CycleTime,
}

/// A CloudEvents 1.0 event of the global log.
#[derive(ToSchema)]
pub struct CloudEvent {
    specversion: String,
    /// `<aggregate_type>:<aggregate_id>:<sequence>`.
    id: String,
    /// `/project-manager/<aggregate_type>/<aggregate_id>`.
    source: String,
    #[schema(rename = "type")]
    kind: String,
    subject: String,
    time: String,
    datacontenttype: String,
    /// The fact's payload, exactly as TRANSITIONS.md lists it.
    data: serde_json::Value,
    position: String,
    sequence: i64,
    eventversion: String,
    correlationid: String,
    causationid: Option<String>,
    role: Option<String>,
    conversationid: Option<String>,
}

/// The processors' state.
#[derive(ToSchema)]
pub struct ProcessorReport {
    head: String,
    processors: Vec<serde_json::Value>,
    this_replica: serde_json::Value,
}
