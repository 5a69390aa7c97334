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
            Self::DeadlineDue(_) | Self::Control(_) | Self::Restart { .. } => None,
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
