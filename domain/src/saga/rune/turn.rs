//! Runes of a turn stream: the L0 queue (`turn.queued`, `turn.dispatched`) and the ECHS
//! TurnEngine, with the L0 delivery contract on every terminal rune.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{rune_event, SagaAnomaly};
use crate::saga::types::TurnKind;
use crate::types::{CheckpointType, TaskCheckpointType};

/// The names of the turn runes.
pub mod names {
    /// `turn.queued` — `[*] → queued` (L0 enqueue; addition).
    pub const TURN_QUEUED: &str = "turn.queued";
    /// `turn.dispatched` — `queued → dispatched` (L0 lease; addition).
    pub const TURN_DISPATCHED: &str = "turn.dispatched";
    /// `turn.started` — `dispatched → streaming`.
    pub const TURN_STARTED: &str = "turn.started";
    /// `turn.assistant_delta` — `streaming → streaming`.
    pub const TURN_ASSISTANT_DELTA: &str = "turn.assistant_delta";
    /// `turn.tool_calls_received` — `streaming → tool_executing` (a worker's tool calls).
    pub const TURN_TOOL_CALLS_RECEIVED: &str = "turn.tool_calls_received";
    /// `turn.tools_finished` — `tool_executing → streaming` (every call has its result).
    pub const TURN_TOOLS_FINISHED: &str = "turn.tools_finished";
    /// `turn.completed` — `streaming | tool_executing → completed`.
    pub const TURN_COMPLETED: &str = "turn.completed";
    /// `turn.interrupted` — `queued | dispatched | streaming | tool_executing → interrupted`.
    pub const TURN_INTERRUPTED: &str = "turn.interrupted";
    /// `turn.error` — `dispatched | streaming | tool_executing → error`.
    pub const TURN_ERROR: &str = "turn.error";
    /// `turn.claimed` — a worker's lease on a `streaming` turn (WORKERS.md; addition).
    pub const TURN_CLAIMED: &str = "turn.claimed";
    /// `turn.lease_expired` — the lease was not renewed in time (WORKERS.md; addition).
    pub const TURN_LEASE_EXPIRED: &str = "turn.lease_expired";
    /// `turn.released` — the worker gave the turn back (WORKERS.md; addition).
    pub const TURN_RELEASED: &str = "turn.released";
    /// `turn.usage_reported` — tokens the worker spent on the turn (WORKERS.md; addition).
    pub const TURN_USAGE_REPORTED: &str = "turn.usage_reported";
}

/// What a turn was enqueued to do (`turn.queued`'s and `turn.started`'s `input`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TurnInput {
    /// Answer a human message (conversation turn).
    Message {
        /// The message.
        message_id: Uuid,
    },
    /// Decide without the user's reply after the session timeout (conversation turn).
    AutoDecide {
        /// The `NEED_INFORMATION` checkpoint that waited.
        checkpoint_id: Option<Uuid>,
    },
    /// Work a task (`task.created`).
    Task {
        /// The task.
        task_id: Uuid,
    },
    /// Work a task again after `WORK_REJECTED`.
    TaskRetry {
        /// The task.
        task_id: Uuid,
        /// The `WORK_REJECTED` checkpoint.
        task_checkpoint_id: Uuid,
    },
    /// Work resumed (`WORK_STARTED` with no open turn): starts as soon as dispatched.
    TaskResume {
        /// The task.
        task_id: Uuid,
        /// The `WORK_STARTED` checkpoint.
        task_checkpoint_id: Uuid,
    },
}

/// `turn.queued` {turn_id, agent_id, conversation_id, kind, task_id, input}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnQueued {
    /// The turn.
    pub turn_id: Uuid,
    /// Its agent.
    pub agent_id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// `conversation` or `task`.
    pub kind: TurnKind,
    /// The task of a task turn.
    pub task_id: Option<Uuid>,
    /// What to do.
    pub input: TurnInput,
}

/// `turn.dispatched` {turn_id, turn_epoch}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnLeased {
    /// The turn.
    pub turn_id: Uuid,
    /// The agent's epoch for this turn.
    pub turn_epoch: i64,
}

/// `turn.started` {turn_id, agent_id, input}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnStarted {
    /// The turn.
    pub turn_id: Uuid,
    /// Its agent.
    pub agent_id: Uuid,
    /// What it works on.
    pub input: TurnInput,
}

/// `turn.assistant_delta` {turn_id, message_id} (the content fragment is the message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AssistantDelta {
    /// The turn.
    pub turn_id: Uuid,
    /// The message the turn produced.
    pub message_id: Uuid,
}

/// `turn.tool_calls_received` {turn_id, call_ids}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolCallsReceived {
    /// The turn.
    pub turn_id: Uuid,
    /// The tool calls.
    pub call_ids: Vec<String>,
}

/// `turn.tools_finished` {turn_id, results}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolsFinished {
    /// The turn.
    pub turn_id: Uuid,
    /// Each call of the batch with how it ended, in the batch's order.
    pub results: Vec<ToolSummary>,
}

/// A result summary of `turn.tools_finished`: {call_id, status}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolSummary {
    /// The call.
    pub call_id: String,
    /// Its `tool.result` status.
    pub status: crate::saga::types::ToolStatus,
}

/// `turn.claimed` {turn_id, turn_epoch, worker, lease_expires_at}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnClaimed {
    /// The turn.
    pub turn_id: Uuid,
    /// One more than any epoch the turn had: it fences off every earlier claim.
    pub turn_epoch: i64,
    /// The worker's name, for operators.
    pub worker: String,
    /// When the lease ends unless renewed.
    #[serde(with = "crate::time")]
    pub lease_expires_at: chrono::DateTime<chrono::Utc>,
}

/// `turn.lease_expired` {turn_id, turn_epoch, worker}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LeaseExpired {
    /// The turn.
    pub turn_id: Uuid,
    /// The claim that expired.
    pub turn_epoch: i64,
    /// Its worker.
    pub worker: String,
}

/// `turn.released` {turn_id, turn_epoch, reason}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnReleased {
    /// The turn.
    pub turn_id: Uuid,
    /// The claim released.
    pub turn_epoch: i64,
    /// Why (the worker's words, or `released`).
    pub reason: String,
}

/// `turn.usage_reported` {turn_id, input_tokens, output_tokens}: added to the turn's totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UsageReported {
    /// The turn.
    pub turn_id: Uuid,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// `turn.completed`'s `final_output`: the checkpoint that ended the turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FinalOutput {
    /// A conversation checkpoint (conversation turn).
    ConversationCheckpoint {
        /// The checkpoint.
        checkpoint_id: Uuid,
        /// Its type.
        checkpoint_type: CheckpointType,
    },
    /// `WORK_COMPLETED` (task turn).
    TaskCheckpoint {
        /// The task checkpoint.
        task_checkpoint_id: Uuid,
        /// Its type.
        #[serde(rename = "type")]
        checkpoint_type: TaskCheckpointType,
    },
}

/// Messages a turn produced (`usage`, `partial_output`), and the tokens its workers
/// reported (`turn.completed.usage` carries the totals; absent when none were reported,
/// so runes written before workers read back unchanged).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MessageCount {
    /// `turn.assistant_delta` runes of the turn.
    pub messages: u32,
    /// Prompt tokens reported (`turn.usage_reported`), summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Completion tokens reported, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
}

/// `turn.completed` {turn_id, final_output, usage, deliverable, deliverable_reason}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnCompleted {
    /// The turn.
    pub turn_id: Uuid,
    /// The checkpoint that ended it.
    pub final_output: FinalOutput,
    /// Messages produced.
    pub usage: MessageCount,
    /// The last message the turn produced, or null.
    pub deliverable: Option<Uuid>,
    /// Why `deliverable` is null (`no_message`); null when there is one.
    pub deliverable_reason: Option<String>,
}

/// `turn.interrupted` {turn_id, reason, partial_output, deliverable, deliverable_reason}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnInterrupted {
    /// The turn.
    pub turn_id: Uuid,
    /// `steer`, `work_paused`, `session_closed`, `killed`, `agent_terminated`.
    pub reason: String,
    /// Messages produced before the interruption.
    pub partial_output: MessageCount,
    /// The last message the turn produced, or null.
    pub deliverable: Option<Uuid>,
    /// Why the delivery is partial: the interruption's reason.
    pub deliverable_reason: Option<String>,
}

/// `turn.error` {turn_id, error_type, message, deliverable, deliverable_reason}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnError {
    /// The turn.
    pub turn_id: Uuid,
    /// `timeout`, `session_resume_failed`, `lease_expired`, or a worker's own type.
    pub error_type: String,
    /// A human-readable description.
    pub message: String,
    /// The last message the turn produced, or null.
    pub deliverable: Option<Uuid>,
    /// `watchdog`, `session_resume_failed`, `lease_expired` or `stream_error`.
    pub deliverable_reason: Option<String>,
}

/// The runes of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "rune")]
pub enum TurnRune {
    /// `turn.queued`
    #[serde(rename = "turn.queued")]
    Queued(TurnQueued),
    /// `turn.dispatched`
    #[serde(rename = "turn.dispatched")]
    Dispatched(TurnLeased),
    /// `turn.started`
    #[serde(rename = "turn.started")]
    Started(TurnStarted),
    /// `turn.assistant_delta`
    #[serde(rename = "turn.assistant_delta")]
    AssistantDelta(AssistantDelta),
    /// `turn.tool_calls_received`
    #[serde(rename = "turn.tool_calls_received")]
    ToolCallsReceived(ToolCallsReceived),
    /// `turn.tools_finished`
    #[serde(rename = "turn.tools_finished")]
    ToolsFinished(ToolsFinished),
    /// `turn.completed`
    #[serde(rename = "turn.completed")]
    Completed(TurnCompleted),
    /// `turn.interrupted`
    #[serde(rename = "turn.interrupted")]
    Interrupted(TurnInterrupted),
    /// `turn.error`
    #[serde(rename = "turn.error")]
    Error(TurnError),
    /// `turn.claimed`
    #[serde(rename = "turn.claimed")]
    Claimed(TurnClaimed),
    /// `turn.lease_expired`
    #[serde(rename = "turn.lease_expired")]
    LeaseExpired(LeaseExpired),
    /// `turn.released`
    #[serde(rename = "turn.released")]
    Released(TurnReleased),
    /// `turn.usage_reported`
    #[serde(rename = "turn.usage_reported")]
    UsageReported(UsageReported),
    /// `saga.anomaly`
    #[serde(rename = "saga.anomaly")]
    Anomaly(SagaAnomaly),
}

impl TurnRune {
    /// Every rune name of the stream, `saga.anomaly` last.
    pub const NAMES: &'static [&'static str] = &[
        names::TURN_QUEUED,
        names::TURN_DISPATCHED,
        names::TURN_STARTED,
        names::TURN_ASSISTANT_DELTA,
        names::TURN_TOOL_CALLS_RECEIVED,
        names::TURN_TOOLS_FINISHED,
        names::TURN_COMPLETED,
        names::TURN_INTERRUPTED,
        names::TURN_ERROR,
        names::TURN_CLAIMED,
        names::TURN_LEASE_EXPIRED,
        names::TURN_RELEASED,
        names::TURN_USAGE_REPORTED,
        super::SAGA_ANOMALY,
    ];

    /// The rune's name.
    pub fn name(&self) -> &'static str {
        use names::*;
        match self {
            Self::Queued(_) => TURN_QUEUED,
            Self::Dispatched(_) => TURN_DISPATCHED,
            Self::Started(_) => TURN_STARTED,
            Self::AssistantDelta(_) => TURN_ASSISTANT_DELTA,
            Self::ToolCallsReceived(_) => TURN_TOOL_CALLS_RECEIVED,
            Self::ToolsFinished(_) => TURN_TOOLS_FINISHED,
            Self::Completed(_) => TURN_COMPLETED,
            Self::Interrupted(_) => TURN_INTERRUPTED,
            Self::Error(_) => TURN_ERROR,
            Self::Claimed(_) => TURN_CLAIMED,
            Self::LeaseExpired(_) => TURN_LEASE_EXPIRED,
            Self::Released(_) => TURN_RELEASED,
            Self::UsageReported(_) => TURN_USAGE_REPORTED,
            Self::Anomaly(_) => super::SAGA_ANOMALY,
        }
    }

    /// The delivery of a terminal rune: (`deliverable`, `deliverable_reason`).
    pub fn delivery(&self) -> Option<(Option<Uuid>, Option<&str>)> {
        match self {
            Self::Completed(r) => Some((r.deliverable, r.deliverable_reason.as_deref())),
            Self::Interrupted(r) => Some((r.deliverable, r.deliverable_reason.as_deref())),
            Self::Error(r) => Some((r.deliverable, r.deliverable_reason.as_deref())),
            _ => None,
        }
    }
}

rune_event!(TurnRune);
