//! The workers' endpoints (WORKERS.md): claim a turn (long-poll), heartbeat, release,
//! report an error or usage, and the operator's interrupt. The reports are fenced by the
//! claim: `PM-Turn-Id` (the path's turn) and `PM-Turn-Epoch`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use pm_application::bus::EventMetadata;
use pm_application::log::LogPosition;
use pm_application::queries::SagaReadStore;
use pm_application::sagas::ClaimFilter;
use pm_application::trace::TraceContext;
use pm_application::views::TurnView;
use pm_application::workers::{
    claim_context, heartbeat_refused, ClaimContext, ClaimRequest, Refused,
};
use pm_domain::limits::{is_short_text, LEASE_MS, MAX_CLAIM_WAIT_MS, MAX_WORKER_NAME};
use pm_domain::saga::{TurnKind, WorkerOp};
use pm_domain::text::Label;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::commands::EVENT_POSITION;
use crate::error::ApiError;
use crate::extract::{parse_json, path_uuid, turn_fence, Ctx, RawBody, INVALID_TURN_FENCE};
use crate::state::AppState;

/// The body of `POST /v1/turns/claim` (every field optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimBody {
    /// Only this agent's turns.
    pub agent_id: Option<Uuid>,
    /// Only turns of agents acting for this actor.
    pub actor_id: Option<Uuid>,
    /// Only this conversation's turns.
    pub conversation_id: Option<Uuid>,
    /// Only turns of this kind.
    pub kind: Option<TurnKind>,
    /// How long to wait for a claimable turn, 0–30000 ms (default 0: answer at once).
    #[schema(maximum = 30000)]
    pub wait_ms: Option<u64>,
    /// The lease, 1000–600000 ms (default `PM_TURN_LEASE_MS`, 30000).
    #[schema(minimum = 1000, maximum = 600000)]
    pub lease_ms: Option<u64>,
    /// A name for operators, 1–200 characters (default: the caller's role).
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
    pub worker: Option<String>,
}

/// `200` of `POST /v1/turns/claim`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClaimAnswer {
    /// The claimed turn.
    pub turn: TurnView,
    /// The claim's epoch: send it as `PM-Turn-Epoch` with every command and report.
    pub turn_epoch: i64,
    /// When the lease ends unless renewed.
    #[serde(with = "pm_domain::time")]
    #[schema(value_type = String, format = DateTime)]
    pub lease_expires_at: DateTime<Utc>,
    /// The worker's name.
    pub worker: String,
    /// What the worker needs.
    pub context: ClaimContext,
    /// The turn's span (`invoke_agent`) in the W3C trace of what caused the turn — the
    /// ingress request of its message, say: send its `traceparent` (and `tracestate`)
    /// with the model calls and the reports of this claim, so they join that trace.
    /// Absent for a turn whose cause recorded no trace (written before traces were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_context: Option<TraceContext>,
}

/// The body of `POST /v1/turns/{id}/heartbeat` (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    /// The lease from now, 1000–600000 ms (default: `PM_TURN_LEASE_MS`).
    pub lease_ms: Option<u64>,
}

/// `200` of `POST /v1/turns/{id}/heartbeat`.
#[derive(Debug, Serialize, ToSchema)]
pub struct HeartbeatAnswer {
    /// The claim's epoch.
    pub turn_epoch: i64,
    /// The lease's new end.
    #[serde(with = "pm_domain::time")]
    #[schema(value_type = String, format = DateTime)]
    pub lease_expires_at: DateTime<Utc>,
}

/// The optional body `{"reason": …}` of the controls that record one:
/// `POST /v1/turns/{id}/release`, `…/interrupt`, `POST /v1/sessions/{id}/pause`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// Recorded in the rune (default `released`, or `operator` for an interrupt or a
    /// pause).
    #[schema(value_type = Option<String>, max_length = 1024)]
    pub reason: Option<Label>,
}

/// The body of `POST /v1/turns/{id}/error`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    /// `turn.error`'s `error_type` (e.g. `rate_limited`, `model_error`).
    #[schema(value_type = String, max_length = 1024)]
    pub error_type: Label,
    /// What went wrong.
    #[schema(value_type = String, max_length = 1024)]
    pub message: Label,
}

/// The body of `POST /v1/turns/{id}/usage`: added to the turn's totals.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageBody {
    /// Prompt tokens (≥ 0).
    pub input_tokens: u64,
    /// Completion tokens (≥ 0).
    pub output_tokens: u64,
}

pub(super) fn body_or_default<T: serde::de::DeserializeOwned + Default>(
    body: &[u8],
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        parse_json(body)
    }
}

pub(super) fn metadata(ctx: &Ctx, what: &str, state: &AppState) -> EventMetadata {
    ctx.saga_metadata("worker", what, state.sagas.clock().now())
}

fn lease(ms: Option<u64>, state: &AppState) -> Result<chrono::Duration, ApiError> {
    let ms = ms.unwrap_or(state.turn_lease_ms);
    if !LEASE_MS.contains(&ms) {
        return Err(ApiError::validation(
            "lease_ms",
            format!(
                "must be between {} and {}",
                LEASE_MS.start(),
                LEASE_MS.end()
            ),
        ));
    }
    Ok(chrono::Duration::milliseconds(ms as i64))
}

pub(super) fn with_position(mut response: Response, position: Option<LogPosition>) -> Response {
    if let Some(v) = position.and_then(|p| HeaderValue::from_str(&p.to_string()).ok()) {
        response.headers_mut().insert(EVENT_POSITION, v);
    }
    response
}

pub(super) fn refused(e: Refused, id: Uuid) -> ApiError {
    match e {
        Refused::TurnNotFound => ApiError::new(
            StatusCode::NOT_FOUND,
            "turn_not_found",
            format!("turn {id} does not exist"),
        ),
        Refused::ToolCallNotFound(call_id) => ApiError::new(
            StatusCode::NOT_FOUND,
            "tool_call_not_found",
            format!("turn {id} has no tool call {call_id}"),
        ),
        Refused::Conflict { code, detail } => ApiError::new(StatusCode::CONFLICT, code, detail),
        Refused::Forbidden { code, detail } => ApiError::new(StatusCode::FORBIDDEN, code, detail),
    }
}

/// The turn's row as the saga processor committed it.
pub(super) async fn turn_row(state: &AppState, id: Uuid) -> Result<TurnView, ApiError> {
    state
        .queries
        .sagas_unchecked()
        .turn(id)
        .await?
        .ok_or_else(|| ApiError::internal("the turn's row vanished"))
}

/// A report's turn, its claim's epoch and its body (`parse` reads the bytes).
pub(super) fn report_of<T>(
    headers: &HeaderMap,
    raw_id: &str,
    body: &[u8],
    parse: fn(&[u8]) -> Result<T, ApiError>,
) -> Result<(Uuid, i64, T), ApiError> {
    let id = path_uuid(raw_id, "turn_not_found", "turn")?;
    let turn_epoch = report_epoch(headers, id)?;
    Ok((id, turn_epoch, parse(body)?))
}

/// The claim of a report: `PM-Turn-Id` (the path's turn) and `PM-Turn-Epoch`.
fn report_epoch(headers: &HeaderMap, id: Uuid) -> Result<i64, ApiError> {
    let invalid = |detail: &str| ApiError::new(StatusCode::BAD_REQUEST, INVALID_TURN_FENCE, detail);
    let fence = turn_fence(headers)?
        .ok_or_else(|| invalid("a turn report needs PM-Turn-Id and PM-Turn-Epoch"))?;
    if fence.turn_id != id {
        return Err(invalid("PM-Turn-Id is not the turn of the path"));
    }
    Ok(fence.turn_epoch)
}

/// `POST /v1/turns/claim`: the oldest claimable turn matching the filters, leased to the
/// caller under a new epoch; `204` when none is claimable within `wait_ms`.
#[utoipa::path(post, path = "/v1/turns/claim", tag = "workers",
    request_body(content = Option<ClaimBody>, content_type = "application/json"),
    responses((status = 200, body = ClaimAnswer, description = "The claimed turn, its epoch, lease and context"),
              (status = 204, description = "Nothing claimable within `wait_ms`"),
              (status = 400, body = crate::error::Problem)))]
pub async fn claim(
    State(state): State<AppState>,
    ctx: Ctx,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let body: ClaimBody = body_or_default(&body)?;
    let wait_ms = body.wait_ms.unwrap_or(0);
    if wait_ms > MAX_CLAIM_WAIT_MS {
        return Err(ApiError::validation(
            "wait_ms",
            format!("must be between 0 and {MAX_CLAIM_WAIT_MS}"),
        ));
    }
    let worker = body.worker.unwrap_or_else(|| ctx.0.principal.clone());
    // NUL too: PostgreSQL's text cannot hold it (the claim would fail as a 500).
    if !is_short_text(&worker, MAX_WORKER_NAME) {
        return Err(ApiError::validation(
            "worker",
            format!("must be 1 to {MAX_WORKER_NAME} characters, without the NUL character"),
        ));
    }
    let request = ClaimRequest {
        filter: ClaimFilter {
            agent_id: body.agent_id,
            actor_id: body.actor_id,
            conversation_id: body.conversation_id,
            kind: body.kind,
            scope: ctx.0.scope.clone(),
        },
        wait: std::time::Duration::from_millis(wait_ms),
        lease: lease(body.lease_ms, &state)?,
        worker,
    };
    // A claim that may wait holds one of its principal's waiting claims while it does.
    let waiting = (wait_ms > 0)
        .then(|| state.waiting_claims.take(&ctx.0.principal))
        .transpose()?;
    let claimed = state
        .workers
        .claim(&request, &metadata(&ctx, "claim", &state))
        .await?;
    drop(waiting);
    let Some(claimed) = claimed else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let info = pm_domain::lookup::TurnInfo {
        actor_id: claimed.actor_id,
    };
    state.lookup.learn_turn(claimed.turn.id, info);
    let read = async {
        let (turn, trace) = tokio::try_join!(
            turn_row(&state, claimed.turn.id),
            turn_trace(&state, claimed.turn.id)
        )?;
        let context = claim_context(&state.queries, &turn, claimed.position).await?;
        Ok::<_, ApiError>((turn, context, trace))
    };
    let (turn, context, trace_context) = state
        .workers
        .answer_claim(&claimed, metadata(&ctx, "claim", &state), read)
        .await?;
    #[cfg(feature = "failpoints")]
    crate::failpoint::hit("abort_after_claim");
    let answer = ClaimAnswer {
        turn,
        turn_epoch: claimed.lease.turn_epoch,
        lease_expires_at: claimed.lease.lease_expires_at,
        worker: claimed.lease.worker,
        context,
        trace_context,
    };
    Ok(with_position(
        Json(answer).into_response(),
        claimed.position,
    ))
}

/// Turn `id`'s span in the trace of its cause, which its first rune recorded.
async fn turn_trace(state: &AppState, id: Uuid) -> Result<Option<TraceContext>, ApiError> {
    let cause = state
        .log
        .opening_trace(pm_domain::saga::TURN_TYPE, &id.to_string())
        .await?;
    Ok(cause.map(|cause| cause.of_turn(id)))
}

/// `POST /v1/turns/{id}/heartbeat`: the claim holds the turn `lease_ms` longer. Writes
/// no event.
#[utoipa::path(post, path = "/v1/turns/{id}/heartbeat", tag = "workers",
    params(("id" = Uuid, Path), ("PM-Turn-Id" = Uuid, Header), ("PM-Turn-Epoch" = i64, Header)),
    request_body(content = Option<HeartbeatBody>, content_type = "application/json"),
    responses((status = 200, body = HeartbeatAnswer, description = "The lease's new end"),
              (status = 400, body = crate::error::Problem), (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "The claim no longer holds the turn (`turn_fenced`)")))]
pub async fn heartbeat(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Json<HeartbeatAnswer>, ApiError> {
    let (id, turn_epoch, body): (_, _, HeartbeatBody) =
        report_of(&headers, &id, &body, body_or_default)?;
    let lease = lease(body.lease_ms, &state)?;
    let Some(until) = state.workers.heartbeat(id, turn_epoch, lease).await? else {
        // Refused: only now is the turn read, to say why.
        let turn = state.queries.sagas_unchecked().turn(id).await?;
        return Err(refused(heartbeat_refused(turn.as_ref(), turn_epoch), id));
    };
    Ok(Json(HeartbeatAnswer {
        turn_epoch,
        lease_expires_at: until,
    }))
}

/// Waits until the sagas have decided every event logged in turn `id`'s conversation
/// before this request ([`Workers::settle`](pm_application::workers::Workers::settle)); up
/// to 5 s, then `503 projection_lagging` (nothing written).
pub(crate) async fn settled(state: &AppState, id: Uuid) -> Result<(), ApiError> {
    Ok(state.workers.settle(&state.queries, id).await?)
}

/// Runs a report and answers the turn's row after it.
async fn report(
    state: &AppState,
    ctx: &Ctx,
    id: Uuid,
    op: WorkerOp,
    what: &str,
) -> Result<Response, ApiError> {
    settled(state, id).await?;
    let position = state
        .workers
        .report(id, op, metadata(ctx, what, state))
        .await?
        .map_err(|e| refused(e, id))?;
    let turn = turn_row(state, id).await?;
    Ok(with_position(Json(turn).into_response(), position))
}

/// `POST /v1/turns/{id}/release`: the worker gives the turn back (`turn.released`); it is
/// claimable again.
#[utoipa::path(post, path = "/v1/turns/{id}/release", tag = "workers",
    params(("id" = Uuid, Path), ("PM-Turn-Id" = Uuid, Header), ("PM-Turn-Epoch" = i64, Header)),
    request_body(content = Option<ReasonBody>, content_type = "application/json"),
    responses((status = 200, body = TurnView, description = "The turn"),
              (status = 400, body = crate::error::Problem), (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "`turn_fenced`")))]
pub async fn release(
    State(state): State<AppState>,
    ctx: Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let (id, turn_epoch, body): (_, _, ReasonBody) =
        report_of(&headers, &id, &body, body_or_default)?;
    let reason = body
        .reason
        .map_or_else(|| "released".to_string(), |r| r.as_str().to_string());
    let op = WorkerOp::Release { turn_epoch, reason };
    report(&state, &ctx, id, op, "release").await
}

/// `POST /v1/turns/{id}/error`: the turn ends in `turn.error` (ECHS `stream_error`),
/// counting toward the session's error threshold.
#[utoipa::path(post, path = "/v1/turns/{id}/error", tag = "workers",
    params(("id" = Uuid, Path), ("PM-Turn-Id" = Uuid, Header), ("PM-Turn-Epoch" = i64, Header)),
    request_body(content = ErrorBody, content_type = "application/json"),
    responses((status = 200, body = TurnView, description = "The turn, ended in error"),
              (status = 400, body = crate::error::Problem), (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "`turn_fenced`")))]
pub async fn error(
    State(state): State<AppState>,
    ctx: Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let (id, turn_epoch, body): (_, _, ErrorBody) = report_of(&headers, &id, &body, parse_json)?;
    let op = WorkerOp::Error {
        turn_epoch,
        error_type: body.error_type.as_str().to_string(),
        message: body.message.as_str().to_string(),
    };
    report(&state, &ctx, id, op, "error").await
}

/// `POST /v1/turns/{id}/usage`: tokens spent, added to the turn's totals
/// (`turn.usage_reported`).
#[utoipa::path(post, path = "/v1/turns/{id}/usage", tag = "workers",
    params(("id" = Uuid, Path), ("PM-Turn-Id" = Uuid, Header), ("PM-Turn-Epoch" = i64, Header)),
    request_body(content = UsageBody, content_type = "application/json"),
    responses((status = 200, body = TurnView, description = "The turn with its totals"),
              (status = 400, body = crate::error::Problem), (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "`turn_fenced`")))]
pub async fn usage(
    State(state): State<AppState>,
    ctx: Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let (id, turn_epoch, body): (_, _, UsageBody) = report_of(&headers, &id, &body, parse_json)?;
    let op = WorkerOp::Usage {
        turn_epoch,
        input_tokens: body.input_tokens,
        output_tokens: body.output_tokens,
    };
    report(&state, &ctx, id, op, "usage").await
}

/// `POST /v1/turns/{id}/interrupt` (admin): the running turn ends `interrupted`; when it
/// races a completion exactly one of them wins and the other is told (`409`).
#[utoipa::path(post, path = "/v1/turns/{id}/interrupt", tag = "workers",
    params(("id" = Uuid, Path)),
    request_body(content = Option<ReasonBody>, content_type = "application/json"),
    responses((status = 200, body = TurnView, description = "The interrupted turn"),
              (status = 400, body = crate::error::Problem), (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "The turn is not running, or a completion won (`turn_transition_not_allowed`)")))]
pub async fn interrupt(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let id = path_uuid(&id, "turn_not_found", "turn")?;
    let body: ReasonBody = body_or_default(&body)?;
    let reason = body
        .reason
        .map_or_else(|| "operator".to_string(), |r| r.as_str().to_string());
    report(
        &state,
        &ctx,
        id,
        WorkerOp::Interrupt { reason },
        "interrupt",
    )
    .await
}
