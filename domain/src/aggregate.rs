//! What the application needs of every project-manager aggregate beyond cqrs-es's
//! [`Aggregate`]: the fact that created its entity, the conversation its facts belong
//! to, and what it tells other commands' preconditions.

use cqrs_es::Aggregate;
use uuid::Uuid;

use crate::{DomainError, Services};

/// A project-manager aggregate.
pub trait PmAggregate:
    Aggregate<Error = DomainError, Services = Services> + Clone + 'static
{
    /// The fact that created this aggregate's entity (the entity as the API shows it);
    /// `None` before creation.
    fn creation(&self) -> Option<Self::Event>;

    /// The fact `command` repeats when it emitted nothing (the entity the API answers with):
    /// the creation, unless a command of the aggregate repeats another fact (forgetting
    /// twice answers the first forgetting).
    fn repeated(&self, command: &Self::Command) -> Option<Self::Event> {
        let _ = command;
        self.creation()
    }

    /// The conversation this aggregate's facts belong to; `None` before creation and for
    /// actors.
    fn conversation_id(&self) -> Option<Uuid>;

    /// What this entity tells other commands' preconditions once created (see
    /// [`crate::Lookup`]); `None` for entities nothing looks up.
    fn lookup_entity(&self) -> Option<crate::lookup::Entity> {
        None
    }
}
