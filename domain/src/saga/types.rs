//! The enumerations of the saga machines (states, kinds, roles), each with its wire form.

use serde::{Deserialize, Serialize};

wire_enum! {
    /// The session lifecycle (ECHS "Session (Conversation) Lifecycle").
    SessionState {
        /// Conversation id allocated, root agent spawned.
        Created = "created",
        /// Turns execute normally.
        Active = "active",
        /// Operator pause: no new turns are dispatched.
        Paused = "paused",
        /// Automatic pause (error threshold): needs a human message or an operator resume.
        Suspended = "suspended",
        /// All agents are being terminated.
        Closing = "closing",
        /// Sealed.
        Closed = "closed",
        /// Moved to cold storage.
        Archived = "archived",
    }
}

impl SessionState {
    /// Open: facts still drive the session (`created`, `active`, `paused`, `suspended`).
    pub fn is_open(self) -> bool {
        matches!(
            self,
            Self::Created | Self::Active | Self::Paused | Self::Suspended
        )
    }
}

wire_enum! {
    /// The FCMP conversation state: the client-facing view of a session.
    ConversationState {
        /// A turn is queued for the LLM.
        Queued = "queued",
        /// The LLM is working.
        Running = "running",
        /// Waiting for the user's reply.
        WaitingUser = "waiting_user",
        /// All work completed.
        Succeeded = "succeeded",
        /// Failed (error threshold, resume failure); recoverable by a new message.
        Failed = "failed",
        /// Closed without completing.
        Canceled = "canceled",
    }
}

impl ConversationState {
    /// `succeeded` and `canceled` end the conversation; `failed` does not (a new human
    /// message or an operator resume continues it).
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Canceled)
    }
}

wire_enum! {
    /// The agent lifecycle (ECHS "Agent Lifecycle").
    AgentState {
        /// Being set up.
        Spawning = "spawning",
        /// Ready for work: no active turn.
        Idle = "idle",
        /// Its active turn is dispatched or streaming.
        RunningTurn = "running_turn",
        /// Stopped (killed, or its session closed).
        Terminated = "terminated",
        /// Could not be set up.
        Failed = "failed",
    }
}

wire_enum! {
    /// The L0 head of an agent (WORKERS.md `head_status`): what its active turn is doing.
    HeadStatus {
        /// No active turn.
        Idle = "idle",
        /// Its turn is leased to it, not yet claimed or started.
        Dispatched = "dispatched",
        /// Its turn is streaming.
        Running = "running",
        /// Its turn waits for tool results.
        Suspended = "suspended",
    }
}

wire_enum! {
    /// The turn lifecycle (ECHS TurnEngine + L0 queue).
    TurnState {
        /// In its agent's inbox.
        Queued = "queued",
        /// Leased by its agent with a `turn_epoch`, waiting for the worker.
        Dispatched = "dispatched",
        /// The worker is producing output.
        Streaming = "streaming",
        /// Waiting for its tool calls' results (L0 `suspended`; WORKERS.md "Tools").
        ToolExecuting = "tool_executing",
        /// Ended normally.
        Completed = "completed",
        /// Stopped (steer, pause, kill, session closed).
        Interrupted = "interrupted",
        /// Failed (watchdog, resume failure).
        Error = "error",
    }
}

impl TurnState {
    /// `completed`, `interrupted` and `error`.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Interrupted | Self::Error)
    }
}

wire_enum! {
    /// The autonomy loop (ECHS "Autonomy Loop").
    PlanState {
        /// The conversation's title is the goal.
        GoalReceived = "goal_received",
        /// The first conversation turn is decomposing the goal.
        Planning = "planning",
        /// Tasks are being worked.
        Executing = "executing",
        /// Every task is completed; results under review.
        Reviewing = "reviewing",
        /// Done.
        GoalMet = "goal_met",
        /// Waiting for the user (NEED_INFORMATION).
        Blocked = "blocked",
        /// Cancelled.
        Stopped = "stopped",
    }
}

wire_enum! {
    /// What a turn works on.
    TurnKind {
        /// The root agent processing the conversation.
        Conversation = "conversation",
        /// An assignee working a task.
        Task = "task",
    }
}

wire_enum! {
    /// An agent's role in its conversation.
    AgentRole {
        /// The conversation's LLM.
        Root = "root",
        /// A task assignee.
        Worker = "worker",
    }
}

wire_enum! {
    /// A task's progress as the autonomy loop sees it.
    PlanTaskStatus {
        /// Created, not assigned.
        Pending = "pending",
        /// Assigned to an agent.
        Assigned = "assigned",
        /// `WORK_STARTED`.
        Started = "started",
        /// `WORK_COMPLETED`.
        Completed = "completed",
        /// `WORK_APPROVED`.
        Approved = "approved",
        /// `WORK_REJECTED`.
        Rejected = "rejected",
    }
}

wire_enum! {
    /// A critique's verdict on a task.
    Verdict {
        /// `WORK_APPROVED`.
        Approved = "approved",
        /// `WORK_REJECTED`.
        Rejected = "rejected",
    }
}

wire_enum! {
    /// The Tool lifecycle (ECHS "Tool Lifecycle"): one call's state. `pending_call` lasts
    /// only inside the outcome that records `tool.call` (its `tool.approval_requested`, or
    /// nothing, follows at once); the five results are terminal.
    ToolCallState {
        /// `tool.call` recorded; not yet routed to approval or execution.
        PendingCall = "pending_call",
        /// Waits for a person's approve or deny.
        AwaitingApproval = "awaiting_approval",
        /// An executor may run it and report progress and its result.
        Executing = "executing",
        /// Ended with its output.
        Success = "success",
        /// Ended with an error.
        Error = "error",
        /// Approval or execution took too long, or the batch's resume deadline passed.
        Timeout = "timeout",
        /// Its turn ended (interrupt, session closing, agent killed) or the executor gave up.
        Cancelled = "cancelled",
        /// An approver refused it.
        Denied = "denied",
    }
}

impl ToolCallState {
    /// The five terminal states: a result is recorded.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Success | Self::Error | Self::Timeout | Self::Cancelled | Self::Denied
        )
    }
}

wire_enum! {
    /// `tool.result`'s `status` (ECHS: success, error, timeout, cancelled; WORKERS.md adds
    /// denied, the result of a denial).
    ToolStatus {
        /// The tool ran; `output` is its answer.
        Success = "success",
        /// The tool failed; `error` says how.
        Error = "error",
        /// A deadline passed first.
        Timeout = "timeout",
        /// Cancelled before it finished.
        Cancelled = "cancelled",
        /// Refused by an approver.
        Denied = "denied",
    }
}

impl ToolStatus {
    /// The call state a result of this status leaves.
    pub fn state(self) -> ToolCallState {
        match self {
            Self::Success => ToolCallState::Success,
            Self::Error => ToolCallState::Error,
            Self::Timeout => ToolCallState::Timeout,
            Self::Cancelled => ToolCallState::Cancelled,
            Self::Denied => ToolCallState::Denied,
        }
    }
}

wire_enum! {
    /// Which output stream a `tool.progress` chunk comes from.
    ToolStream {
        /// Standard output.
        Stdout = "stdout",
        /// Standard error.
        Stderr = "stderr",
    }
}
