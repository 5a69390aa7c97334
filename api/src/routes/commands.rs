//! The command endpoints of API.md: each parses its body at the edge (`TryFrom` into an
//! application input) and makes one application call. Success is `201 Created` with the
//! entity, `Location` and `X-Event-Position`; an identical repeat onto a derived id is
//! `200 OK` with the existing entity.

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, FixedOffset, Utc};
use pm_application::bus::Outcome;
use pm_application::commands::{
    AddMessageInput, CommandResult, CreateCheckpointInput, CreateTaskInput, RegisterActorInput,
    StartConversationInput,
};
use pm_domain::types::{ActorKind, CheckpointType, TaskCheckpointType};
use pm_domain::NonEmptyText;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::{Ctx, JsonBody};
use crate::state::AppState;

/// The header carrying a command's log position.
pub const EVENT_POSITION: &str = "x-event-position";

fn text(field: &str, raw: String) -> Result<NonEmptyText, ApiError> {
    NonEmptyText::parse(raw).map_err(|e| ApiError::validation(field, e))
}

fn optional_text(field: &str, raw: Option<String>) -> Result<Option<String>, ApiError> {
    raw.map(|r| text(field, r).map(String::from)).transpose()
}

fn path_id(raw: &str, not_found: &'static str, what: &str) -> Result<Uuid, ApiError> {
    raw.parse().map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            not_found,
            format!("{what} {raw} does not exist"),
        )
    })
}

/// Body of `POST /v1/actors`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterActorBody {
    /// `human` or `ai`.
    #[schema(value_type = crate::schemas::ActorKind)]
    pub kind: ActorKind,
    /// The name shown (non-empty).
    #[schema(min_length = 1, pattern = "\\S")]
    pub display_name: String,
    /// Identity in an external system; the id is then derived from it (UUIDv5).
    #[schema(min_length = 1)]
    pub external_identity: Option<String>,
}

impl TryFrom<RegisterActorBody> for RegisterActorInput {
    type Error = ApiError;
    fn try_from(b: RegisterActorBody) -> Result<Self, ApiError> {
        Ok(Self {
            kind: b.kind,
            display_name: text("display_name", b.display_name)?,
            external_identity: optional_text("external_identity", b.external_identity)?,
        })
    }
}

/// Body of `POST /v1/conversations`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartConversationBody {
    /// At least one registered actor.
    #[schema(min_items = 1)]
    pub actor_ids: Vec<Uuid>,
    /// Non-empty title.
    #[schema(min_length = 1, pattern = "\\S")]
    pub title: String,
    /// Id in the external source; with `external_source` the id is derived (UUIDv5).
    #[schema(min_length = 1)]
    pub external_id: Option<String>,
    /// External source, e.g. `github`.
    #[schema(min_length = 1)]
    pub external_source: Option<String>,
    /// Status given by the ingress.
    #[schema(min_length = 1)]
    pub status: Option<String>,
    /// Organization.
    #[schema(min_length = 1)]
    pub organization: Option<String>,
}

impl TryFrom<StartConversationBody> for StartConversationInput {
    type Error = ApiError;
    fn try_from(b: StartConversationBody) -> Result<Self, ApiError> {
        if b.actor_ids.is_empty() {
            return Err(ApiError::validation(
                "actor_ids",
                "needs at least one actor",
            ));
        }
        Ok(Self {
            actor_ids: b.actor_ids,
            title: text("title", b.title)?,
            external_id: optional_text("external_id", b.external_id)?,
            external_source: optional_text("external_source", b.external_source)?,
            status: optional_text("status", b.status)?,
            organization: optional_text("organization", b.organization)?,
        })
    }
}

/// Body of `POST /v1/conversations/{id}/checkpoints`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCheckpointBody {
    /// One of CONVERSATION_STARTED, BEGIN_WORK, NEED_INFORMATION, CLOSE_CONVERSATION,
    /// WORK_COMPLETED.
    #[schema(value_type = crate::schemas::CheckpointType)]
    pub checkpoint_type: CheckpointType,
    /// Non-empty summary.
    #[schema(min_length = 1, pattern = "\\S")]
    pub summary: String,
}

/// Body of `POST /v1/conversations/{id}/tasks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTaskBody {
    /// A BEGIN_WORK checkpoint of this conversation.
    pub checkpoint_id: Uuid,
    /// Non-empty instructions.
    #[schema(min_length = 1, pattern = "\\S")]
    pub instructions: String,
    /// A registered actor.
    pub assigned_to: Option<Uuid>,
}

/// Body of `POST /v1/tasks/{id}/checkpoints`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTaskCheckpointBody {
    /// One of WORK_STARTED, WORK_COMPLETED, WORK_APPROVED, WORK_REJECTED, WORK_PAUSED.
    #[serde(rename = "type")]
    #[schema(value_type = crate::schemas::TaskCheckpointType)]
    pub checkpoint_type: TaskCheckpointType,
}

/// Body of `POST /v1/conversations/{id}/messages`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMessageBody {
    /// A registered actor.
    pub actor_id: Uuid,
    /// Non-empty content.
    #[schema(min_length = 1, pattern = "\\S")]
    pub content: String,
    /// A task of this conversation.
    pub task_id: Option<Uuid>,
    /// Identity in an external system; the id is then derived from it (UUIDv5).
    #[schema(min_length = 1)]
    pub external_identity: Option<String>,
    /// When the message was written (RFC 3339); default: server time.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub time: Option<DateTime<FixedOffset>>,
}

fn answer(result: CommandResult) -> Response {
    let location = HeaderValue::from_str(&result.location).ok();
    let (status, position, entity) = match result.outcome {
        Outcome::Created { entity, position } => (StatusCode::CREATED, Some(position), entity),
        Outcome::Existing { entity } => (StatusCode::OK, None, entity),
    };
    let mut response = (status, Json(entity)).into_response();
    let headers = response.headers_mut();
    if let Some(location) = location {
        headers.insert(header::LOCATION, location);
    }
    if let Some(position) = position.and_then(|p| HeaderValue::from_str(&p.to_string()).ok()) {
        headers.insert(EVENT_POSITION, position);
    }
    response
}

/// `POST /v1/actors` — `project_manager.actor.registered`.
#[utoipa::path(post, path = "/v1/actors", tag = "commands", request_body = RegisterActorBody,
    responses((status = 201, body = crate::schemas::Actor, description = "Registered"), (status = 200, body = crate::schemas::Actor, description = "Identical repeat"),
              (status = 409, body = crate::error::Problem), (status = 422, body = crate::error::Problem)))]
pub async fn register_actor(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    JsonBody(body): JsonBody<RegisterActorBody>,
) -> Result<Response, ApiError> {
    let input = body.try_into()?;
    Ok(answer(state.commands.register_actor(input, &ctx).await?))
}

/// `POST /v1/conversations` — `project_manager.conversation.started`.
#[utoipa::path(post, path = "/v1/conversations", tag = "commands", request_body = StartConversationBody,
    responses((status = 201, body = crate::schemas::Conversation, description = "Started"), (status = 200, body = crate::schemas::Conversation, description = "Identical repeat"),
              (status = 409, body = crate::error::Problem), (status = 422, body = crate::error::Problem)))]
pub async fn start_conversation(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    JsonBody(body): JsonBody<StartConversationBody>,
) -> Result<Response, ApiError> {
    let input = body.try_into()?;
    Ok(answer(
        state.commands.start_conversation(input, &ctx).await?,
    ))
}

/// `POST /v1/conversations/{id}/checkpoints` — `project_manager.conversation.checkpoint.created`.
#[utoipa::path(post, path = "/v1/conversations/{id}/checkpoints", tag = "commands", request_body = CreateCheckpointBody,
    params(("id" = Uuid, Path, description = "conversation id")),
    responses((status = 201, body = crate::schemas::ConversationCheckpoint, description = "Created"), (status = 404, body = crate::error::Problem),
              (status = 422, body = crate::error::Problem)))]
pub async fn create_checkpoint(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Ctx(ctx): Ctx,
    JsonBody(body): JsonBody<CreateCheckpointBody>,
) -> Result<Response, ApiError> {
    let conversation_id = path_id(&id, "conversation_not_found", "conversation")?;
    let input = CreateCheckpointInput {
        checkpoint_type: body.checkpoint_type,
        summary: text("summary", body.summary)?,
    };
    Ok(answer(
        state
            .commands
            .create_checkpoint(conversation_id, input, &ctx)
            .await?,
    ))
}

/// `POST /v1/conversations/{id}/tasks` — `project_manager.task.created`.
#[utoipa::path(post, path = "/v1/conversations/{id}/tasks", tag = "commands", request_body = CreateTaskBody,
    params(("id" = Uuid, Path, description = "conversation id")),
    responses((status = 201, body = crate::schemas::Task, description = "Created"), (status = 404, body = crate::error::Problem),
              (status = 422, body = crate::error::Problem)))]
pub async fn create_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Ctx(ctx): Ctx,
    JsonBody(body): JsonBody<CreateTaskBody>,
) -> Result<Response, ApiError> {
    let conversation_id = path_id(&id, "conversation_not_found", "conversation")?;
    let input = CreateTaskInput {
        checkpoint_id: body.checkpoint_id,
        instructions: text("instructions", body.instructions)?,
        assigned_to: body.assigned_to,
    };
    Ok(answer(
        state
            .commands
            .create_task(conversation_id, input, &ctx)
            .await?,
    ))
}

/// `POST /v1/tasks/{id}/checkpoints` — `project_manager.task.checkpoint.created`.
#[utoipa::path(post, path = "/v1/tasks/{id}/checkpoints", tag = "commands", request_body = CreateTaskCheckpointBody,
    params(("id" = Uuid, Path, description = "task id")),
    responses((status = 201, body = crate::schemas::TaskCheckpoint, description = "Created"), (status = 404, body = crate::error::Problem),
              (status = 422, body = crate::error::Problem)))]
pub async fn create_task_checkpoint(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Ctx(ctx): Ctx,
    JsonBody(body): JsonBody<CreateTaskCheckpointBody>,
) -> Result<Response, ApiError> {
    let task_id = path_id(&id, "task_not_found", "task")?;
    Ok(answer(
        state
            .commands
            .create_task_checkpoint(task_id, body.checkpoint_type, &ctx)
            .await?,
    ))
}

/// `POST /v1/conversations/{id}/messages` — `project_manager.message.added`.
#[utoipa::path(post, path = "/v1/conversations/{id}/messages", tag = "commands", request_body = AddMessageBody,
    params(("id" = Uuid, Path, description = "conversation id")),
    responses((status = 201, body = crate::schemas::Message, description = "Added"), (status = 200, body = crate::schemas::Message, description = "Identical repeat"),
              (status = 404, body = crate::error::Problem), (status = 409, body = crate::error::Problem),
              (status = 422, body = crate::error::Problem)))]
pub async fn add_message(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Ctx(ctx): Ctx,
    JsonBody(body): JsonBody<AddMessageBody>,
) -> Result<Response, ApiError> {
    let conversation_id = path_id(&id, "conversation_not_found", "conversation")?;
    let input = AddMessageInput {
        actor_id: body.actor_id,
        content: text("content", body.content)?,
        task_id: body.task_id,
        external_identity: optional_text("external_identity", body.external_identity)?,
        time: body.time.map(|t| t.with_timezone(&Utc)),
    };
    Ok(answer(
        state
            .commands
            .add_message(conversation_id, input, &ctx)
            .await?,
    ))
}
