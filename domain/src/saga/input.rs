//! What drives the machines: facts (with what the processor looked up about them), due
//! deadlines, operator controls and the start-up recovery.

use uuid::Uuid;

use super::deadline::Deadline;
use crate::checkpoint::ConversationCheckpointCreated;
use crate::conversation::ConversationStarted;
use crate::message::MessageAdded;
use crate::task::{TaskCheckpointCreated, TaskCreated};
use crate::types::ActorKind;

/// The facts' names, as the anomalies that name them record them.
pub(crate) const CONVERSATION_STARTED: &str = ConversationStarted::NAME;
pub(crate) const MESSAGE_ADDED: &str = MessageAdded::NAME;
pub(crate) const CHECKPOINT_CREATED: &str = ConversationCheckpointCreated::NAME;
pub(crate) const TASK_CREATED: &str = TaskCreated::NAME;
pub(crate) const TASK_CHECKPOINT_CREATED: &str = TaskCheckpointCreated::NAME;

/// An operator control (admin API).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// `POST /v1/sessions/{id}/pause`: `active → paused`.
    Pause {
        /// Recorded in `session.paused`.
        reason: String,
    },
    /// `POST /v1/sessions/{id}/resume`: `paused | suspended → active`.
    Resume,
    /// `POST /v1/sessions/{id}/archive`: `closed → archived`.
    Archive,
    /// `POST /v1/agents/{id}/kill`: `idle | running_turn → terminated`.
    Kill {
        /// The agent.
        agent_id: Uuid,
    },
    /// `POST /v1/sessions/{id}/budget`: more tokens; lifts a budget suspension they cover.
    AddBudget {
        /// Tokens added (> 0).
        add_tokens: u64,
    },
}

/// A worker's request on a claimed turn, or an operator's interrupt (WORKERS.md). The
/// reports carry the claim's `turn_epoch`: they act only for the claim that holds the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerOp {
    /// `POST /v1/turns/claim` picked this turn: a new lease under the next epoch.
    Claim {
        /// The worker's name.
        worker: String,
        /// How long the lease lasts unless renewed.
        lease: chrono::Duration,
    },
    /// `POST /v1/turns/{id}/release`: the worker gives the turn back.
    Release {
        /// The claim's epoch.
        turn_epoch: i64,
        /// Recorded in `turn.released`.
        reason: String,
    },
    /// `POST /v1/turns/{id}/error`: ECHS `stream_error`.
    Error {
        /// The claim's epoch.
        turn_epoch: i64,
        /// `turn.error`'s `error_type`.
        error_type: String,
        /// `turn.error`'s `message`.
        message: String,
    },
    /// `POST /v1/turns/{id}/usage`: tokens spent, added up.
    Usage {
        /// The claim's epoch.
        turn_epoch: i64,
        /// Prompt tokens.
        input_tokens: u64,
        /// Completion tokens.
        output_tokens: u64,
    },
    /// `POST /v1/turns/{id}/interrupt` (operator): the turn ends `interrupted`.
    Interrupt {
        /// Recorded in `turn.interrupted`.
        reason: String,
    },
    /// `POST /v1/turns/{id}/tool-calls`: the turn waits for these calls (L0 `suspended`);
    /// the worker's lease ends.
    ToolCalls {
        /// The claim's epoch.
        turn_epoch: i64,
        /// The batch, in the worker's order (1 to 64, `call_id`s unique).
        calls: Vec<NewToolCall>,
        /// L0 `resume_deadline`: every call still open then times out.
        resume_deadline: Option<chrono::Duration>,
        /// The tool policies that decide each call (TRUST.md "Tool policies").
        rules: crate::tool_policy::PolicyRules,
        /// The signed-in principal reporting the batch: it never decides these calls.
        reporter: String,
    },
    /// A request on one call (`/v1/turns/{id}/tool-calls/{call_id}/…`): keyed by the
    /// turn and `call_id`, not fenced (the approver and the executor are not the worker).
    Tool {
        /// The worker's id of the call.
        call_id: String,
        /// What is asked.
        op: ToolOp,
    },
}

/// One call of a reported batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToolCall {
    /// The worker's id, unique within the turn.
    pub call_id: String,
    /// The tool.
    pub tool_name: String,
    /// Its arguments.
    pub arguments: serde_json::Value,
    /// Whether the worker asks a person to approve it first (its policy may ask anyway).
    pub requires_approval: bool,
    /// Why the worker asks (recorded in `tool.approval_requested` when its policy allows
    /// the call and the worker asked).
    pub policy_reason: Option<String>,
    /// Its execution timeout; the configured one when `None`.
    pub timeout_ms: Option<u64>,
}

/// Who approves or denies a call (TRUST.md "Approvals"): the signed-in principal, never a
/// name the request chose, with the person it relays and a comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The signed-in principal.
    pub by: crate::tool_policy::Decider,
    /// The `human` actor whose decision an ingress relays.
    pub on_behalf_of: Option<Uuid>,
    /// Why, in the approver's words (at most 1,000 characters).
    pub comment: Option<String>,
}

/// A request on one tool call (WORKERS.md's table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOp {
    /// `…/approve` (an approver of the call's policy): `awaiting_approval → executing`.
    Approve {
        /// The decision's principal and what it adds.
        decision: Decision,
    },
    /// `…/deny` (an approver of the call's policy): `tool.denied`, then `tool.result`
    /// `denied`.
    Deny {
        /// Why.
        reason: String,
        /// The decision's principal and what it adds.
        decision: Decision,
    },
    /// `…/progress` (llm, admin): a chunk of output while executing.
    Progress {
        /// `stdout` or `stderr`.
        stream: super::types::ToolStream,
        /// The chunk.
        chunk: String,
    },
    /// `…/result` (llm, admin): the executor's result (`success`, `error`, `cancelled`).
    Result {
        /// How it ended.
        status: super::types::ToolStatus,
        /// The tool's answer.
        output: Option<serde_json::Value>,
        /// What went wrong.
        error: Option<String>,
    },
}

/// An input of [`super::Sagas::handle`].
#[derive(Debug, Clone)]
pub enum Input<'a> {
    /// `project_manager.conversation.started`.
    ConversationStarted {
        /// The fact.
        fact: &'a ConversationStarted,
        /// Which of its `actor_ids` are `kind = ai`.
        ai_actors: &'a [Uuid],
    },
    /// `project_manager.message.added`.
    MessageAdded {
        /// The fact.
        fact: &'a MessageAdded,
        /// The author's kind.
        author: ActorKind,
    },
    /// `project_manager.conversation.checkpoint.created`.
    CheckpointCreated(&'a ConversationCheckpointCreated),
    /// `project_manager.task.created`.
    TaskCreated(&'a TaskCreated),
    /// `project_manager.task.checkpoint.created`.
    TaskCheckpointCreated {
        /// The fact.
        fact: &'a TaskCheckpointCreated,
        /// The task's conversation.
        conversation_id: Uuid,
    },
    /// A deadline row fell due.
    DeadlineDue(&'a Deadline),
    /// An operator control.
    Control(Control),
    /// A worker's request on a turn of this conversation.
    Worker {
        /// The turn.
        turn_id: Uuid,
        /// What is asked.
        op: WorkerOp,
    },
    /// Start-up recovery (FCMP §4), with this conversation's deadlines that fell due while
    /// the service was down.
    Restart {
        /// The overdue rows.
        overdue: &'a [Deadline],
    },
}

impl Input<'_> {
    /// The conversation the input names, when it names one.
    pub fn conversation_id(&self) -> Option<Uuid> {
        match self {
            Self::ConversationStarted { fact, .. } => Some(fact.id),
            Self::MessageAdded { fact, .. } => Some(fact.conversation_id),
            Self::CheckpointCreated(fact) => Some(fact.conversation_id),
            Self::TaskCreated(fact) => Some(fact.conversation_id),
            Self::TaskCheckpointCreated {
                conversation_id, ..
            } => Some(*conversation_id),
            Self::DeadlineDue(_)
            | Self::Control(_)
            | Self::Worker { .. }
            | Self::Restart { .. } => None,
        }
    }
}

/// Why a control was refused. A refused control records nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// No session for this conversation (HTTP 404).
    #[error("session not found")]
    SessionNotFound,
    /// No agent with this id (HTTP 404).
    #[error("agent not found")]
    AgentNotFound,
    /// No turn with this id (HTTP 404 `turn_not_found`).
    #[error("turn not found")]
    TurnNotFound,
    /// The turn has no call with this `call_id` (HTTP 404 `tool_call_not_found`,
    /// INV-TOOL-CALL-BEFORE-RESULT).
    #[error("the turn has no tool call {0}")]
    ToolCallNotFound(String),
    /// The signed-in principal may not do this (HTTP 403 with the code).
    #[error("{code}: {detail}")]
    Forbidden {
        /// `approver_forbidden` or `self_approval_forbidden`.
        code: &'static str,
        /// Why.
        detail: String,
    },
    /// The machine has no edge for the control from the current state (HTTP 409).
    #[error("{code}: {detail}")]
    NotAllowed {
        /// `session_transition_not_allowed` or `agent_transition_not_allowed`.
        code: &'static str,
        /// The state and the control.
        detail: String,
    },
}

/// [`ControlError::NotAllowed`]'s code for a session control.
pub const SESSION_TRANSITION_NOT_ALLOWED: &str = "session_transition_not_allowed";
/// [`ControlError::NotAllowed`]'s code for an agent control.
pub const AGENT_TRANSITION_NOT_ALLOWED: &str = "agent_transition_not_allowed";
/// [`ControlError::NotAllowed`]'s code for an interrupt of a turn that cannot be
/// interrupted (WORKERS.md).
pub const TURN_TRANSITION_NOT_ALLOWED: &str = "turn_transition_not_allowed";
/// [`ControlError::NotAllowed`]'s code for a report whose claim does not hold the turn
/// (WORKERS.md `409 turn_fenced`).
pub const TURN_FENCED: &str = "turn_fenced";
/// [`ControlError::NotAllowed`]'s code for a claim of a turn that is not claimable (the
/// claimant moves on to the next; never answered as such).
pub const TURN_NOT_CLAIMABLE: &str = "turn_not_claimable";
/// [`ControlError::NotAllowed`]'s code for a batch reusing a `call_id` of the turn with
/// another call.
pub const TOOL_CALL_EXISTS: &str = "tool_call_exists";
/// [`ControlError::NotAllowed`]'s code for progress or a result of a call that is not
/// executing (INV-TOOL-APPROVAL-BEFORE-EXEC).
pub const TOOL_CALL_NOT_EXECUTING: &str = "tool_call_not_executing";
/// [`ControlError::NotAllowed`]'s code for approving or denying a call that does not wait
/// for approval.
pub const TOOL_CALL_NOT_AWAITING_APPROVAL: &str = "tool_call_not_awaiting_approval";
/// [`ControlError::NotAllowed`]'s code for another result after a call's one result
/// (INV-TOOL-TERMINAL).
pub const TOOL_CALL_TERMINAL: &str = "tool_call_terminal";
/// [`ControlError::Forbidden`]'s code for a decision by a principal the call's policy does
/// not list as an approver.
pub const APPROVER_FORBIDDEN: &str = "approver_forbidden";
/// [`ControlError::Forbidden`]'s code for a decision on a call by the principal that
/// reported it.
pub const SELF_APPROVAL_FORBIDDEN: &str = "self_approval_forbidden";
