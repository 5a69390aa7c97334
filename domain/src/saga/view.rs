//! The saga rows as every reader sees them: `GET /v1/sessions/{id}`, `/v1/agents`,
//! `/v1/turns`, `/v1/tool-calls` (API.md, WORKERS.md), the SSE snapshot, and the rows of
//! the saga tables (`saga_sessions`, `saga_agents`, `saga_turns`, `saga_tool_calls`),
//! which are written from them. One type per row, so the machines, the tables and the
//! wire cannot drift apart.
//!
//! Times are the log's: the time of the rune that created and last changed a row. The
//! machines do not keep them, so [`Sagas`](super::Sagas) builds a row *as of* a rune's
//! time (see [`build`]); the tables keep the first `created_at` (and `waiting_since` while
//! the session still waits) when a row is written again.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::types::{
    AgentRole, AgentState, ConversationState, HeadStatus, SessionState, ToolCallState, ToolStatus,
    TurnKind, TurnState,
};
use super::{Lease, TurnInput};

mod build;

/// `GET /v1/sessions/{conversation_id}`: a conversation's session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionView {
    /// The conversation (the session's id).
    pub conversation_id: Uuid,
    /// The session lifecycle state.
    pub state: SessionState,
    /// The FCMP conversation state; null before the first human message or decision.
    pub conversation_state: Option<ConversationState>,
    /// The root agent.
    pub root_agent_id: Option<Uuid>,
    /// Every agent of the session, by id.
    pub agent_ids: Vec<Uuid>,
    /// The `NEED_INFORMATION` checkpoint the session waits on (while `waiting_user`).
    pub waiting_checkpoint_id: Option<Uuid>,
    /// Since when it waits for the user; null when it does not.
    #[serde(with = "crate::time::opt")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DateTime<Utc>>))]
    pub waiting_since: Option<DateTime<Utc>>,
    /// Consecutive turn errors (the session suspends at `PM_SESSION_ERROR_THRESHOLD`).
    pub consecutive_errors: u32,
    /// Tokens its turns' workers reported (`POST /v1/turns/{id}/usage`), summed.
    pub tokens_used: u64,
    /// Its token budget (`PM_SESSION_TOKEN_BUDGET` at creation, plus what operators
    /// added); null: unlimited. Reaching it suspends the session (`budget_exhausted`).
    pub token_budget: Option<u64>,
    /// When the session was created (log time of `session.created`).
    #[serde(with = "crate::time")]
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    #[serde(with = "crate::time")]
    pub updated_at: DateTime<Utc>,
}

/// An agent (`GET /v1/agents`, `GET /v1/agents/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentView {
    /// The agent.
    pub id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// The actor it acts for (null for a root agent without an `ai` actor).
    pub actor_id: Option<Uuid>,
    /// `root` or `worker`.
    pub role: AgentRole,
    /// Its state.
    pub state: AgentState,
    /// The epoch of its last turn lease.
    pub turn_epoch: i64,
    /// The turn it runs; null when idle.
    pub active_turn_id: Option<Uuid>,
    /// The L0 head: `idle`, `dispatched` (its turn waits for a worker), `running`
    /// (streaming) or `suspended` (its turn waits for tool results).
    pub head_status: HeadStatus,
    /// Its inbox, oldest first.
    pub queued_turn_ids: Vec<Uuid>,
    /// Tokens its turns' workers reported, summed.
    pub tokens_used: u64,
    /// When it was spawned.
    #[serde(with = "crate::time")]
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    #[serde(with = "crate::time")]
    pub updated_at: DateTime<Utc>,
}

/// A turn (`GET /v1/turns`, `GET /v1/turns/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnView {
    /// The turn.
    pub id: Uuid,
    /// Its agent.
    pub agent_id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// `conversation` or `task`.
    pub kind: TurnKind,
    /// The task of a task turn.
    pub task_id: Option<Uuid>,
    /// What it was enqueued to do: `{kind: message, message_id}` (answer a human
    /// message), `{kind: auto_decide, checkpoint_id}` (decide without the user's reply),
    /// `{kind: task, task_id}`, `{kind: task_retry | task_resume, task_id,
    /// task_checkpoint_id}`.
    pub input: TurnInput,
    /// Its state.
    pub state: TurnState,
    /// The epoch of its lease; null while queued.
    pub turn_epoch: Option<i64>,
    /// The name of its terminal rune (`turn.completed`, `turn.interrupted`, `turn.error`).
    pub terminal_rune: Option<String>,
    /// The last message the turn produced (L0 delivery contract); null with a reason.
    pub deliverable: Option<Uuid>,
    /// Why the deliverable is what it is (`no_message`, `watchdog`, `steer`, …).
    pub deliverable_reason: Option<String>,
    /// The worker's claim holding the turn (WORKERS.md); null when none does.
    pub lease: Option<Lease>,
    /// How many times workers claimed it.
    pub claims: u32,
    /// Prompt tokens its workers reported (`POST /v1/turns/{id}/usage`), summed.
    pub input_tokens: u64,
    /// Completion tokens its workers reported, summed.
    pub output_tokens: u64,
    /// Its tool calls (WORKERS.md "Tools") with their results, in the order it reported
    /// them. (Read as empty from a service that predates tools.)
    #[serde(default)]
    pub tool_calls: Vec<ToolCallView>,
    /// When it was queued.
    #[serde(with = "crate::time")]
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    #[serde(with = "crate::time")]
    pub updated_at: DateTime<Utc>,
}

/// A tool call a worker reported on a turn (`GET /v1/tool-calls`, a turn's `tool_calls`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCallView {
    /// The worker's id of the call, unique within its turn: the `{call_id}` of
    /// `/v1/turns/{turn_id}/tool-calls/{call_id}/…`.
    pub call_id: String,
    /// Its turn.
    pub turn_id: Uuid,
    /// The turn's conversation.
    pub conversation_id: Uuid,
    /// The tool.
    pub tool_name: String,
    /// Its arguments, as the worker sent them.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub arguments: serde_json::Value,
    /// `awaiting_approval`, `executing`, or how it ended: `success`, `error`, `timeout`,
    /// `cancelled`, `denied`.
    pub state: ToolCallState,
    /// Whether it needs (or needed) an approver.
    pub requires_approval: bool,
    /// Why a person is asked: the tool policy's reason (or name), or the worker's words
    /// when the policy let it ask.
    pub policy_reason: Option<String>,
    /// The signed-in principal that approved or denied it.
    pub approver: Option<String>,
    /// Its own execution timeout in milliseconds; null: `PM_TOOL_TIMEOUT_SECS`.
    pub timeout_ms: Option<u64>,
    /// Its one result (`tool.result`); null while it is open.
    pub result: Option<ToolResultView>,
    /// The tool policy it was reported under (`default`: none matched; null for calls
    /// reported before tool policies existed).
    #[serde(default)]
    pub policy: Option<String>,
    /// The principal that reported it (it may not decide it).
    #[serde(default)]
    pub reported_by: Option<String>,
    /// Who may approve or deny it (principal names and `role:<role>`), when it needs (or
    /// needed) a person.
    #[serde(default)]
    pub approvers: Option<Vec<String>>,
    /// The `human` actor whose decision its approver relayed.
    #[serde(default)]
    pub on_behalf_of: Option<Uuid>,
    /// The approver's comment.
    #[serde(default)]
    pub comment: Option<String>,
    /// When it was reported (log time of `tool.call`).
    #[serde(with = "crate::time")]
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    #[serde(with = "crate::time")]
    pub updated_at: DateTime<Utc>,
}

/// A tool call's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolResultView {
    /// `success`, `error`, `timeout`, `cancelled` or `denied`.
    pub status: ToolStatus,
    /// The tool's answer, as the executor reported it.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub output: Option<serde_json::Value>,
    /// What went wrong, as the executor reported it.
    pub error: Option<String>,
    /// Why the service ended the call: the denial's reason, `approval_timeout`,
    /// `execution_timeout`, `resume_deadline`, or the reason its turn ended.
    pub reason: Option<String>,
}
