//! Runes of a session stream: the ECHS session lifecycle, the FCMP conversation state and
//! its interaction and restart runes.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{rune_event, SagaAnomaly};
use crate::saga::types::ConversationState;

/// The names of the session runes.
pub mod names {
    /// `session.created` — `[*] → created`.
    pub const SESSION_CREATED: &str = "session.created";
    /// `session.activated` — `created → active`.
    pub const SESSION_ACTIVATED: &str = "session.activated";
    /// `session.paused` — `active → paused`.
    pub const SESSION_PAUSED: &str = "session.paused";
    /// `session.resumed` — `paused → active`.
    pub const SESSION_RESUMED: &str = "session.resumed";
    /// `session.suspended` — `active → suspended`.
    pub const SESSION_SUSPENDED: &str = "session.suspended";
    /// `session.unsuspended` — `suspended → active`.
    pub const SESSION_UNSUSPENDED: &str = "session.unsuspended";
    /// `session.closing` — `active | paused | suspended → closing`.
    pub const SESSION_CLOSING: &str = "session.closing";
    /// `session.closed` — `closing → closed`.
    pub const SESSION_CLOSED: &str = "session.closed";
    /// `session.archived` — `closed → archived`.
    pub const SESSION_ARCHIVED: &str = "session.archived";
    /// `conversation.state.changed` — an FCMP state change.
    pub const CONVERSATION_STATE_CHANGED: &str = "conversation.state.changed";
    /// `user.input.required` — the session waits for the user.
    pub const USER_INPUT_REQUIRED: &str = "user.input.required";
    /// `interaction.reply.accepted` — the user's reply ends the wait.
    pub const INTERACTION_REPLY_ACCEPTED: &str = "interaction.reply.accepted";
    /// `interaction.auto_decide.timeout` — the session timeout ends the wait.
    pub const INTERACTION_AUTO_DECIDE_TIMEOUT: &str = "interaction.auto_decide.timeout";
    /// `conversation.completed` — with the change to `succeeded`.
    pub const CONVERSATION_COMPLETED: &str = "conversation.completed";
    /// `conversation.failed` — with the change to `failed` or `canceled`.
    pub const CONVERSATION_FAILED: &str = "conversation.failed";
    /// `restart.preserve_waiting` — start-up found the session waiting (FCMP §4).
    pub const RESTART_PRESERVE_WAITING: &str = "restart.preserve_waiting";
    /// `restart.reconcile_failed` — start-up found its turn overdue (FCMP §4).
    pub const RESTART_RECONCILE_FAILED: &str = "restart.reconcile_failed";
    /// `session.budget_added` — an operator added tokens to the budget (WORKERS.md).
    pub const SESSION_BUDGET_ADDED: &str = "session.budget_added";
}

/// The settings a session was created with (`session.created`'s `config`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionSettings {
    /// The session timeout in seconds.
    pub session_timeout_secs: i64,
    /// The turn watchdog timeout in seconds.
    pub turn_timeout_secs: i64,
    /// Consecutive turn errors that suspend the session.
    pub error_threshold: u32,
    /// Tokens the session may spend (`PM_SESSION_TOKEN_BUDGET`); absent: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
}

/// `session.suspended`'s `budget_info`: the error budget (`error_threshold`) or the token
/// budget (`budget_exhausted`) that ran out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum BudgetInfo {
    /// `error_threshold`.
    Errors {
        /// Consecutive turn errors when the session was suspended.
        consecutive_errors: u32,
        /// The threshold.
        threshold: u32,
    },
    /// `budget_exhausted`.
    Tokens {
        /// Tokens the session's turns reported.
        tokens_used: u64,
        /// Its budget.
        token_budget: u64,
    },
}

/// `session.budget_added` {add_tokens, token_budget}.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BudgetAdded {
    /// Tokens added.
    pub add_tokens: u64,
    /// The budget after it.
    pub token_budget: u64,
}

/// Turns counted by terminal state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnCounts {
    /// `turn.completed`.
    pub completed: u32,
    /// `turn.interrupted`.
    pub interrupted: u32,
    /// `turn.error`.
    pub error: u32,
}

/// `session.closed`'s `final_stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FinalStats {
    /// Agents of the session.
    pub agents: u32,
    /// Its turns by terminal state.
    pub turns: TurnCounts,
    /// Messages the turns produced (`turn.assistant_delta` runes).
    pub assistant_messages: u32,
}

/// `session.created` {conversation_id, config}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionCreated {
    /// The conversation (= the session's id).
    pub conversation_id: Uuid,
    /// The settings it decides with.
    pub config: SessionSettings,
}

/// `session.activated` {root_agent_id}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionActivated {
    /// The root agent.
    pub root_agent_id: Uuid,
}

/// A payload that is only a reason (`session.paused`, `session.closing`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// Why.
    pub reason: String,
}

/// The empty payload `{}` (`session.resumed`, `session.unsuspended`, `session.archived`,
/// `conversation.completed`, `restart.preserve_waiting`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `session.suspended` {reason, budget_info}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionSuspended {
    /// Why (`error_threshold`).
    pub reason: String,
    /// The count and the threshold.
    pub budget_info: BudgetInfo,
}

/// `session.closed` {final_stats}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionClosed {
    /// What the session did.
    pub final_stats: FinalStats,
}

/// `conversation.state.changed` {from, to}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StateChanged {
    /// The previous FCMP state; null before the first one.
    pub from: Option<ConversationState>,
    /// The new one.
    pub to: ConversationState,
}

/// `user.input.required` {checkpoint_id}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UserInputRequired {
    /// The `NEED_INFORMATION` checkpoint.
    pub checkpoint_id: Uuid,
}

/// `interaction.reply.accepted` {message_id}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReplyAccepted {
    /// The human message that answered.
    pub message_id: Uuid,
}

/// `interaction.auto_decide.timeout` {checkpoint_id}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AutoDecideTimeout {
    /// The `NEED_INFORMATION` checkpoint whose wait timed out.
    pub checkpoint_id: Option<Uuid>,
}

/// An error code (`conversation.failed`, `restart.reconcile_failed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ErrorCode {
    /// `TURN_ERROR_THRESHOLD`, `SESSION_RESUME_FAILED`, `CONVERSATION_CANCELED`.
    pub error: String,
}

/// The runes of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "rune")]
pub enum SessionRune {
    /// `session.created`
    #[serde(rename = "session.created")]
    Created(SessionCreated),
    /// `session.activated`
    #[serde(rename = "session.activated")]
    Activated(SessionActivated),
    /// `session.paused`
    #[serde(rename = "session.paused")]
    Paused(Reason),
    /// `session.resumed`
    #[serde(rename = "session.resumed")]
    Resumed(Empty),
    /// `session.suspended`
    #[serde(rename = "session.suspended")]
    Suspended(SessionSuspended),
    /// `session.unsuspended`
    #[serde(rename = "session.unsuspended")]
    Unsuspended(Empty),
    /// `session.closing`
    #[serde(rename = "session.closing")]
    Closing(Reason),
    /// `session.closed`
    #[serde(rename = "session.closed")]
    Closed(SessionClosed),
    /// `session.archived`
    #[serde(rename = "session.archived")]
    Archived(Empty),
    /// `conversation.state.changed`
    #[serde(rename = "conversation.state.changed")]
    StateChanged(StateChanged),
    /// `user.input.required`
    #[serde(rename = "user.input.required")]
    UserInputRequired(UserInputRequired),
    /// `interaction.reply.accepted`
    #[serde(rename = "interaction.reply.accepted")]
    ReplyAccepted(ReplyAccepted),
    /// `interaction.auto_decide.timeout`
    #[serde(rename = "interaction.auto_decide.timeout")]
    AutoDecideTimeout(AutoDecideTimeout),
    /// `conversation.completed`
    #[serde(rename = "conversation.completed")]
    ConversationCompleted(Empty),
    /// `conversation.failed`
    #[serde(rename = "conversation.failed")]
    ConversationFailed(ErrorCode),
    /// `restart.preserve_waiting`
    #[serde(rename = "restart.preserve_waiting")]
    PreserveWaiting(Empty),
    /// `restart.reconcile_failed`
    #[serde(rename = "restart.reconcile_failed")]
    ReconcileFailed(ErrorCode),
    /// `session.budget_added`
    #[serde(rename = "session.budget_added")]
    BudgetAdded(BudgetAdded),
    /// `saga.anomaly`
    #[serde(rename = "saga.anomaly")]
    Anomaly(SagaAnomaly),
}

impl SessionRune {
    /// Every rune name of the stream, `saga.anomaly` last.
    pub const NAMES: &'static [&'static str] = &[
        names::SESSION_CREATED,
        names::SESSION_ACTIVATED,
        names::SESSION_PAUSED,
        names::SESSION_RESUMED,
        names::SESSION_SUSPENDED,
        names::SESSION_UNSUSPENDED,
        names::SESSION_CLOSING,
        names::SESSION_CLOSED,
        names::SESSION_ARCHIVED,
        names::CONVERSATION_STATE_CHANGED,
        names::USER_INPUT_REQUIRED,
        names::INTERACTION_REPLY_ACCEPTED,
        names::INTERACTION_AUTO_DECIDE_TIMEOUT,
        names::CONVERSATION_COMPLETED,
        names::CONVERSATION_FAILED,
        names::RESTART_PRESERVE_WAITING,
        names::RESTART_RECONCILE_FAILED,
        names::SESSION_BUDGET_ADDED,
        super::SAGA_ANOMALY,
    ];

    /// The rune's name.
    pub fn name(&self) -> &'static str {
        use names::*;
        match self {
            Self::Created(_) => SESSION_CREATED,
            Self::Activated(_) => SESSION_ACTIVATED,
            Self::Paused(_) => SESSION_PAUSED,
            Self::Resumed(_) => SESSION_RESUMED,
            Self::Suspended(_) => SESSION_SUSPENDED,
            Self::Unsuspended(_) => SESSION_UNSUSPENDED,
            Self::Closing(_) => SESSION_CLOSING,
            Self::Closed(_) => SESSION_CLOSED,
            Self::Archived(_) => SESSION_ARCHIVED,
            Self::StateChanged(_) => CONVERSATION_STATE_CHANGED,
            Self::UserInputRequired(_) => USER_INPUT_REQUIRED,
            Self::ReplyAccepted(_) => INTERACTION_REPLY_ACCEPTED,
            Self::AutoDecideTimeout(_) => INTERACTION_AUTO_DECIDE_TIMEOUT,
            Self::ConversationCompleted(_) => CONVERSATION_COMPLETED,
            Self::ConversationFailed(_) => CONVERSATION_FAILED,
            Self::PreserveWaiting(_) => RESTART_PRESERVE_WAITING,
            Self::ReconcileFailed(_) => RESTART_RECONCILE_FAILED,
            Self::BudgetAdded(_) => SESSION_BUDGET_ADDED,
            Self::Anomaly(_) => super::SAGA_ANOMALY,
        }
    }
}

rune_event!(SessionRune);
