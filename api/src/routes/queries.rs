//! The query endpoints of API.md over the read model: filters, keyset pagination
//! (`limit`, opaque `cursor`, `next_cursor`), `404` with the entity's code for unknown ids,
//! and `?min_position=` read-your-writes (waits up to 5 s, then `503 projection_lagging`).

use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use pm_application::log::LogPosition;
use pm_application::processor::ProcessorStore;
use pm_domain::types::{CheckpointType, TaskCheckpointType};
use pm_infrastructure::read_model::query::{
    ConversationFilter, PageRequest, StatsGroup, TaskFilter,
};
use pm_infrastructure::read_model::{List, Page, PageCursor, READ_MODEL};
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::state::AppState;

/// How long `min_position` waits.
const MIN_POSITION_WAIT: Duration = Duration::from_secs(5);

/// Parameters every list takes.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct ListParams {
    /// Page size (default 50, max 500).
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// Wait until the read model has processed this log position.
    pub min_position: Option<String>,
}

/// Filters of `GET /v1/conversations`.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct ConversationParams {
    /// Exact organization.
    pub organization: Option<String>,
    /// Exact status.
    pub status: Option<String>,
    /// Exact external source.
    pub external_source: Option<String>,
    /// Conversations an actor takes part in.
    pub actor_id: Option<String>,
    /// Created at or after (RFC 3339).
    pub created_after: Option<String>,
    /// Created before (RFC 3339).
    pub created_before: Option<String>,
    /// Type of the latest checkpoint.
    pub latest_checkpoint_type: Option<String>,
}

/// Filters of `GET /v1/tasks`.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct TaskParams {
    /// Derived status: `NOT_STARTED` or a task checkpoint type.
    pub status: Option<String>,
    /// Assignee.
    pub assigned_to: Option<String>,
    /// Conversation.
    pub conversation_id: Option<String>,
    /// BEGIN_WORK checkpoint.
    pub checkpoint_id: Option<String>,
    /// The conversation's organization.
    pub organization: Option<String>,
}

/// Filters of `GET /v1/conversations/{id}/messages`.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct MessageParams {
    /// Only messages about this task.
    pub task_id: Option<String>,
    /// Only messages by this actor.
    pub actor_id: Option<String>,
}

/// Parameters of `GET /v1/stats/tasks`.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct StatsParams {
    /// `assigned_to` or `organization`.
    pub group_by: Option<String>,
    /// Wait until the read model has processed this log position.
    pub min_position: Option<String>,
}

fn uuid_param(name: &str, raw: &Option<String>) -> Result<Option<Uuid>, ApiError> {
    raw.as_deref()
        .map(|r| {
            r.parse()
                .map_err(|_| ApiError::parameter(name, "must be a UUID"))
        })
        .transpose()
}

fn time_param(name: &str, raw: &Option<String>) -> Result<Option<DateTime<Utc>>, ApiError> {
    raw.as_deref()
        .map(|r| {
            DateTime::parse_from_rfc3339(r)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| ApiError::parameter(name, "must be an RFC 3339 time"))
        })
        .transpose()
}

fn path_uuid(raw: &str, code: &'static str, what: &str) -> Result<Uuid, ApiError> {
    raw.parse().map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            code,
            format!("{what} {raw} does not exist"),
        )
    })
}

fn found(
    value: Option<Value>,
    code: &'static str,
    what: &str,
    id: Uuid,
) -> Result<Json<Value>, ApiError> {
    value.map(Json).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            code,
            format!("{what} {id} does not exist"),
        )
    })
}

/// Waits (up to 5 s) until the read model has processed `min_position`.
async fn read_your_writes(state: &AppState, min_position: &Option<String>) -> Result<(), ApiError> {
    let Some(raw) = min_position else {
        return Ok(());
    };
    let wanted: LogPosition = raw
        .parse()
        .map_err(|e| ApiError::parameter("min_position", e))?;
    let started = Instant::now();
    loop {
        let cursor = state.processors.cursor(READ_MODEL).await?;
        if cursor >= wanted {
            return Ok(());
        }
        if started.elapsed() >= MIN_POSITION_WAIT {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "projection_lagging",
                format!(
                    "the read model has processed up to {cursor}, not yet {wanted}; retry later"
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn page_request(p: &ListParams, list: List) -> Result<PageRequest, ApiError> {
    let limit = p.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::parameter("limit", "must be between 1 and 500"));
    }
    let cursor = p
        .cursor
        .as_deref()
        .map(|c| {
            PageCursor::decode_for(c, list)
                .ok_or_else(|| ApiError::parameter("cursor", "is not a cursor this list issued"))
        })
        .transpose()?;
    Ok(PageRequest { limit, cursor })
}

async fn require_conversation(state: &AppState, id: Uuid) -> Result<(), ApiError> {
    found(
        state.read_model.conversation(id).await?,
        "conversation_not_found",
        "conversation",
        id,
    )
    .map(|_| ())
}

/// `GET /v1/actors/{id}`.
#[utoipa::path(get, path = "/v1/actors/{id}", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = crate::schemas::Actor, description = "The actor"), (status = 404, body = crate::error::Problem)))]
pub async fn actor(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Value>, ApiError> {
    let id = path_uuid(&id, "actor_not_found", "actor")?;
    read_your_writes(&state, &p.min_position).await?;
    found(
        state.read_model.actor(id).await?,
        "actor_not_found",
        "actor",
        id,
    )
}

/// `GET /v1/conversations`.
#[utoipa::path(get, path = "/v1/conversations", tag = "queries", params(ConversationParams, ListParams),
    responses((status = 200, body = crate::schemas::ConversationPage, description = "A page of conversations"), (status = 400, body = crate::error::Problem)))]
pub async fn conversations(
    State(state): State<AppState>,
    ApiQuery(f): ApiQuery<ConversationParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Value>>, ApiError> {
    let req = page_request(&p, List::Conversations)?;
    if let Some(t) = &f.latest_checkpoint_type {
        CheckpointType::parse(t).ok_or_else(|| {
            ApiError::parameter("latest_checkpoint_type", "is not a checkpoint type")
        })?;
    }
    let filter = ConversationFilter {
        organization: f.organization,
        status: f.status,
        external_source: f.external_source,
        actor_id: uuid_param("actor_id", &f.actor_id)?,
        created_after: time_param("created_after", &f.created_after)?,
        created_before: time_param("created_before", &f.created_before)?,
        latest_checkpoint_type: f.latest_checkpoint_type,
    };
    read_your_writes(&state, &p.min_position).await?;
    Ok(Json(state.read_model.conversations(&filter, &req).await?))
}

/// `GET /v1/conversations/{id}`.
#[utoipa::path(get, path = "/v1/conversations/{id}", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = crate::schemas::ConversationView, description = "The conversation with latest checkpoint and counts"), (status = 404, body = crate::error::Problem)))]
pub async fn conversation(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Value>, ApiError> {
    let id = path_uuid(&id, "conversation_not_found", "conversation")?;
    read_your_writes(&state, &p.min_position).await?;
    found(
        state.read_model.conversation(id).await?,
        "conversation_not_found",
        "conversation",
        id,
    )
}

/// `GET /v1/conversations/{id}/checkpoints`.
#[utoipa::path(get, path = "/v1/conversations/{id}/checkpoints", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = crate::schemas::CheckpointPage, description = "Its checkpoints, oldest first"), (status = 404, body = crate::error::Problem)))]
pub async fn checkpoints(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Value>>, ApiError> {
    let id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let req = page_request(&p, List::Checkpoints)?;
    read_your_writes(&state, &p.min_position).await?;
    require_conversation(&state, id).await?;
    Ok(Json(state.read_model.checkpoints(id, &req).await?))
}

/// `GET /v1/conversations/{id}/messages`.
#[utoipa::path(get, path = "/v1/conversations/{id}/messages", tag = "queries", params(("id" = Uuid, Path), MessageParams, ListParams),
    responses((status = 200, body = crate::schemas::MessagePage, description = "Its messages in time order"), (status = 404, body = crate::error::Problem)))]
pub async fn messages(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(f): ApiQuery<MessageParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Value>>, ApiError> {
    let id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let req = page_request(&p, List::Messages)?;
    let (task_id, actor_id) = (
        uuid_param("task_id", &f.task_id)?,
        uuid_param("actor_id", &f.actor_id)?,
    );
    read_your_writes(&state, &p.min_position).await?;
    require_conversation(&state, id).await?;
    Ok(Json(
        state
            .read_model
            .messages(id, task_id, actor_id, &req)
            .await?,
    ))
}

/// `GET /v1/conversations/{id}/tasks`.
#[utoipa::path(get, path = "/v1/conversations/{id}/tasks", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = crate::schemas::TaskPage, description = "Its tasks with derived status"), (status = 404, body = crate::error::Problem)))]
pub async fn conversation_tasks(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Value>>, ApiError> {
    let id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let req = page_request(&p, List::Tasks)?;
    read_your_writes(&state, &p.min_position).await?;
    require_conversation(&state, id).await?;
    let filter = TaskFilter {
        conversation_id: Some(id),
        ..TaskFilter::default()
    };
    Ok(Json(state.read_model.tasks(&filter, &req).await?))
}

/// `GET /v1/tasks`.
#[utoipa::path(get, path = "/v1/tasks", tag = "queries", params(TaskParams, ListParams),
    responses((status = 200, body = crate::schemas::TaskPage, description = "A page of tasks with derived status"), (status = 400, body = crate::error::Problem)))]
pub async fn tasks(
    State(state): State<AppState>,
    ApiQuery(f): ApiQuery<TaskParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<Value>>, ApiError> {
    let req = page_request(&p, List::Tasks)?;
    if let Some(s) = &f.status {
        if s != "NOT_STARTED" && TaskCheckpointType::parse(s).is_none() {
            return Err(ApiError::parameter(
                "status",
                "must be NOT_STARTED or a task checkpoint type",
            ));
        }
    }
    let filter = TaskFilter {
        status: f.status,
        assigned_to: uuid_param("assigned_to", &f.assigned_to)?,
        conversation_id: uuid_param("conversation_id", &f.conversation_id)?,
        checkpoint_id: uuid_param("checkpoint_id", &f.checkpoint_id)?,
        organization: f.organization,
    };
    read_your_writes(&state, &p.min_position).await?;
    Ok(Json(state.read_model.tasks(&filter, &req).await?))
}

/// `GET /v1/tasks/{id}`.
#[utoipa::path(get, path = "/v1/tasks/{id}", tag = "queries", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = crate::schemas::TaskDetail, description = "The task, its status and checkpoint history"), (status = 404, body = crate::error::Problem)))]
pub async fn task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Value>, ApiError> {
    let id = path_uuid(&id, "task_not_found", "task")?;
    read_your_writes(&state, &p.min_position).await?;
    found(
        state.read_model.task(id).await?,
        "task_not_found",
        "task",
        id,
    )
}

/// `GET /v1/stats/tasks`.
#[utoipa::path(get, path = "/v1/stats/tasks", tag = "queries", params(StatsParams),
    responses((status = 200, body = crate::schemas::TaskStats, description = "Counts by status and cycle times"), (status = 400, body = crate::error::Problem)))]
pub async fn task_stats(
    State(state): State<AppState>,
    ApiQuery(p): ApiQuery<StatsParams>,
) -> Result<Json<Value>, ApiError> {
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
    read_your_writes(&state, &p.min_position).await?;
    Ok(Json(state.read_model.task_stats(group).await?))
}

/// Path of a child entity: its parent's id and its own.
#[derive(Debug, Deserialize)]
pub struct ChildPath {
    /// The parent (conversation or task).
    pub id: String,
    /// The child's id.
    pub child: String,
}

/// `GET /v1/conversations/{id}/checkpoints/{child}`.
#[utoipa::path(get, path = "/v1/conversations/{id}/checkpoints/{child}", tag = "queries",
    params(("id" = Uuid, Path), ("child" = Uuid, Path), ListParams),
    responses((status = 200, body = crate::schemas::ConversationCheckpoint, description = "The checkpoint"), (status = 404, body = crate::error::Problem)))]
pub async fn checkpoint(
    State(state): State<AppState>,
    Path(p): Path<ChildPath>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Json<Value>, ApiError> {
    let conversation = path_uuid(&p.id, "conversation_not_found", "conversation")?;
    let id = path_uuid(&p.child, "checkpoint_not_found", "checkpoint")?;
    read_your_writes(&state, &q.min_position).await?;
    found(
        state.read_model.checkpoint(conversation, id).await?,
        "checkpoint_not_found",
        "checkpoint",
        id,
    )
}

/// `GET /v1/conversations/{id}/messages/{child}`.
#[utoipa::path(get, path = "/v1/conversations/{id}/messages/{child}", tag = "queries",
    params(("id" = Uuid, Path), ("child" = Uuid, Path), ListParams),
    responses((status = 200, body = crate::schemas::Message, description = "The message"), (status = 404, body = crate::error::Problem)))]
pub async fn message(
    State(state): State<AppState>,
    Path(p): Path<ChildPath>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Json<Value>, ApiError> {
    let conversation = path_uuid(&p.id, "conversation_not_found", "conversation")?;
    let id = path_uuid(&p.child, "message_not_found", "message")?;
    read_your_writes(&state, &q.min_position).await?;
    found(
        state.read_model.message(conversation, id).await?,
        "message_not_found",
        "message",
        id,
    )
}

/// `GET /v1/tasks/{id}/checkpoints/{child}`.
#[utoipa::path(get, path = "/v1/tasks/{id}/checkpoints/{child}", tag = "queries",
    params(("id" = Uuid, Path), ("child" = Uuid, Path), ListParams),
    responses((status = 200, body = crate::schemas::TaskCheckpoint, description = "The task checkpoint"), (status = 404, body = crate::error::Problem)))]
pub async fn task_checkpoint(
    State(state): State<AppState>,
    Path(p): Path<ChildPath>,
    ApiQuery(q): ApiQuery<ListParams>,
) -> Result<Json<Value>, ApiError> {
    let task = path_uuid(&p.id, "task_not_found", "task")?;
    let id = path_uuid(&p.child, "task_checkpoint_not_found", "task checkpoint")?;
    read_your_writes(&state, &q.min_position).await?;
    found(
        state.read_model.task_checkpoint(task, id).await?,
        "task_checkpoint_not_found",
        "task checkpoint",
        id,
    )
}
