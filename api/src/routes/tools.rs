//! Tool calls (WORKERS.md "Tools"): a claimed turn reports a batch (fenced by its claim)
//! and suspends; approvers approve or deny each call, executors report its progress and
//! result (keyed by the turn and `call_id`, not fenced: they are not the worker); the reads
//! approvers and executors poll.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use pm_application::queries::{SagaReadStore, ToolCallFilter};
use pm_application::scope::Target;
use pm_application::views::{Page, ToolCallView};
use pm_domain::limits::{
    is_short_text, MAX_APPROVAL_COMMENT, MAX_CALL_ID, MAX_TOOL_CALLS, MAX_TOOL_PAYLOAD,
    MAX_TOOL_WAIT_MS,
};
use pm_domain::saga::{
    Decision, NewToolCall, ToolCallState, ToolOp, ToolStatus, ToolStream, WorkerOp,
};
use pm_domain::text::Label;
use pm_domain::tool_policy::{Decider, PolicyRules};
use pm_domain::types::ActorKind;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::queries::{page_request, uuid_param, ListParams};
use super::sagas::{sagas_at, state_param};
use super::workers::{body_or_default, metadata, refused, report_of, turn_row, with_position};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{parse_json, path_uuid, ApiQuery, Ctx, RawBody};
use crate::state::AppState;

/// One call of `POST /v1/turns/{id}/tool-calls`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallBody {
    /// The worker's id of the call, 1–200 characters, unique within the turn.
    #[schema(min_length = 1, max_length = 200)]
    pub call_id: String,
    /// The tool.
    #[schema(value_type = String, max_length = 1024)]
    pub tool_name: Label,
    /// Its arguments: any JSON, at most 64 KiB.
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
    /// Whether the worker asks a person to approve it before it runs (default false). The
    /// call's tool policy decides: `require_approval` and `deny` whatever this says;
    /// `allow` lets the worker ask for more care, never for less.
    #[serde(default)]
    pub requires_approval: bool,
    /// Why the worker asks a person (shown to approvers when its policy allows the call).
    #[schema(value_type = Option<String>, max_length = 1024)]
    pub policy_reason: Option<Label>,
    /// How long it may execute, 1–86400000 ms (default `PM_TOOL_TIMEOUT_SECS`).
    #[schema(minimum = 1, maximum = 86400000)]
    pub timeout_ms: Option<u64>,
}

/// The body of `POST /v1/turns/{id}/tool-calls`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallsBody {
    /// The batch, 1–64 calls, in the worker's order.
    pub calls: Vec<ToolCallBody>,
    /// L0 `resume_deadline`, 1–86400000 ms from now: every call still open then times out
    /// and the turn resumes.
    #[schema(minimum = 1, maximum = 86400000)]
    pub resume_deadline_ms: Option<u64>,
}

/// The optional body of `…/approve`. The approver is the signed-in principal: no body
/// names it.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    /// The `human` actor whose decision an ingress relays (a registered actor's id).
    pub on_behalf_of: Option<Uuid>,
    /// Why, at most 1,000 characters; recorded in `tool.approved`.
    #[schema(max_length = 1000)]
    pub comment: Option<String>,
}

/// The optional body of `…/deny`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyBody {
    /// Why (default `denied`); recorded in `tool.denied` and the call's result.
    #[schema(value_type = Option<String>, max_length = 1024)]
    pub reason: Option<Label>,
    /// The `human` actor whose decision an ingress relays (a registered actor's id).
    pub on_behalf_of: Option<Uuid>,
    /// A comment, at most 1,000 characters; recorded in `tool.denied`.
    #[schema(max_length = 1000)]
    pub comment: Option<String>,
}

/// The body of `…/progress`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgressBody {
    /// `stdout` or `stderr`.
    pub stream: ToolStream,
    /// A chunk of output, 1 byte to 64 KiB.
    pub chunk: String,
}

/// The body of `…/result`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultBody {
    /// `success`, `error` or `cancelled` (`timeout` and `denied` are the service's own).
    pub status: ToolStatus,
    /// The tool's answer: any JSON.
    #[schema(value_type = Option<Object>)]
    pub output: Option<serde_json::Value>,
    /// What went wrong, at most 64 KiB.
    pub error: Option<String>,
}

/// Filters of `GET /v1/tool-calls`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolCallParams {
    /// Calls in this state: approvers poll `awaiting_approval`, executors `executing`.
    #[param(value_type = Option<ToolCallState>)]
    pub state: Option<String>,
    /// Calls of this conversation's turns.
    #[param(value_type = Option<uuid::Uuid>)]
    pub conversation_id: Option<String>,
    /// Calls of this turn.
    #[param(value_type = Option<uuid::Uuid>)]
    pub turn_id: Option<String>,
}

fn too_long(field: &str, what: &str) -> ApiError {
    ApiError::validation(field, format!("must be at most {what}"))
}

/// The batch as the machines take it, each field checked (`422` naming it).
fn batch(body: ToolCallsBody) -> Result<(Vec<NewToolCall>, Option<chrono::Duration>), ApiError> {
    if body.calls.is_empty() || body.calls.len() > MAX_TOOL_CALLS {
        return Err(ApiError::validation(
            "calls",
            format!("must hold 1 to {MAX_TOOL_CALLS} calls"),
        ));
    }
    let wait = |field: &str, ms: Option<u64>| match ms {
        Some(ms) if ms == 0 || ms > MAX_TOOL_WAIT_MS => Err(ApiError::validation(
            field,
            format!("must be between 1 and {MAX_TOOL_WAIT_MS}"),
        )),
        _ => Ok(ms),
    };
    let mut calls: Vec<NewToolCall> = Vec::with_capacity(body.calls.len());
    for (i, call) in body.calls.into_iter().enumerate() {
        let field = |name: &str| format!("calls[{i}].{name}");
        let id = &call.call_id;
        if !is_short_text(id, MAX_CALL_ID) {
            return Err(ApiError::validation(
                &field("call_id"),
                format!("must be 1 to {MAX_CALL_ID} characters, not blank, without NUL"),
            ));
        }
        if calls.iter().any(|c| c.call_id == *id) {
            return Err(ApiError::validation(
                &field("call_id"),
                format!("{id} appears twice in the batch"),
            ));
        }
        if call.arguments.to_string().len() > MAX_TOOL_PAYLOAD {
            return Err(too_long(&field("arguments"), "64 KiB"));
        }
        calls.push(NewToolCall {
            call_id: call.call_id,
            tool_name: call.tool_name.into(),
            arguments: call.arguments,
            requires_approval: call.requires_approval,
            policy_reason: call.policy_reason.map(Into::into),
            timeout_ms: wait(&field("timeout_ms"), call.timeout_ms)?,
        });
    }
    let resume = wait("resume_deadline_ms", body.resume_deadline_ms)?
        .map(|ms| chrono::Duration::milliseconds(ms as i64));
    Ok((calls, resume))
}

/// `POST /v1/turns/{id}/tool-calls` (fenced): the turn waits for these calls
/// (`tool_executing`, the agent's head `suspended`) and the worker's lease ends. The same
/// batch again answers `200` and writes nothing.
#[utoipa::path(post, path = "/v1/turns/{id}/tool-calls", tag = "workers",
    params(("id" = Uuid, Path), ("PM-Turn-Id" = Uuid, Header), ("PM-Turn-Epoch" = i64, Header)),
    request_body(content = ToolCallsBody, content_type = "application/json"),
    responses((status = 201, body = pm_application::views::TurnView, description = "The suspended turn with its calls"),
              (status = 200, body = pm_application::views::TurnView, description = "The same batch again: nothing written"),
              (status = 400, body = crate::error::Problem), (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "`turn_fenced`, or `tool_call_exists` for a used `call_id`"),
              (status = 422, body = crate::error::Problem)))]
pub async fn report_calls(
    State(state): State<AppState>,
    ctx: Ctx,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let (id, turn_epoch, body): (_, _, ToolCallsBody) =
        report_of(&headers, &id, &body, parse_json)?;
    let (calls, resume_deadline) = batch(body)?;
    let rules = policy_rules(&state, id).await?;
    let op = WorkerOp::ToolCalls {
        turn_epoch,
        calls,
        resume_deadline,
        rules,
        reporter: ctx.0.principal.clone(),
    };
    super::workers::settled(&state, id).await?;
    let position = state
        .workers
        .report(id, op, metadata(&ctx, "tool_calls", &state))
        .await?
        .map_err(|e| refused(e, id))?;
    let turn = turn_row(&state, id).await?;
    let status = if position.is_some() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(with_position(
        (status, Json(turn)).into_response(),
        position,
    ))
}

/// What decides the calls of turn `id`: the policies in force now, its conversation's
/// organization and `PM_TOOL_DEFAULT_ACTION`.
async fn policy_rules(state: &AppState, id: Uuid) -> Result<PolicyRules, ApiError> {
    let organization = state
        .owners
        .organization(Target::Turn, id)
        .await?
        .ok_or_else(|| refused(pm_application::workers::Refused::TurnNotFound, id))?;
    Ok(PolicyRules {
        policies: state.policies.all().await?.into(),
        organization,
        default_action: state.tool_default_action,
    })
}

/// The signed-in principal's decision on a call, with what its body adds. Relaying a
/// person's decision speaks for them: the principal must be one that may speak as that
/// `human` actor (TRUST.md "Who a principal may speak for").
async fn decision(
    state: &AppState,
    ctx: &Ctx,
    caller: &Caller,
    on_behalf_of: Option<Uuid>,
    comment: Option<String>,
) -> Result<Decision, ApiError> {
    if let Some(comment) = &comment {
        if !is_short_text(comment, MAX_APPROVAL_COMMENT) {
            return Err(ApiError::validation(
                "comment",
                format!("must be 1 to {MAX_APPROVAL_COMMENT} characters, without NUL"),
            ));
        }
    }
    if let Some(actor) = on_behalf_of {
        // The commands' lookup: from the log (the read model may lag the actor's
        // registration), remembered.
        let kind = pm_domain::Lookup::actor_kind(&state.lookup, actor)
            .await
            .map_err(pm_domain::DomainError::from)?;
        let human = kind == Some(ActorKind::Human);
        if !human {
            return Err(ApiError::validation(
                "on_behalf_of",
                format!("{actor} is not a registered human actor"),
            ));
        }
        pm_application::speaker::may_speak_as(&ctx.0.voice, actor, ActorKind::Human, None)
            .map_err(pm_application::AppError::from)?;
    }
    let principal = caller.principal();
    Ok(Decision {
        by: Decider {
            name: principal.name().to_string(),
            roles: principal.roles().map(|r| r.as_str().to_string()).collect(),
            open_mode: principal.source() == crate::auth::Source::Open,
        },
        on_behalf_of,
        comment,
    })
}

/// The path's turn and call; an impossible `call_id` is a call that does not exist.
fn call_path(turn: &str, call_id: String) -> Result<(Uuid, String), ApiError> {
    let turn = path_uuid(turn, "turn_not_found", "turn")?;
    if call_id.is_empty() || call_id.chars().count() > MAX_CALL_ID {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "tool_call_not_found",
            format!("turn {turn} has no tool call {call_id}"),
        ));
    }
    Ok((turn, call_id))
}

/// Runs a request on one call and answers the call's row after it.
async fn on_call(
    state: &AppState,
    ctx: &Ctx,
    (turn, call_id): (Uuid, String),
    op: ToolOp,
    what: &str,
) -> Result<Response, ApiError> {
    let request = WorkerOp::Tool {
        call_id: call_id.clone(),
        op,
    };
    let position = state
        .workers
        .report(turn, request, metadata(ctx, what, state))
        .await?
        .map_err(|e| refused(e, turn))?;
    let row = turn_row(state, turn)
        .await?
        .tool_calls
        .into_iter()
        .find(|c| c.call_id == call_id)
        .ok_or_else(|| ApiError::internal("the tool call's row vanished"))?;
    Ok(with_position(Json(row).into_response(), position))
}

/// `POST /v1/turns/{turn_id}/tool-calls/{call_id}/approve` (admin, ingress relaying a
/// person's decision): `awaiting_approval → executing` (`tool.approved`).
#[utoipa::path(post, path = "/v1/turns/{turn_id}/tool-calls/{call_id}/approve", tag = "workers",
    params(("turn_id" = Uuid, Path), ("call_id" = String, Path)),
    request_body(content = Option<ApproveBody>, content_type = "application/json"),
    responses((status = 200, body = ToolCallView, description = "The call, executing"),
              (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "`tool_call_not_awaiting_approval`"),
              (status = 422, body = crate::error::Problem)))]
pub async fn approve(
    State(state): State<AppState>,
    ctx: Ctx,
    caller: Caller,
    Path((turn, call_id)): Path<(String, String)>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let path = call_path(&turn, call_id)?;
    let body: ApproveBody = body_or_default(&body)?;
    let decision = decision(&state, &ctx, &caller, body.on_behalf_of, body.comment).await?;
    on_call(&state, &ctx, path, ToolOp::Approve { decision }, "approve").await
}

/// `POST /v1/turns/{turn_id}/tool-calls/{call_id}/deny` (admin, ingress): `tool.denied`,
/// then the call's result `denied`.
#[utoipa::path(post, path = "/v1/turns/{turn_id}/tool-calls/{call_id}/deny", tag = "workers",
    params(("turn_id" = Uuid, Path), ("call_id" = String, Path)),
    request_body(content = Option<DenyBody>, content_type = "application/json"),
    responses((status = 200, body = ToolCallView, description = "The call, denied"),
              (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "`tool_call_not_awaiting_approval`"),
              (status = 422, body = crate::error::Problem)))]
pub async fn deny(
    State(state): State<AppState>,
    ctx: Ctx,
    caller: Caller,
    Path((turn, call_id)): Path<(String, String)>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let path = call_path(&turn, call_id)?;
    let body: DenyBody = body_or_default(&body)?;
    let reason = body.reason.map_or_else(|| "denied".to_string(), Into::into);
    let decision = decision(&state, &ctx, &caller, body.on_behalf_of, body.comment).await?;
    on_call(
        &state,
        &ctx,
        path,
        ToolOp::Deny { reason, decision },
        "deny",
    )
    .await
}

/// `POST /v1/turns/{turn_id}/tool-calls/{call_id}/progress` (llm, admin): a chunk of an
/// executing call's output (`tool.progress`).
#[utoipa::path(post, path = "/v1/turns/{turn_id}/tool-calls/{call_id}/progress", tag = "workers",
    params(("turn_id" = Uuid, Path), ("call_id" = String, Path)),
    request_body(content = ProgressBody, content_type = "application/json"),
    responses((status = 200, body = ToolCallView, description = "The call"),
              (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "`tool_call_not_executing` (approval comes first) or `tool_call_terminal`"),
              (status = 422, body = crate::error::Problem)))]
pub async fn progress(
    State(state): State<AppState>,
    ctx: Ctx,
    Path((turn, call_id)): Path<(String, String)>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let path = call_path(&turn, call_id)?;
    let body: ProgressBody = parse_json(&body)?;
    if body.chunk.is_empty() || body.chunk.contains('\0') {
        return Err(ApiError::validation(
            "chunk",
            "must not be empty or hold NUL",
        ));
    }
    if body.chunk.len() > MAX_TOOL_PAYLOAD {
        return Err(too_long("chunk", "64 KiB"));
    }
    let op = ToolOp::Progress {
        stream: body.stream,
        chunk: body.chunk,
    };
    on_call(&state, &ctx, path, op, "progress").await
}

/// `POST /v1/turns/{turn_id}/tool-calls/{call_id}/result` (llm, admin): the executing
/// call's one result; the same result again only acknowledges. The last result of the
/// batch resumes the turn (`turn.tools_finished`): it is claimable again.
#[utoipa::path(post, path = "/v1/turns/{turn_id}/tool-calls/{call_id}/result", tag = "workers",
    params(("turn_id" = Uuid, Path), ("call_id" = String, Path)),
    request_body(content = ResultBody, content_type = "application/json"),
    responses((status = 200, body = ToolCallView, description = "The call with its result"),
              (status = 404, body = crate::error::Problem),
              (status = 409, body = crate::error::Problem, description = "`tool_call_not_executing` (approval comes first) or `tool_call_terminal` (another result came first)"),
              (status = 422, body = crate::error::Problem)))]
pub async fn result(
    State(state): State<AppState>,
    ctx: Ctx,
    Path((turn, call_id)): Path<(String, String)>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let path = call_path(&turn, call_id)?;
    let body: ResultBody = parse_json(&body)?;
    if matches!(body.status, ToolStatus::Timeout | ToolStatus::Denied) {
        return Err(ApiError::validation(
            "status",
            "must be success, error or cancelled (timeout and denied are the service's)",
        ));
    }
    if let Some(error) = &body.error {
        if error.len() > MAX_TOOL_PAYLOAD || error.contains('\0') {
            return Err(too_long("error", "64 KiB, without NUL"));
        }
    }
    let op = ToolOp::Result {
        status: body.status,
        output: body.output,
        error: body.error,
    };
    on_call(&state, &ctx, path, op, "result").await
}

/// `GET /v1/turns/{turn_id}/tool-calls/{call_id}`: one call.
#[utoipa::path(get, path = "/v1/turns/{turn_id}/tool-calls/{call_id}", tag = "workers",
    params(("turn_id" = Uuid, Path), ("call_id" = String, Path), ListParams),
    responses((status = 200, body = ToolCallView, description = "The call"),
              (status = 404, body = crate::error::Problem)))]
pub async fn call(
    State(state): State<AppState>,
    Path((turn, call_id)): Path<(String, String)>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<ToolCallView>, ApiError> {
    let (turn, call_id) = call_path(&turn, call_id)?;
    let reads = sagas_at(&state, &p.min_position).await?;
    let found = reads.turn(turn).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "turn_not_found",
            format!("turn {turn} does not exist"),
        )
    })?;
    found
        .tool_calls
        .into_iter()
        .find(|c| c.call_id == call_id)
        .map(Json)
        .ok_or_else(|| {
            refused(
                pm_application::workers::Refused::ToolCallNotFound(call_id),
                turn,
            )
        })
}

/// `GET /v1/tool-calls`: calls oldest first; approvers poll `state=awaiting_approval`,
/// executors `state=executing`.
#[utoipa::path(get, path = "/v1/tool-calls", tag = "workers", params(ToolCallParams, ListParams),
    responses((status = 200, body = Page<ToolCallView>, description = "A page of tool calls, oldest first"),
              (status = 400, body = crate::error::Problem)))]
pub async fn tool_calls(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(f): ApiQuery<ToolCallParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<ToolCallView>>, ApiError> {
    let page = page_request(&p, pm_application::views::List::ToolCalls)?;
    let all: Vec<&str> = ToolCallState::ALL
        .iter()
        .filter(|s| **s != ToolCallState::PendingCall)
        .map(|s| s.as_str())
        .collect();
    let filter = ToolCallFilter {
        state: state_param(&f.state, ToolCallState::parse, &all)?,
        conversation_id: uuid_param("conversation_id", &f.conversation_id)?,
        turn_id: uuid_param("turn_id", &f.turn_id)?,
    };
    let reads = sagas_at(&state, &p.min_position).await?;
    Ok(Json(
        reads.tool_calls(caller.scope(), &filter, &page).await?,
    ))
}
