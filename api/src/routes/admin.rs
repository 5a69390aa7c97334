//! Operator endpoints (admin): processors' positions and lag, parked events, and
//! projection rebuilds.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use pm_application::log::{LogPosition, LogReader};
use pm_application::processor::ProcessorStatus;
use pm_application::views::{ParkedEvent, ProcessorLag, ProcessorReport, ReplicaView, RunnerView};
use pm_infrastructure::read_model::rebuild::{finish, start, RebuildError};
use pm_infrastructure::read_model::READ_MODEL;
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

/// Every processor with its stored position, lag behind the log's head, lease and last
/// rebuild; the head position; and this replica's view of its own runners.
pub async fn processor_report(state: &AppState) -> Result<ProcessorReport, ApiError> {
    // The cursors first, then the head: the head is then at or after every cursor read,
    // so a lag is never under-reported.
    let records = state.processors.list().await?;
    let head = state.log.head().await?;
    let processors = records
        .into_iter()
        .map(|record| {
            let position: LogPosition = record.position.parse().unwrap_or_default();
            ProcessorLag {
                record,
                lag_events: head.distance_from(position),
            }
        })
        .collect();
    let runner = |status: &tokio::sync::watch::Receiver<ProcessorStatus>| {
        let local = status.borrow().clone();
        RunnerView {
            leader: local.leader,
            cursor: local.cursor.to_string(),
            parked: local.parked,
            last_error: local.last_error,
        }
    };
    Ok(ProcessorReport {
        head: head.to_string(),
        processors,
        this_replica: ReplicaView {
            owner: state.owner.clone(),
            read_model: runner(&state.processor_status),
            sagas: runner(&state.saga_status),
        },
    })
}

/// `GET /v1/admin/processors`.
#[utoipa::path(get, path = "/v1/admin/processors", tag = "admin", responses((status = 200, body = ProcessorReport, description = "Processors with position and lag")))]
pub async fn processors(State(state): State<AppState>) -> Result<Json<ProcessorReport>, ApiError> {
    Ok(Json(processor_report(&state).await?))
}

/// Parked events of a processor (newest first, at most 500).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ParkedPage {
    /// The parked events.
    pub items: Vec<ParkedEvent>,
}

/// `GET /v1/admin/processors/{name}/parked`: events the processor could not apply.
#[utoipa::path(get, path = "/v1/admin/processors/{name}/parked", tag = "admin", params(("name" = String, Path)),
    responses((status = 200, body = ParkedPage, description = "Parked events, newest first")))]
pub async fn parked(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<ParkedPage>, ApiError> {
    Ok(Json(ParkedPage {
        items: state.processors.parked(&name).await?,
    }))
}

/// `POST /v1/admin/projections/{name}/rebuild`: starts a blue-green rebuild in the
/// background (`202 Accepted`); its progress shows in `GET /v1/admin/processors`.
#[utoipa::path(post, path = "/v1/admin/projections/{name}/rebuild", tag = "admin", params(("name" = String, Path)),
    responses((status = 202, description = "Rebuild started"),
              (status = 404, body = crate::error::Problem, description = "No projection of this name (`projection_not_found`)."),
              (status = 409, body = crate::error::Problem, description = "A rebuild of this projection is already running (`rebuild_in_progress`).")))]
pub async fn rebuild_projection(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    start(&state.db, &name).await?;
    let (db, log) = (state.db.clone(), state.log.clone());
    tokio::spawn(async move {
        match finish(&db, &log).await {
            Ok(report) => tracing::info!(?report, "projection rebuilt"),
            Err(e) => tracing::error!(error = %e, "projection rebuild failed"),
        }
    });
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"projection": READ_MODEL, "status": "running", "progress": "/v1/admin/processors"})),
    )
        .into_response())
}

impl From<RebuildError> for ApiError {
    fn from(e: RebuildError) -> Self {
        match e {
            RebuildError::UnknownProjection(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "projection_not_found", e.to_string())
            }
            RebuildError::AlreadyRunning(_) => {
                ApiError::new(StatusCode::CONFLICT, "rebuild_in_progress", e.to_string())
            }
            other => ApiError::internal(other),
        }
    }
}
