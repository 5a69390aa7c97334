//! A logged event read back as the domain fact it records. Projections and sagas consume
//! facts through this one parser; an event it cannot read is a poison event for them.

use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::message::MessageAdded;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use serde::de::DeserializeOwned;

use crate::log::LoggedEvent;

/// Every `project_manager.*` fact.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// `project_manager.actor.registered`
    ActorRegistered(ActorRegistered),
    /// `project_manager.conversation.started`
    ConversationStarted(ConversationStarted),
    /// `project_manager.conversation.checkpoint.created`
    ConversationCheckpointCreated(ConversationCheckpointCreated),
    /// `project_manager.task.created`
    TaskCreated(TaskCreated),
    /// `project_manager.task.checkpoint.created`
    TaskCheckpointCreated(TaskCheckpointCreated),
    /// `project_manager.message.added`
    MessageAdded(MessageAdded),
}

/// Why an event is not a readable fact.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FactError {
    /// The event type is not a known fact (e.g. a rune): consumers skip it.
    #[error("not a project_manager fact: {0}")]
    Unknown(String),
    /// A known type whose payload does not parse: a poison event.
    #[error("{event_type} payload does not parse: {reason}")]
    Malformed {
        /// The event type.
        event_type: String,
        /// The parser's message.
        reason: String,
    },
}

fn parse<T: DeserializeOwned>(e: &LoggedEvent) -> Result<T, FactError> {
    serde_json::from_value(e.payload.clone()).map_err(|err| FactError::Malformed {
        event_type: e.event_type.clone(),
        reason: err.to_string(),
    })
}

impl Fact {
    /// Reads a logged event.
    ///
    /// # Errors
    /// [`FactError::Unknown`] for other event types, [`FactError::Malformed`] for a
    /// payload that does not match its type.
    pub fn from_logged(e: &LoggedEvent) -> Result<Self, FactError> {
        Ok(match e.event_type.as_str() {
            "project_manager.actor.registered" => Self::ActorRegistered(parse(e)?),
            "project_manager.conversation.started" => Self::ConversationStarted(parse(e)?),
            "project_manager.conversation.checkpoint.created" => {
                Self::ConversationCheckpointCreated(parse(e)?)
            }
            "project_manager.task.created" => Self::TaskCreated(parse(e)?),
            "project_manager.task.checkpoint.created" => Self::TaskCheckpointCreated(parse(e)?),
            "project_manager.message.added" => Self::MessageAdded(parse(e)?),
            other => return Err(FactError::Unknown(other.to_string())),
        })
    }
}
