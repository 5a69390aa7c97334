//! A logged event read back as the domain fact it records. Projections and sagas consume
//! facts through this one parser (an event it cannot read is a poison event for them), and
//! pm-client reads the log's facts with it.

use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::forgetting::{Forgotten, ACTOR_FORGOTTEN, CONVERSATION_FORGOTTEN};
use pm_domain::message::MessageAdded;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use pm_domain::{CheckpointInfo, Entity, TaskInfo};
use serde::de::DeserializeOwned;
use serde_json::Value;

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
    /// `project_manager.actor.forgotten`
    ActorForgotten(Forgotten),
    /// `project_manager.conversation.forgotten`
    ConversationForgotten(Forgotten),
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

/// An event as a log holds it, for [`Fact::from_logged`]: its type and the JSON text of its
/// payload (the service's `LoggedEvent`).
pub trait Logged {
    /// The event's type (a fact's or a rune's name).
    fn event_type(&self) -> &str;
    /// Its payload's JSON text as stored.
    fn payload_text(&self) -> &str;
}

/// Where a fact's fields are read from: the stored text (straight into the fact's type)
/// or a value already parsed.
trait Source {
    fn read<T: DeserializeOwned>(self) -> Result<T, serde_json::Error>;
}

impl Source for &Value {
    fn read<T: DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        T::deserialize(self)
    }
}

impl Source for &str {
    fn read<T: DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self)
    }
}

fn parse<T: DeserializeOwned>(event_type: &str, payload: impl Source) -> Result<T, FactError> {
    payload.read().map_err(|err| FactError::Malformed {
        event_type: event_type.to_string(),
        reason: err.to_string(),
    })
}

impl Fact {
    /// Reads a logged event.
    ///
    /// # Errors
    /// [`FactError::Unknown`] for other event types, [`FactError::Malformed`] for a
    /// payload that does not match its type.
    pub fn from_logged(e: &impl Logged) -> Result<Self, FactError> {
        Self::from_logged_unreadable(e).map(|(fact, _)| fact)
    }

    /// Reads a logged event some of whose texts may be unreadable — `null`, its party
    /// forgotten (TRUST.md "Forgetting a person") — and says whether any was: such a field
    /// holds [`pm_domain::personal::STAND_IN`], for the reader to show as `null`.
    ///
    /// # Errors
    /// As [`Fact::from_logged`].
    pub fn from_logged_unreadable(e: &impl Logged) -> Result<(Self, bool), FactError> {
        let (event_type, text) = (e.event_type(), e.payload_text());
        match Self::read(event_type, text) {
            Ok(fact) => Ok((fact, false)),
            Err(FactError::Malformed { .. })
                if !pm_domain::personal::personal_fields(event_type).is_empty() =>
            {
                let mut value: Value = parse(event_type, text)?;
                if !pm_domain::personal::stand_in_unreadable(event_type, &mut value) {
                    return Self::read(event_type, &value).map(|fact| (fact, false));
                }
                Self::read(event_type, &value).map(|fact| (fact, true))
            }
            Err(e) => Err(e),
        }
    }

    /// Reads a fact from its name and payload.
    ///
    /// # Errors
    /// As [`Fact::from_logged`].
    pub fn parse(event_type: &str, payload: &Value) -> Result<Self, FactError> {
        Self::read(event_type, payload)
    }

    fn read(event_type: &str, p: impl Source + Copy) -> Result<Self, FactError> {
        Ok(match event_type {
            ActorRegistered::NAME => Self::ActorRegistered(parse(event_type, p)?),
            ConversationStarted::NAME => Self::ConversationStarted(parse(event_type, p)?),
            ConversationCheckpointCreated::NAME => {
                Self::ConversationCheckpointCreated(parse(event_type, p)?)
            }
            TaskCreated::NAME => Self::TaskCreated(parse(event_type, p)?),
            TaskCheckpointCreated::NAME => Self::TaskCheckpointCreated(parse(event_type, p)?),
            MessageAdded::NAME => Self::MessageAdded(parse(event_type, p)?),
            ACTOR_FORGOTTEN => Self::ActorForgotten(parse(event_type, p)?),
            CONVERSATION_FORGOTTEN => Self::ConversationForgotten(parse(event_type, p)?),
            other => return Err(FactError::Unknown(other.to_string())),
        })
    }

    /// What the fact tells cross-aggregate preconditions, if it creates a looked-up
    /// entity.
    pub fn lookup_entity(&self) -> Option<Entity> {
        match self {
            Self::ActorRegistered(a) => Some(Entity::Actor(a.kind)),
            Self::ConversationStarted(_) => Some(Entity::Conversation),
            Self::ConversationCheckpointCreated(c) => Some(Entity::Checkpoint(CheckpointInfo {
                conversation_id: c.conversation_id,
                checkpoint_type: c.checkpoint_type,
            })),
            Self::TaskCreated(t) => Some(Entity::Task(TaskInfo {
                conversation_id: t.conversation_id,
            })),
            Self::TaskCheckpointCreated(_)
            | Self::MessageAdded(_)
            | Self::ActorForgotten(_)
            | Self::ConversationForgotten(_) => None,
        }
    }
}
