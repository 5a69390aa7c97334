//! What the application needs of every project-manager aggregate beyond cqrs-es's
//! [`Aggregate`]: its entity as JSON and the conversation its facts belong to.

use cqrs_es::Aggregate;
use uuid::Uuid;

use crate::{DomainError, Services};

/// A project-manager aggregate.
pub trait PmAggregate:
    Aggregate<Error = DomainError, Services = Services> + Clone + 'static
{
    /// The entity this aggregate holds, as the API shows it; `None` before creation.
    fn entity(&self) -> Option<serde_json::Value>;

    /// The conversation this aggregate's facts belong to; `None` before creation and for
    /// actors.
    fn conversation_id(&self) -> Option<Uuid>;
}

/// Serializes an entity for [`PmAggregate::entity`]; facts and entities are plain structs
/// that always serialize.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> Option<serde_json::Value> {
    serde_json::to_value(value).ok()
}
