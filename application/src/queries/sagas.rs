//! The saga read side's port ([`SagaReadStore`]) and its filters.

use std::future::Future;

use pm_domain::saga::{AgentState, ConversationState, SessionState, ToolCallState, TurnState};
use uuid::Uuid;

use crate::scope::Scope;
use crate::views::{
    AgentView, AnomalyView, Page, PageRequest, SessionView, ToolCallView, TurnView,
};
use crate::AppError;

/// Filters of `GET /v1/sessions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// Sessions in this lifecycle state.
    pub state: Option<SessionState>,
    /// Sessions whose conversation is in this FCMP state (`waiting_user`: waiting for a
    /// person).
    pub conversation_state: Option<ConversationState>,
}

/// Filters of `GET /v1/agents`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentFilter {
    /// Agents of this conversation.
    pub conversation_id: Option<Uuid>,
    /// Agents acting for this actor.
    pub actor_id: Option<Uuid>,
    /// Agents in this state.
    pub state: Option<AgentState>,
}

/// Filters of `GET /v1/turns`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnFilter {
    /// Turns of this conversation.
    pub conversation_id: Option<Uuid>,
    /// Turns of this agent.
    pub agent_id: Option<Uuid>,
    /// Turns working this task.
    pub task_id: Option<Uuid>,
    /// Turns in this state.
    pub state: Option<TurnState>,
}

/// Filters of `GET /v1/tool-calls`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallFilter {
    /// Calls in this state (approvers: `awaiting_approval`; executors: `executing`).
    pub state: Option<ToolCallState>,
    /// Calls of this conversation's turns.
    pub conversation_id: Option<Uuid>,
    /// Calls of this turn.
    pub turn_id: Option<Uuid>,
}

/// Filters of `GET /v1/anomalies`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnomalyFilter {
    /// Anomalies of this conversation.
    pub conversation_id: Option<Uuid>,
}

/// Read access to the saga rows. Lists take the caller's [`Scope`]; one row is read by
/// id once the HTTP layer has checked the caller may see it.
///
/// # Errors
/// Every method fails with [`AppError::Unavailable`] when the store cannot be read.
pub trait SagaReadStore: Send + Sync + 'static {
    /// A conversation's session.
    fn session(
        &self,
        conversation_id: Uuid,
    ) -> impl Future<Output = Result<Option<SessionView>, AppError>> + Send;
    /// Sessions matching `filter`, oldest first.
    fn sessions(
        &self,
        scope: &Scope,
        filter: &SessionFilter,
        page: &PageRequest,
    ) -> impl Future<Output = Result<Page<SessionView>, AppError>> + Send;
    /// Agents matching `filter`, oldest first.
    fn agents(
        &self,
        scope: &Scope,
        filter: &AgentFilter,
        page: &PageRequest,
    ) -> impl Future<Output = Result<Page<AgentView>, AppError>> + Send;
    /// One agent.
    fn agent(&self, id: Uuid) -> impl Future<Output = Result<Option<AgentView>, AppError>> + Send;
    /// Turns matching `filter`, oldest first.
    fn turns(
        &self,
        scope: &Scope,
        filter: &TurnFilter,
        page: &PageRequest,
    ) -> impl Future<Output = Result<Page<TurnView>, AppError>> + Send;
    /// One turn, with its tool calls.
    fn turn(&self, id: Uuid) -> impl Future<Output = Result<Option<TurnView>, AppError>> + Send;
    /// Tool calls matching `filter`, oldest first.
    fn tool_calls(
        &self,
        scope: &Scope,
        filter: &ToolCallFilter,
        page: &PageRequest,
    ) -> impl Future<Output = Result<Page<ToolCallView>, AppError>> + Send;
    /// Anomalies matching `filter`, oldest first.
    fn anomalies(
        &self,
        scope: &Scope,
        filter: &AnomalyFilter,
        page: &PageRequest,
    ) -> impl Future<Output = Result<Page<AnomalyView>, AppError>> + Send;
}
