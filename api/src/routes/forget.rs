//! `POST /v1/actors/{id}/forget` and `POST /v1/conversations/{id}/forget` (admin; TRUST.md
//! "Forgetting a person"): from the answer on, the party's texts read `null` everywhere,
//! with `"forgotten": true`. Forgetting again answers the same and writes nothing.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use pm_application::bus::Outcome;
use pm_application::AppError;
use pm_domain::forgetting::Forgotten;
use pm_domain::DomainError;

use super::workers::with_position;
use crate::error::ApiError;
use crate::extract::{path_uuid, Ctx};
use crate::state::AppState;

/// `200 OK` with the forgetting, and `X-Event-Position` when this request wrote it.
fn answer(outcome: Outcome<Forgotten>) -> Response {
    let (position, fact) = match outcome {
        Outcome::Created { entity, position } => (Some(position), entity),
        Outcome::Existing { entity } => (None, entity),
    };
    with_position((StatusCode::OK, Json(fact)).into_response(), position)
}

/// `POST /v1/actors/{id}/forget`: `project_manager.actor.forgotten`.
#[utoipa::path(post, path = "/v1/actors/{id}/forget", tag = "admin",
    params(("id" = uuid::Uuid, Path)),
    responses((status = 200, body = Forgotten, description = "Forgotten (`project_manager.actor.forgotten`), now or before: the first forgetting"),
              (status = 404, body = crate::error::Problem, description = "No such actor (`actor_not_found`)")))]
pub async fn actor(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = path_uuid(&id, "actor_not_found", "actor")?;
    match state.commands.forget_actor(id, &ctx).await {
        Ok(outcome) => Ok(answer(outcome)),
        // The path names it: a missing one is `404`, not a body's `422`.
        Err(AppError::Domain(DomainError::ActorNotFound(_))) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "actor_not_found",
            format!("actor {id} does not exist"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// `POST /v1/conversations/{id}/forget`: `project_manager.conversation.forgotten`.
#[utoipa::path(post, path = "/v1/conversations/{id}/forget", tag = "admin",
    params(("id" = uuid::Uuid, Path)),
    responses((status = 200, body = Forgotten, description = "Forgotten (`project_manager.conversation.forgotten`), now or before: the first forgetting"),
              (status = 404, body = crate::error::Problem, description = "No such conversation (`conversation_not_found`)")))]
pub async fn conversation(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = path_uuid(&id, "conversation_not_found", "conversation")?;
    Ok(answer(state.commands.forget_conversation(id, &ctx).await?))
}
