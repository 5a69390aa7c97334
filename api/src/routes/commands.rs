//! The command endpoints of API.md: each parses its body at the edge (`TryFrom` into an
//! application input) and makes one application call. Success is `201 Created` with the
//! entity, `Location` and `X-Event-Position`; an identical repeat onto a derived id is
//! `200 OK` with the existing entity.

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use pm_application::bus::Outcome;
use pm_application::commands::{
    AddMessageInput, CreateConversationCheckpointInput, CreateTaskCheckpointInput, CreateTaskInput,
    RegisterActorInput, StartConversationInput,
};
use pm_application::fact::Fact;
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::forgetting::Forgotten;
use pm_domain::message::MessageAdded;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use serde::Serialize;

use crate::error::ApiError;
use crate::extract::{path_uuid, Ctx, JsonBody};
use crate::state::AppState;

/// The header carrying a command's log position.
pub const EVENT_POSITION: &str = "x-event-position";

/// Where each created entity is served (the `Location` header).
pub trait Located {
    /// The entity's path.
    fn location(&self) -> String;
}

impl Located for ActorRegistered {
    fn location(&self) -> String {
        format!("/v1/actors/{}", self.id)
    }
}

impl Located for ConversationStarted {
    fn location(&self) -> String {
        format!("/v1/conversations/{}", self.id)
    }
}

impl Located for ConversationCheckpointCreated {
    fn location(&self) -> String {
        format!(
            "/v1/conversations/{}/checkpoints/{}",
            self.conversation_id, self.id
        )
    }
}

impl Located for TaskCreated {
    fn location(&self) -> String {
        format!("/v1/tasks/{}", self.id)
    }
}

impl Located for TaskCheckpointCreated {
    fn location(&self) -> String {
        format!("/v1/tasks/{}/checkpoints/{}", self.task_id, self.id)
    }
}

impl Located for MessageAdded {
    fn location(&self) -> String {
        format!(
            "/v1/conversations/{}/messages/{}",
            self.conversation_id, self.id
        )
    }
}

/// The answer's body and `Location` for a forgetting of one of `collection`.
fn forgotten(f: &Forgotten, collection: &str) -> (String, String) {
    (
        serde_json::to_string(f).unwrap_or_default(),
        format!("/v1/{collection}/{}", f.id),
    )
}

/// The body and `Location` of the answer that created `fact` (for a replayed
/// `Idempotency-Key`).
pub fn fact_answer(fact: &Fact) -> (String, String) {
    fn of<T: Serialize + Located>(f: &T) -> (String, String) {
        (serde_json::to_string(f).unwrap_or_default(), f.location())
    }
    match fact {
        Fact::ActorRegistered(f) => of(f),
        Fact::ConversationStarted(f) => of(f),
        Fact::ConversationCheckpointCreated(f) => of(f),
        Fact::TaskCreated(f) => of(f),
        Fact::TaskCheckpointCreated(f) => of(f),
        Fact::MessageAdded(f) => of(f),
        Fact::ActorForgotten(f) => forgotten(f, "actors"),
        Fact::ConversationForgotten(f) => forgotten(f, "conversations"),
    }
}

/// `201 Created` with the entity, `Location` and `X-Event-Position`; `200 OK` with the
/// existing entity for an identical repeat.
fn answer<T: Serialize + Located>(outcome: Outcome<T>) -> Response {
    let location = HeaderValue::from_str(&outcome.entity().location()).ok();
    let (status, position, entity) = match outcome {
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
#[utoipa::path(post, path = "/v1/actors", tag = "commands", request_body = RegisterActorInput,
    responses((status = 201, body = ActorRegistered, description = "Registered"), (status = 200, body = ActorRegistered, description = "Identical repeat"),
              (status = 409, body = crate::error::Problem, description = "An actor with this `external_identity` exists with other content (`already_exists`).")))]
pub async fn register_actor(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    JsonBody(input): JsonBody<RegisterActorInput>,
) -> Result<Response, ApiError> {
    Ok(answer(state.commands.register_actor(input, &ctx).await?))
}

/// `POST /v1/conversations` — `project_manager.conversation.started`.
#[utoipa::path(post, path = "/v1/conversations", tag = "commands", request_body = StartConversationInput,
    responses((status = 201, body = ConversationStarted, description = "Started"), (status = 200, body = ConversationStarted, description = "Identical repeat"),
              (status = 409, body = crate::error::Problem, description = "A conversation with this `external_source` and `external_id` exists with other content (`conversation_exists`)."),
              (status = 403, body = crate::error::Problem, description = "`organization` is not one of the caller's organizations (`organization_forbidden`)."),
              (status = 422, body = crate::error::Problem, description = "An `actor_ids` entry is not a registered actor (`actor_not_found`); a caller of some organizations only named none (`organization_required`).")))]
pub async fn start_conversation(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    JsonBody(input): JsonBody<StartConversationInput>,
) -> Result<Response, ApiError> {
    let outcome = state.commands.start_conversation(input, &ctx).await?;
    let started = outcome.entity();
    let organization = started.organization.as_ref().map(|o| o.as_str());
    state.owners.learn_conversation(started.id, organization);
    Ok(answer(outcome))
}

/// `POST /v1/conversations/{id}/checkpoints` — `project_manager.conversation.checkpoint.created`.
#[utoipa::path(post, path = "/v1/conversations/{id}/checkpoints", tag = "commands", request_body = CreateConversationCheckpointInput,
    params(("id" = Uuid, Path, description = "conversation id")),
    responses((status = 201, body = ConversationCheckpointCreated, description = "Created"),
              (status = 404, body = crate::error::Problem, description = "The path names no conversation (`conversation_not_found`).")))]
pub async fn create_conversation_checkpoint(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Ctx(ctx): Ctx,
    JsonBody(input): JsonBody<CreateConversationCheckpointInput>,
) -> Result<Response, ApiError> {
    let conversation_id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let outcome = state
        .commands
        .create_conversation_checkpoint(conversation_id, input, &ctx)
        .await?;
    Ok(answer(outcome))
}

/// `POST /v1/conversations/{id}/tasks` — `project_manager.task.created`.
#[utoipa::path(post, path = "/v1/conversations/{id}/tasks", tag = "commands", request_body = CreateTaskInput,
    params(("id" = Uuid, Path, description = "conversation id")),
    responses((status = 201, body = TaskCreated, description = "Created"),
              (status = 404, body = crate::error::Problem, description = "The path names no conversation (`conversation_not_found`)."),
              (status = 422, body = crate::error::Problem, description = "`checkpoint_id` names no checkpoint (`checkpoint_not_found`), one of another conversation \
                (`checkpoint_conversation_mismatch`) or one that is not `BEGIN_WORK` (`checkpoint_not_begin_work`); `assigned_to` is not a registered actor (`actor_not_found`).")))]
pub async fn create_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Ctx(ctx): Ctx,
    JsonBody(input): JsonBody<CreateTaskInput>,
) -> Result<Response, ApiError> {
    let conversation_id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let outcome = state
        .commands
        .create_task(conversation_id, input, &ctx)
        .await?;
    state
        .owners
        .learn_task(outcome.entity().id, conversation_id);
    Ok(answer(outcome))
}

/// `POST /v1/tasks/{id}/checkpoints` — `project_manager.task.checkpoint.created`.
#[utoipa::path(post, path = "/v1/tasks/{id}/checkpoints", tag = "commands", request_body = CreateTaskCheckpointInput,
    params(("id" = Uuid, Path, description = "task id")),
    responses((status = 201, body = TaskCheckpointCreated, description = "Created"),
              (status = 404, body = crate::error::Problem, description = "The path names no task (`task_not_found`).")))]
pub async fn create_task_checkpoint(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Ctx(ctx): Ctx,
    JsonBody(input): JsonBody<CreateTaskCheckpointInput>,
) -> Result<Response, ApiError> {
    let task_id = path_uuid(&id, "task_not_found", "task")?;
    let outcome = state
        .commands
        .create_task_checkpoint(task_id, input, &ctx)
        .await?;
    Ok(answer(outcome))
}

/// `POST /v1/conversations/{id}/messages` — `project_manager.message.added`.
#[utoipa::path(post, path = "/v1/conversations/{id}/messages", tag = "commands", request_body = AddMessageInput,
    params(("id" = Uuid, Path, description = "conversation id")),
    responses((status = 201, body = MessageAdded, description = "Added"), (status = 200, body = MessageAdded, description = "Identical repeat"),
              (status = 403, body = crate::error::Problem, description = "The caller may not speak as `actor_id` (`actor_forbidden`): `human` actors need the role ingress, `ai` actors llm, anyone admin; a principal with `actors` only those; a fenced message only the actor the turn's agent acts for."),
              (status = 404, body = crate::error::Problem, description = "The path names no conversation (`conversation_not_found`)."),
              (status = 409, body = crate::error::Problem, description = "A message with this `external_identity` exists with other content (`already_exists`)."),
              (status = 422, body = crate::error::Problem, description = "`actor_id` is not a registered actor (`actor_not_found`); `task_id` names no task of this conversation (`task_not_found`).")))]
pub async fn add_message(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Ctx(ctx): Ctx,
    JsonBody(input): JsonBody<AddMessageInput>,
) -> Result<Response, ApiError> {
    let conversation_id = path_uuid(&id, "conversation_not_found", "conversation")?;
    let outcome = state
        .commands
        .add_message(conversation_id, input, &ctx)
        .await?;
    Ok(answer(outcome))
}
