//! Query parameters of the read endpoints and their parsing: filters, pagination,
//! `min_position` read-your-writes, path ids.

use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use pm_application::log::LogPosition;
use pm_application::queries::ReadModelStore;
use pm_application::views::{List, PageCursor, PageRequest};
use pm_infrastructure::read_model::query::ReadModel;
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::error::{invalid_position, ApiError};
use crate::state::AppState;

/// Parameters every list takes.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Page size (default 50, max 500).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`.
    #[param(pattern = "^[0-9a-f]+$")]
    pub cursor: Option<String>,
    /// Wait until the read model has processed this log position.
    #[param(pattern = "^[0-9]+([.][0-9]+)?$")]
    pub min_position: Option<String>,
}

/// Filters of `GET /v1/conversations`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConversationParams {
    /// Exact organization.
    pub organization: Option<String>,
    /// Exact status.
    pub status: Option<String>,
    /// Exact external source.
    pub external_source: Option<String>,
    /// Conversations an actor takes part in.
    #[param(value_type = Option<uuid::Uuid>)]
    pub actor_id: Option<String>,
    /// Created at or after (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    pub created_after: Option<String>,
    /// Created before (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    pub created_before: Option<String>,
    /// Type of the latest checkpoint.
    #[param(value_type = Option<pm_domain::types::CheckpointType>)]
    pub latest_checkpoint_type: Option<String>,
}

/// Filters of `GET /v1/tasks`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TaskParams {
    /// Derived status: `NOT_STARTED` or a task checkpoint type.
    #[param(
        pattern = "^(NOT_STARTED|WORK_STARTED|WORK_COMPLETED|WORK_APPROVED|WORK_REJECTED|WORK_PAUSED)$"
    )]
    pub status: Option<String>,
    /// Assignee.
    #[param(value_type = Option<uuid::Uuid>)]
    pub assigned_to: Option<String>,
    /// Conversation.
    #[param(value_type = Option<uuid::Uuid>)]
    pub conversation_id: Option<String>,
    /// BEGIN_WORK checkpoint.
    #[param(value_type = Option<uuid::Uuid>)]
    pub checkpoint_id: Option<String>,
    /// The conversation's organization.
    pub organization: Option<String>,
}

/// Filters of `GET /v1/conversations/{id}/messages`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessageParams {
    /// Only messages about this task.
    #[param(value_type = Option<uuid::Uuid>)]
    pub task_id: Option<String>,
    /// Only messages by this actor.
    #[param(value_type = Option<uuid::Uuid>)]
    pub actor_id: Option<String>,
}

/// Parameters of `GET /v1/stats/tasks`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatsParams {
    /// `assigned_to` or `organization`.
    #[param(pattern = "^(assigned_to|organization)$")]
    pub group_by: Option<String>,
    /// Wait until the read model has processed this log position.
    #[param(pattern = "^[0-9]+([.][0-9]+)?$")]
    pub min_position: Option<String>,
}

pub(crate) fn uuid_param(name: &str, raw: &Option<String>) -> Result<Option<Uuid>, ApiError> {
    raw.as_deref()
        .map(|r| {
            r.parse()
                .map_err(|_| ApiError::parameter(name, "must be a UUID"))
        })
        .transpose()
}

pub(super) fn time_param(
    name: &str,
    raw: &Option<String>,
) -> Result<Option<DateTime<Utc>>, ApiError> {
    raw.as_deref()
        .map(|r| {
            DateTime::parse_from_rfc3339(r)
                .ok()
                // One the stores can keep too (PostgreSQL has no year 0).
                .and_then(|t| pm_domain::time::in_range(t.with_timezone(&Utc)).ok())
                .ok_or_else(|| {
                    ApiError::parameter(
                        name,
                        "must be an RFC 3339 time between the years 1 and 9999",
                    )
                })
        })
        .transpose()
}

pub(super) fn found<T>(
    value: Option<T>,
    code: &'static str,
    what: &str,
    id: Uuid,
) -> Result<Json<T>, ApiError> {
    value.map(Json).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            code,
            format!("{what} {id} does not exist"),
        )
    })
}

/// The read model, once it has processed `min_position` (waits up to 5 s).
pub(super) async fn read_your_writes<'s>(
    state: &'s AppState,
    min_position: &Option<String>,
) -> Result<&'s ReadModel, ApiError> {
    let wanted = min_position
        .as_deref()
        .map(|raw| {
            raw.parse::<LogPosition>()
                .map_err(|e| invalid_position("min_position", e))
        })
        .transpose()?;
    Ok(state.queries.at(wanted).await?)
}

pub(crate) fn page_request(p: &ListParams, list: List) -> Result<PageRequest, ApiError> {
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

pub(super) async fn require_conversation(read: &ReadModel, id: Uuid) -> Result<(), ApiError> {
    found(
        read.conversation(id).await?,
        "conversation_not_found",
        "conversation",
        id,
    )
    .map(|_| ())
}

/// Path of a child entity: its parent's id and its own.
#[derive(Debug, Deserialize)]
pub struct ChildPath {
    /// The parent (conversation or task).
    pub id: String,
    /// The child's id.
    pub child: String,
}
