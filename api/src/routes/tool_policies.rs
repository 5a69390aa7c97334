//! Tool policies (TRUST.md "Tool policies", admin): which calls run, wait for a person, or
//! never run — decided by the service when a worker reports them, never by the worker.
//! Each change is a fact (`project_manager.tool_policy.set` / `.removed`); the reads answer
//! the policies in force, which the log's own table keeps in the same transaction.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use pm_application::bus::Outcome;
use pm_application::commands::ToolPolicyInput;
use pm_domain::tool_policy::{check_name, ToolPolicySet};
use serde::Serialize;
use utoipa::ToSchema;

use super::workers::with_position;
use crate::error::ApiError;
use crate::extract::{Ctx, JsonBody};
use crate::state::AppState;

/// The policies in force.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolPolicyList {
    /// Every policy, by name.
    pub items: Vec<ToolPolicySet>,
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "tool_policy_not_found",
        format!("no tool policy {name}"),
    )
}

/// A name no policy can have is a policy that does not exist.
fn path_name(name: &str) -> Result<&str, ApiError> {
    check_name(name).map_or_else(|_| Err(not_found(name)), |()| Ok(name))
}

/// `PUT /v1/tool-policies/{name}` (admin): the policy under this name from now on; calls
/// already reported keep the policy they were reported under.
#[utoipa::path(put, path = "/v1/tool-policies/{name}", tag = "tools",
    params(("name" = String, Path, description = "1–100 letters, digits and `._-`; not `default`")),
    request_body = ToolPolicyInput,
    responses((status = 201, body = ToolPolicySet, description = "A new policy (`project_manager.tool_policy.set`)"),
              (status = 200, body = ToolPolicySet, description = "Replaced (a new fact), or the same policy again (nothing written)"),
              (status = 422, body = crate::error::Problem, description = "A field breaks its rule (`validation_failed`, naming it)")))]
pub async fn put(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(name): Path<String>,
    JsonBody(input): JsonBody<ToolPolicyInput>,
) -> Result<Response, ApiError> {
    // Only whether the answer says 201 or 200 depends on this read: the fact is decided
    // on the policy's own stream.
    let existed = state.policies.get(&name).await?.is_some();
    let outcome = state.commands.set_tool_policy(&name, input, &ctx).await?;
    let (status, position, policy) = match outcome {
        Outcome::Created { entity, position } if existed => {
            (StatusCode::OK, Some(position), entity)
        }
        Outcome::Created { entity, position } => (StatusCode::CREATED, Some(position), entity),
        Outcome::Existing { entity } => (StatusCode::OK, None, entity),
    };
    Ok(with_position(
        (status, Json(policy)).into_response(),
        position,
    ))
}

/// `DELETE /v1/tool-policies/{name}` (admin): `project_manager.tool_policy.removed`; calls
/// reported from now on take another policy or the default.
#[utoipa::path(delete, path = "/v1/tool-policies/{name}", tag = "tools",
    params(("name" = String, Path)),
    responses((status = 204, description = "Removed"),
              (status = 404, body = crate::error::Problem, description = "No policy of this name (`tool_policy_not_found`)")))]
pub async fn delete(
    State(state): State<AppState>,
    Ctx(ctx): Ctx,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let name = path_name(&name)?;
    let position = match state.commands.remove_tool_policy(name, &ctx).await? {
        Outcome::Created { position, .. } => Some(position),
        Outcome::Existing { .. } => None,
    };
    Ok(with_position(
        StatusCode::NO_CONTENT.into_response(),
        position,
    ))
}

/// `GET /v1/tool-policies`: every policy in force.
#[utoipa::path(get, path = "/v1/tool-policies", tag = "tools",
    responses((status = 200, body = ToolPolicyList, description = "The policies, by name")))]
pub async fn list(State(state): State<AppState>) -> Result<Json<ToolPolicyList>, ApiError> {
    Ok(Json(ToolPolicyList {
        items: state.policies.all().await?,
    }))
}

/// `GET /v1/tool-policies/{name}`: one policy.
#[utoipa::path(get, path = "/v1/tool-policies/{name}", tag = "tools",
    params(("name" = String, Path)),
    responses((status = 200, body = ToolPolicySet, description = "The policy"),
              (status = 404, body = crate::error::Problem, description = "No policy of this name (`tool_policy_not_found`)")))]
pub async fn get(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<ToolPolicySet>, ApiError> {
    let name = path_name(&name)?;
    state
        .policies
        .get(name)
        .await?
        .map(Json)
        .ok_or_else(|| not_found(name))
}
