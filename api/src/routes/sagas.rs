//! The sagas' endpoints: sessions, agents, turns and anomalies as the saga processor keeps
//! them (with keyset pagination and `?min_position=` like the read model's), and the
//! operators' controls — pause, resume, archive a session, kill an agent — which answer
//! `409` with a stable code when the machine has no edge for them.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use pm_application::bus::EventMetadata;
use pm_application::log::LogPosition;
use pm_application::queries::{
    AgentFilter, AnomalyFilter, SagaReadStore, SessionFilter, TurnFilter,
};
use pm_application::sagas::ControlTarget;
use pm_application::views::{AgentView, AnomalyView, List, Page, SessionView, TurnView};
use pm_domain::saga::{
    AgentState, Control, ControlError, ConversationState, SessionState, TurnState,
};
use pm_infrastructure::sagas::SagaReads;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::commands::EVENT_POSITION;
use super::queries::{page_request, uuid_param, ListParams};
use super::workers::ReasonBody;
use crate::auth::Caller;
use crate::error::{invalid_position, ApiError};
use crate::extract::{parse_json, path_uuid, ApiQuery, Ctx, RawBody};
use crate::state::AppState;

/// Filters of `GET /v1/sessions`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionParams {
    /// Sessions in this lifecycle state.
    #[param(value_type = Option<SessionState>)]
    pub state: Option<String>,
    /// Sessions whose conversation is in this FCMP state (`waiting_user`: a person owes a
    /// reply).
    #[param(value_type = Option<ConversationState>)]
    pub conversation_state: Option<String>,
}

/// Filters of `GET /v1/agents`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AgentParams {
    /// Agents of this conversation.
    #[param(value_type = Option<uuid::Uuid>)]
    pub conversation_id: Option<String>,
    /// Agents acting for this actor.
    #[param(value_type = Option<uuid::Uuid>)]
    pub actor_id: Option<String>,
    /// Agents in this state.
    #[param(value_type = Option<AgentState>)]
    pub state: Option<String>,
}

/// Filters of `GET /v1/turns`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TurnParams {
    /// Turns of this conversation.
    #[param(value_type = Option<uuid::Uuid>)]
    pub conversation_id: Option<String>,
    /// Turns of this agent.
    #[param(value_type = Option<uuid::Uuid>)]
    pub agent_id: Option<String>,
    /// Turns working this task.
    #[param(value_type = Option<uuid::Uuid>)]
    pub task_id: Option<String>,
    /// Turns in this state.
    #[param(value_type = Option<TurnState>)]
    pub state: Option<String>,
}

/// Filters of `GET /v1/anomalies`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AnomalyParams {
    /// Anomalies of this conversation.
    #[param(value_type = Option<uuid::Uuid>)]
    pub conversation_id: Option<String>,
}

/// The saga rows, once the saga processor has processed `min_position` (up to 5 s).
pub(super) async fn sagas_at<'s>(
    state: &'s AppState,
    min_position: &Option<String>,
) -> Result<&'s SagaReads, ApiError> {
    let wanted = min_position
        .as_deref()
        .map(|raw| {
            raw.parse::<LogPosition>()
                .map_err(|e| invalid_position("min_position", e))
        })
        .transpose()?;
    Ok(state.queries.sagas_at(wanted).await?)
}

fn not_found<T>(value: Option<T>, code: &'static str, what: &str, id: Uuid) -> Result<T, ApiError> {
    value.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            code,
            format!("{what} {id} does not exist"),
        )
    })
}

pub(super) fn state_param<T>(
    raw: &Option<String>,
    parse: fn(&str) -> Option<T>,
    all: &[&str],
) -> Result<Option<T>, ApiError> {
    enum_param("state", raw, parse, all)
}

/// An enumerated query parameter `name`: `400 invalid_parameter` listing the values.
fn enum_param<T>(
    name: &str,
    raw: &Option<String>,
    parse: fn(&str) -> Option<T>,
    all: &[&str],
) -> Result<Option<T>, ApiError> {
    raw.as_deref()
        .map(|s| {
            parse(s).ok_or_else(|| {
                ApiError::parameter(name, format!("must be one of {}", all.join(", ")))
            })
        })
        .transpose()
}

/// An operator's control names no turn (it is not fenced).
fn metadata(ctx: &Ctx, control: &str, recorded_at: chrono::DateTime<chrono::Utc>) -> EventMetadata {
    EventMetadata {
        turn: None,
        ..ctx.saga_metadata("control", control, recorded_at)
    }
}

/// Runs a control and answers `body` (read after it) with the position of its last rune.
async fn run_control<T: serde::Serialize>(
    state: &AppState,
    ctx: &Ctx,
    target: ControlTarget,
    control: Control,
    name: &str,
    read: impl AsyncFnOnce(&SagaReads) -> Result<Option<T>, ApiError>,
) -> Result<Response, ApiError> {
    let now = state.sagas.clock().now();
    let done = state
        .sagas
        .control(target, control, metadata(ctx, name, now))
        .await?;
    let (_, position) = done.map_err(|e| match e {
        ControlError::SessionNotFound => {
            let id = match target {
                ControlTarget::Session(id) | ControlTarget::Agent(id) => id,
            };
            ApiError::new(
                StatusCode::NOT_FOUND,
                "session_not_found",
                format!("session {id} does not exist"),
            )
        }
        ControlError::AgentNotFound => {
            let id = match target {
                ControlTarget::Session(id) | ControlTarget::Agent(id) => id,
            };
            ApiError::new(
                StatusCode::NOT_FOUND,
                "agent_not_found",
                format!("agent {id} does not exist"),
            )
        }
        ControlError::NotAllowed { code, detail } => {
            ApiError::new(StatusCode::CONFLICT, code, detail)
        }
        ControlError::Forbidden { code, detail } => {
            ApiError::new(StatusCode::FORBIDDEN, code, detail)
        }
        ControlError::TurnNotFound | ControlError::ToolCallNotFound(_) => {
            ApiError::internal("a control named no turn or tool call")
        }
    })?;
    let body = read(state.queries.sagas_unchecked())
        .await?
        .ok_or_else(|| ApiError::internal("the controlled row vanished"))?;
    let mut response = Json(body).into_response();
    if let Some(p) = position {
        if let Ok(v) = HeaderValue::from_str(&p.to_string()) {
            response.headers_mut().insert(EVENT_POSITION, v);
        }
    }
    Ok(response)
}

/// `GET /v1/sessions/{conversation_id}`.
#[utoipa::path(get, path = "/v1/sessions/{conversation_id}", tag = "sagas",
    params(("conversation_id" = Uuid, Path), ListParams),
    responses((status = 200, body = SessionView, description = "The conversation's session"),
              (status = 404, body = crate::error::Problem)))]
pub async fn session(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<SessionView>, ApiError> {
    let id = path_uuid(&id, "session_not_found", "session")?;
    let reads = sagas_at(&state, &p.min_position).await?;
    not_found(reads.session(id).await?, "session_not_found", "session", id).map(Json)
}

/// `GET /v1/sessions`: the operators' overview (which wait for a user, which are
/// suspended and why).
#[utoipa::path(get, path = "/v1/sessions", tag = "sagas", params(SessionParams, ListParams),
    responses((status = 200, body = Page<SessionView>, description = "A page of sessions, oldest first"),
              (status = 400, body = crate::error::Problem)))]
pub async fn sessions(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(f): ApiQuery<SessionParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<SessionView>>, ApiError> {
    let page = page_request(&p, List::Sessions)?;
    let states: Vec<&str> = SessionState::ALL.iter().map(|s| s.as_str()).collect();
    let conversation_states: Vec<&str> =
        ConversationState::ALL.iter().map(|s| s.as_str()).collect();
    let filter = SessionFilter {
        state: state_param(&f.state, SessionState::parse, &states)?,
        conversation_state: enum_param(
            "conversation_state",
            &f.conversation_state,
            ConversationState::parse,
            &conversation_states,
        )?,
    };
    let reads = sagas_at(&state, &p.min_position).await?;
    Ok(Json(reads.sessions(caller.scope(), &filter, &page).await?))
}

/// `GET /v1/agents`.
#[utoipa::path(get, path = "/v1/agents", tag = "sagas", params(AgentParams, ListParams),
    responses((status = 200, body = Page<AgentView>, description = "A page of agents, oldest first"),
              (status = 400, body = crate::error::Problem)))]
pub async fn agents(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(f): ApiQuery<AgentParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<AgentView>>, ApiError> {
    let page = page_request(&p, List::Agents)?;
    let all: Vec<&str> = AgentState::ALL.iter().map(|s| s.as_str()).collect();
    let filter = AgentFilter {
        conversation_id: uuid_param("conversation_id", &f.conversation_id)?,
        actor_id: uuid_param("actor_id", &f.actor_id)?,
        state: state_param(&f.state, AgentState::parse, &all)?,
    };
    let reads = sagas_at(&state, &p.min_position).await?;
    Ok(Json(reads.agents(caller.scope(), &filter, &page).await?))
}

/// `GET /v1/agents/{id}`.
#[utoipa::path(get, path = "/v1/agents/{id}", tag = "sagas", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = AgentView, description = "The agent"),
              (status = 404, body = crate::error::Problem)))]
pub async fn agent(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<AgentView>, ApiError> {
    let id = path_uuid(&id, "agent_not_found", "agent")?;
    let reads = sagas_at(&state, &p.min_position).await?;
    not_found(reads.agent(id).await?, "agent_not_found", "agent", id).map(Json)
}

/// `GET /v1/turns`.
#[utoipa::path(get, path = "/v1/turns", tag = "sagas", params(TurnParams, ListParams),
    responses((status = 200, body = Page<TurnView>, description = "A page of turns, oldest first"),
              (status = 400, body = crate::error::Problem)))]
pub async fn turns(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(f): ApiQuery<TurnParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<TurnView>>, ApiError> {
    let page = page_request(&p, List::Turns)?;
    let all: Vec<&str> = TurnState::ALL.iter().map(|s| s.as_str()).collect();
    let filter = TurnFilter {
        conversation_id: uuid_param("conversation_id", &f.conversation_id)?,
        agent_id: uuid_param("agent_id", &f.agent_id)?,
        task_id: uuid_param("task_id", &f.task_id)?,
        state: state_param(&f.state, TurnState::parse, &all)?,
    };
    let reads = sagas_at(&state, &p.min_position).await?;
    Ok(Json(reads.turns(caller.scope(), &filter, &page).await?))
}

/// `GET /v1/turns/{id}`.
#[utoipa::path(get, path = "/v1/turns/{id}", tag = "sagas", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = TurnView, description = "The turn"),
              (status = 404, body = crate::error::Problem)))]
pub async fn turn(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<TurnView>, ApiError> {
    let id = path_uuid(&id, "turn_not_found", "turn")?;
    let reads = sagas_at(&state, &p.min_position).await?;
    not_found(reads.turn(id).await?, "turn_not_found", "turn", id).map(Json)
}

/// `GET /v1/anomalies`.
#[utoipa::path(get, path = "/v1/anomalies", tag = "sagas", params(AnomalyParams, ListParams),
    responses((status = 200, body = Page<AnomalyView>, description = "Inputs the sagas had no edge for, oldest first"),
              (status = 400, body = crate::error::Problem)))]
pub async fn anomalies(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(f): ApiQuery<AnomalyParams>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> Result<Json<Page<AnomalyView>>, ApiError> {
    let page = page_request(&p, List::Anomalies)?;
    let filter = AnomalyFilter {
        conversation_id: uuid_param("conversation_id", &f.conversation_id)?,
    };
    let reads = sagas_at(&state, &p.min_position).await?;
    Ok(Json(reads.anomalies(caller.scope(), &filter, &page).await?))
}

/// A session control's id and answer.
async fn session_control(
    state: &AppState,
    ctx: &Ctx,
    raw_id: &str,
    control: Control,
    name: &str,
) -> Result<Response, ApiError> {
    let id = path_uuid(raw_id, "session_not_found", "session")?;
    run_control(
        state,
        ctx,
        ControlTarget::Session(id),
        control,
        name,
        async |r| Ok(r.session(id).await?),
    )
    .await
}

/// `POST /v1/sessions/{conversation_id}/pause`: `active → paused` (no turn is dispatched
/// while paused). Body optional: `{"reason": "…"}`.
#[utoipa::path(post, path = "/v1/sessions/{conversation_id}/pause", tag = "sagas",
    params(("conversation_id" = Uuid, Path)), request_body(content = Option<ReasonBody>, content_type = "application/json"),
    responses((status = 200, body = SessionView, description = "The paused session"),
              (status = 404, body = crate::error::Problem), (status = 409, body = crate::error::Problem,
               description = "The session is not active (`session_transition_not_allowed`).")))]
pub async fn pause(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let body: ReasonBody = if body.iter().all(u8::is_ascii_whitespace) {
        ReasonBody::default()
    } else {
        parse_json(&body)?
    };
    let reason = body
        .reason
        .map_or_else(|| "operator".to_string(), |r| r.as_str().to_string());
    session_control(&state, &ctx, &id, Control::Pause { reason }, "pause").await
}

/// `POST /v1/sessions/{conversation_id}/resume`: `paused | suspended → active`; queued
/// turns are dispatched.
#[utoipa::path(post, path = "/v1/sessions/{conversation_id}/resume", tag = "sagas",
    params(("conversation_id" = Uuid, Path)),
    responses((status = 200, body = SessionView, description = "The resumed session"),
              (status = 404, body = crate::error::Problem), (status = 409, body = crate::error::Problem,
               description = "The session is neither paused nor suspended (`session_transition_not_allowed`).")))]
pub async fn resume(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    session_control(&state, &ctx, &id, Control::Resume, "resume").await
}

/// The body of `POST /v1/sessions/{id}/budget`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetBody {
    /// Tokens to add to the session's budget (> 0).
    #[schema(minimum = 1)]
    pub add_tokens: u64,
}

/// `POST /v1/sessions/{conversation_id}/budget`: more tokens for the session
/// (`session.budget_added`); a budget suspension they cover is lifted
/// (`session.unsuspended`) and its queued turns are dispatched.
#[utoipa::path(post, path = "/v1/sessions/{conversation_id}/budget", tag = "sagas",
    params(("conversation_id" = Uuid, Path)), request_body(content = BudgetBody, content_type = "application/json"),
    responses((status = 200, body = SessionView, description = "The session with its new budget"),
              (status = 404, body = crate::error::Problem), (status = 409, body = crate::error::Problem,
               description = "The session is not open, or has no token budget (`session_transition_not_allowed`)."),
              (status = 422, body = crate::error::Problem)))]
pub async fn budget(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let body: BudgetBody = parse_json(&body)?;
    if body.add_tokens == 0 {
        return Err(ApiError::validation("add_tokens", "must be greater than 0"));
    }
    let control = Control::AddBudget {
        add_tokens: body.add_tokens,
    };
    session_control(&state, &ctx, &id, control, "budget").await
}

/// `POST /v1/sessions/{conversation_id}/archive`: `closed → archived`.
#[utoipa::path(post, path = "/v1/sessions/{conversation_id}/archive", tag = "sagas",
    params(("conversation_id" = Uuid, Path)),
    responses((status = 200, body = SessionView, description = "The archived session"),
              (status = 404, body = crate::error::Problem), (status = 409, body = crate::error::Problem,
               description = "The session is not closed (`session_transition_not_allowed`).")))]
pub async fn archive(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    session_control(&state, &ctx, &id, Control::Archive, "archive").await
}

/// `POST /v1/agents/{id}/kill`: `idle | running_turn → terminated` (its running turn is
/// interrupted, its queued turns with it).
#[utoipa::path(post, path = "/v1/agents/{id}/kill", tag = "sagas", params(("id" = Uuid, Path)),
    responses((status = 200, body = AgentView, description = "The terminated agent"),
              (status = 404, body = crate::error::Problem), (status = 409, body = crate::error::Problem,
               description = "The agent is already terminated or failed (`agent_transition_not_allowed`).")))]
pub async fn kill(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = path_uuid(&id, "agent_not_found", "agent")?;
    run_control(
        &state,
        &ctx,
        ControlTarget::Agent(id),
        Control::Kill { agent_id: id },
        "kill",
        async |r| Ok(r.agent(id).await?),
    )
    .await
}
