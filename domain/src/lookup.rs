//! The lookup port: how an aggregate checks a precondition that concerns another
//! aggregate. Implementations read the event store itself (never an eventually-consistent
//! projection), so a command sees every command acknowledged before it.

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use crate::types::{ActorKind, CheckpointType};

/// What a task precondition needs to know about a conversation checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The conversation the checkpoint belongs to.
    pub conversation_id: Uuid,
    /// Its type.
    pub checkpoint_type: CheckpointType,
}

/// What a message precondition needs to know about a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskInfo {
    /// The conversation the task belongs to.
    pub conversation_id: Uuid,
}

/// What a fenced command needs to know about its turn (TRUST.md "Who a principal may
/// speak for": a fenced command speaks only as the actor the turn's agent acts for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnInfo {
    /// The actor the turn's agent acts for; `None` for a root agent without an `ai`
    /// actor, which speaks for nobody.
    pub actor_id: Option<Uuid>,
}

/// What a created entity tells the cross-aggregate preconditions of other commands.
/// Entities never change once created, so this stays true forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    /// A started conversation.
    Conversation,
    /// A registered actor, of its kind (who may speak as it depends on it).
    Actor(ActorKind),
    /// A conversation checkpoint.
    Checkpoint(CheckpointInfo),
    /// A task.
    Task(TaskInfo),
}

impl Entity {
    /// The aggregate type whose creation fact tells this.
    pub fn aggregate_type(&self) -> &'static str {
        use cqrs_es::Aggregate;
        match self {
            Self::Conversation => crate::conversation::Conversation::TYPE,
            Self::Actor(_) => crate::actor::Actor::TYPE,
            Self::Checkpoint(_) => crate::checkpoint::ConversationCheckpoint::TYPE,
            Self::Task(_) => crate::task::Task::TYPE,
        }
    }
}

/// The store could not answer a lookup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("lookup failed: {0}")]
pub struct LookupError(pub String);

/// Read access to facts of other aggregates. Entities never change once created, so an
/// answer that something exists stays true forever.
///
/// # Errors
/// Every method fails with [`LookupError`] when the store cannot be read.
#[async_trait]
pub trait Lookup: Send + Sync {
    /// Whether a conversation with this id has started.
    async fn conversation_exists(&self, id: Uuid) -> Result<bool, LookupError>;
    /// The kind of the registered actor with this id, if any.
    async fn actor_kind(&self, id: Uuid) -> Result<Option<ActorKind>, LookupError>;
    /// Whether an actor with this id is registered.
    async fn actor_exists(&self, id: Uuid) -> Result<bool, LookupError> {
        Ok(self.actor_kind(id).await?.is_some())
    }
    /// The conversation checkpoint with this id, if any.
    async fn checkpoint(&self, id: Uuid) -> Result<Option<CheckpointInfo>, LookupError>;
    /// The task with this id, if any.
    async fn task(&self, id: Uuid) -> Result<Option<TaskInfo>, LookupError>;
    /// The turn with this id, if any (a turn's agent, and the actor it acts for, never
    /// change once the turn exists).
    async fn turn(&self, id: Uuid) -> Result<Option<TurnInfo>, LookupError>;
}

/// The services every aggregate's `handle` receives.
#[derive(Clone)]
pub struct Services {
    /// Cross-aggregate lookups.
    pub lookup: Arc<dyn Lookup>,
}

impl Services {
    /// Services over the given lookup.
    pub fn new(lookup: Arc<dyn Lookup>) -> Self {
        Self { lookup }
    }

    /// Fails with [`DomainError::ActorNotFound`](crate::DomainError::ActorNotFound)
    /// unless every actor is registered.
    ///
    /// # Errors
    /// The first unregistered actor, or a lookup failure.
    pub async fn require_actors(
        &self,
        ids: impl IntoIterator<Item = Uuid>,
    ) -> Result<(), crate::DomainError> {
        for id in ids {
            if !self.lookup.actor_exists(id).await? {
                return Err(crate::DomainError::ActorNotFound(id));
            }
        }
        Ok(())
    }

    /// Fails with [`DomainError::ConversationNotFound`](crate::DomainError::ConversationNotFound)
    /// unless the conversation exists.
    ///
    /// # Errors
    /// A missing conversation, or a lookup failure.
    pub async fn require_conversation(&self, id: Uuid) -> Result<(), crate::DomainError> {
        if self.lookup.conversation_exists(id).await? {
            Ok(())
        } else {
            Err(crate::DomainError::ConversationNotFound(id))
        }
    }
}
