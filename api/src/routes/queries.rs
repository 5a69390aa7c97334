//! The query endpoints of API.md over the read model: filters, keyset pagination
//! (`limit`, opaque `cursor`, `next_cursor`), `404` with the entity's code for unknown ids,
//! and `?min_position=` read-your-writes (waits up to 5 s, then `503 projection_lagging`).
//! Each answers a typed view of the application's query side; entities whose party was
//! forgotten show their personal texts `null` and `"forgotten": true` ([`Forgettable`];
//! the document describes it, [`crate::openapi`]).

mod params;

use axum::extract::{Path, State};
use axum::Json;
use pm_application::queries::{ConversationFilter, MessageFilter, ReadModelStore, TaskFilter};
use pm_application::views::{
    ConversationView, Forgettable, List, Page, StatsGroup, TaskCheckpointView, TaskDetail,
    TaskStatsView, TaskView,
};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use pm_domain::types::{CheckpointType, TaskStatus};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{path_uuid, ApiQuery};
use crate::state::AppState;

use params::{found, read_your_writes, require_conversation, time_param};
pub(crate) use params::{page_request, uuid_param};
pub use params::{
    ChildPath, ConversationParams, ListParams, MessageParams, StatsParams, TaskParams,
};

/// `GET /v1/actors/{id}`.
#[utoipa::path(get, path = "/v1/actors/{id}", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = ActorRegistered, description = "The actor"), (status = 404, body = crate::error::Problem)))]
pub async fn actor(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Forgettable<ActorRegistered>>, ApiError> {
    let id = path_uuid(&id, "actor_not_found", "actor")?;
    let read = read_your_writes(&state, &p.min_position).await?;
    found(read.actor(id).await?, "actor_not_found", "actor", id)
}

/// `GET /v1/conversations`.
#[utoipa::path(get, path = "/v1/conversations", tag = "queries", params(ConversationParams, ListParams),
    responses((status = 200, body = Page<ConversationView>, description = "A page of conversations"), (status = 400, body = crate::error::Problem)))]
pub async fn conversations(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(f): ApiQuery<ConversationParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Forgettable<ConversationView>>>, ApiError> {
    let page = page_request(&p, List::Conversations)?;
    let latest_checkpoint_type = f
        .latest_checkpoint_type
        .as_deref()
        .map(|t| {
            CheckpointType::parse(t).ok_or_else(|| {
                ApiError::parameter("latest_checkpoint_type", "is not a checkpoint type")
            })
        })
        .transpose()?;
    let filter = ConversationFilter {
        organization: f.organization,
        status: f.status,
        external_source: f.external_source,
        actor_id: uuid_param("actor_id", &f.actor_id)?,
        created_after: time_param("created_after", &f.created_after)?,
        created_before: time_param("created_before", &f.created_before)?,
        latest_checkpoint_type,
    };
    let read = read_your_writes(&state, &p.min_position).await?;
    Ok(Json(
        read.conversations(caller.scope(), &filter, &page).await?,
    ))
}

/// `GET /v1/conversations/{id}`.
#[utoipa::path(get, path = "/v1/conversations/{id}", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = ConversationView, description = "The conversation with latest checkpoint and counts"), (status = 404, body = crate::error::Problem)))]
pub async fn conversation(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Forgettable<ConversationView>>, ApiError> {
    let id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let read = read_your_writes(&state, &p.min_position).await?;
    found(
        read.conversation(id).await?,
        "conversation_not_found",
        "conversation",
        id,
    )
}

/// `GET /v1/conversations/{id}/checkpoints`.
#[utoipa::path(get, path = "/v1/conversations/{id}/checkpoints", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = Page<ConversationCheckpointCreated>, description = "Its checkpoints, oldest first"), (status = 404, body = crate::error::Problem)))]
pub async fn checkpoints(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Forgettable<ConversationCheckpointCreated>>>, ApiError> {
    let id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let page = page_request(&p, List::Checkpoints)?;
    let read = read_your_writes(&state, &p.min_position).await?;
    require_conversation(read, id).await?;
    Ok(Json(read.checkpoints(id, &page).await?))
}

/// `GET /v1/conversations/{id}/messages`.
#[utoipa::path(get, path = "/v1/conversations/{id}/messages", tag = "queries", params(("id" = Uuid, Path), MessageParams, ListParams),
    responses((status = 200, body = Page<MessageAdded>, description = "Its messages in time order"), (status = 404, body = crate::error::Problem)))]
pub async fn messages(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(f): ApiQuery<MessageParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Forgettable<MessageAdded>>>, ApiError> {
    let id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let page = page_request(&p, List::Messages)?;
    let filter = MessageFilter {
        task_id: uuid_param("task_id", &f.task_id)?,
        actor_id: uuid_param("actor_id", &f.actor_id)?,
    };
    let read = read_your_writes(&state, &p.min_position).await?;
    require_conversation(read, id).await?;
    Ok(Json(read.messages(id, &filter, &page).await?))
}

/// `GET /v1/conversations/{id}/tasks`.
#[utoipa::path(get, path = "/v1/conversations/{id}/tasks", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = Page<TaskView>, description = "Its tasks with derived status"), (status = 404, body = crate::error::Problem)))]
pub async fn conversation_tasks(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Forgettable<TaskView>>>, ApiError> {
    let id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let page = page_request(&p, List::Tasks)?;
    let read = read_your_writes(&state, &p.min_position).await?;
    require_conversation(read, id).await?;
    let filter = TaskFilter {
        conversation_id: Some(id),
        ..TaskFilter::default()
    };
    Ok(Json(read.tasks(caller.scope(), &filter, &page).await?))
}

/// `GET /v1/tasks`.
#[utoipa::path(get, path = "/v1/tasks", tag = "queries", params(TaskParams, ListParams),
    responses((status = 200, body = Page<TaskView>, description = "A page of tasks with derived status"), (status = 400, body = crate::error::Problem)))]
pub async fn tasks(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(f): ApiQuery<TaskParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Forgettable<TaskView>>>, ApiError> {
    let page = page_request(&p, List::Tasks)?;
    let status = f
        .status
        .as_deref()
        .map(|s| {
            TaskStatus::parse(s).ok_or_else(|| {
                ApiError::parameter("status", "must be NOT_STARTED or a task checkpoint type")
            })
        })
        .transpose()?;
    let filter = TaskFilter {
        status,
        assigned_to: uuid_param("assigned_to", &f.assigned_to)?,
        conversation_id: uuid_param("conversation_id", &f.conversation_id)?,
        checkpoint_id: uuid_param("checkpoint_id", &f.checkpoint_id)?,
        organization: f.organization,
    };
    let read = read_your_writes(&state, &p.min_position).await?;
    Ok(Json(read.tasks(caller.scope(), &filter, &page).await?))
}

/// `GET /v1/tasks/{id}`.
#[utoipa::path(get, path = "/v1/tasks/{id}", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = TaskDetail, description = "The task, its status and checkpoint history"), (status = 404, body = crate::error::Problem)))]
pub async fn task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Forgettable<TaskDetail>>, ApiError> {
    let id = path_uuid(&id, "task_not_found", "task")?;
    let read = read_your_writes(&state, &p.min_position).await?;
    found(read.task(id).await?, "task_not_found", "task", id)
}

/// `GET /v1/stats/tasks`.
#[utoipa::path(get, path = "/v1/stats/tasks", tag = "queries", params(StatsParams),
    responses((status = 200, body = TaskStatsView, description = "Counts by status and cycle times"), (status = 400, body = crate::error::Problem)))]
pub async fn task_stats(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(p): ApiQuery<StatsParams>,
) -> Result<Json<TaskStatsView>, ApiError> {
    let group = match p.group_by.as_deref() {
        None => StatsGroup::All,
        Some("assigned_to") => StatsGroup::AssignedTo,
        Some("organization") => StatsGroup::Organization,
        Some(_) => {
            return Err(ApiError::parameter(
                "group_by",
                "must be assigned_to or organization",
            ))
        }
    };
    let read = read_your_writes(&state, &p.min_position).await?;
    Ok(Json(read.task_stats(caller.scope(), group).await?))
}

/// `GET /v1/conversations/{id}/checkpoints/{child}`.
#[utoipa::path(get, path = "/v1/conversations/{id}/checkpoints/{child}", tag = "queries",
    params(("id" = Uuid, Path), ("child" = Uuid, Path), ListParams),
    responses((status = 200, body = ConversationCheckpointCreated, description = "The checkpoint"), (status = 404, body = crate::error::Problem)))]
pub async fn checkpoint(
    State(state): State<AppState>,
    Path(p): Path<ChildPath>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Json<Forgettable<ConversationCheckpointCreated>>, ApiError> {
    let conversation = path_uuid(&p.id, "conversation_not_found", "conversation")?;
    let id = path_uuid(&p.child, "checkpoint_not_found", "checkpoint")?;
    let read = read_your_writes(&state, &q.min_position).await?;
    found(
        read.checkpoint(conversation, id).await?,
        "checkpoint_not_found",
        "checkpoint",
        id,
    )
}

/// `GET /v1/conversations/{id}/messages/{child}`.
#[utoipa::path(get, path = "/v1/conversations/{id}/messages/{child}", tag = "queries",
    params(("id" = Uuid, Path), ("child" = Uuid, Path), ListParams),
    responses((status = 200, body = MessageAdded, description = "The message"), (status = 404, body = crate::error::Problem)))]
pub async fn message(
    State(state): State<AppState>,
    Path(p): Path<ChildPath>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Json<Forgettable<MessageAdded>>, ApiError> {
    let conversation = path_uuid(&p.id, "conversation_not_found", "conversation")?;
    let id = path_uuid(&p.child, "message_not_found", "message")?;
    let read = read_your_writes(&state, &q.min_position).await?;
    found(
        read.message(conversation, id).await?,
        "message_not_found",
        "message",
        id,
    )
}

/// `GET /v1/tasks/{id}/checkpoints/{child}`.
#[utoipa::path(get, path = "/v1/tasks/{id}/checkpoints/{child}", tag = "queries",
    params(("id" = Uuid, Path), ("child" = Uuid, Path), ListParams),
    responses((status = 200, body = TaskCheckpointView, description = "The task checkpoint"), (status = 404, body = crate::error::Problem)))]
pub async fn task_checkpoint(
    State(state): State<AppState>,
    Path(p): Path<ChildPath>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Json<TaskCheckpointView>, ApiError> {
    let task = path_uuid(&p.id, "task_not_found", "task")?;
    let id = path_uuid(&p.child, "task_checkpoint_not_found", "task checkpoint")?;
    let read = read_your_writes(&state, &q.min_position).await?;
    found(
        read.task_checkpoint(task, id).await?,
        "task_checkpoint_not_found",
        "task checkpoint",
        id,
    )
}
