//! The one error type of the domain: every rule a command can break, by name.

use uuid::Uuid;

use crate::lookup::LookupError;

/// Why a command was rejected. A rejected command emits nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// The conversation named by the command does not exist.
    #[error("conversation {0} does not exist")]
    ConversationNotFound(Uuid),
    /// The task named by the command's target (path) does not exist.
    #[error("task {0} does not exist")]
    TaskNotFound(Uuid),
    /// A message's `task_id` names no task of its conversation.
    #[error("task {0} is not a task of this conversation")]
    MessageTaskNotFound(Uuid),
    /// An actor named in the command is not registered.
    #[error("actor {0} is not registered")]
    ActorNotFound(Uuid),
    /// A task's `checkpoint_id` names no conversation checkpoint.
    #[error("checkpoint {0} does not exist")]
    CheckpointNotFound(Uuid),
    /// A task's checkpoint belongs to another conversation.
    #[error("checkpoint {0} belongs to another conversation")]
    CheckpointConversationMismatch(Uuid),
    /// A task's checkpoint is not of type `BEGIN_WORK`.
    #[error("checkpoint {0} is not a BEGIN_WORK checkpoint")]
    CheckpointNotBeginWork(Uuid),
    /// A conversation with this id exists with other content.
    #[error("conversation {0} already exists with other content")]
    ConversationExists(Uuid),
    /// An entity with this id exists with other content.
    #[error("{entity} {id} already exists with other content")]
    AlreadyExists {
        /// The kind of entity (`actor`, `message`, ...).
        entity: &'static str,
        /// Its id.
        id: Uuid,
    },
    /// No tool policy of this name is in force.
    #[error("tool policy {0} does not exist")]
    ToolPolicyNotFound(String),
    /// A field is missing, ill-typed or empty.
    #[error("{field}: {reason}")]
    Validation {
        /// The field's name as it appears in the request body.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A cross-aggregate lookup could not be answered (the store is unreachable).
    #[error(transparent)]
    Lookup(#[from] LookupError),
}

impl DomainError {
    /// A [`DomainError::Validation`] for `field`.
    pub fn validation(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Validation {
            field,
            reason: reason.into(),
        }
    }
}
