//! The Conversation aggregate: transition `ConversationStarted`, and forgetting
//! (`project_manager.conversation.forgotten`, TRUST.md "Forgetting a person").

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::forgetting::{Forgotten, CONVERSATION_FORGOTTEN};
use crate::{DomainError, Label, NonEmptyText, PmAggregate, Services, EVENT_VERSION};

/// Command: start a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct StartConversation {
    /// The conversation's id (UUIDv5 of the external source and id when both are given).
    pub id: Uuid,
    /// The participating actors (at least one, each registered).
    pub actor_ids: Vec<Uuid>,
    /// The title.
    pub title: NonEmptyText,
    /// The id in the external source.
    pub external_id: Option<Label>,
    /// The external source (e.g. `github`).
    pub external_source: Option<Label>,
    /// A status given by the ingress.
    pub status: Option<Label>,
    /// The organization.
    pub organization: Option<Label>,
    /// Server time.
    pub now: DateTime<Utc>,
}

/// The commands of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum ConversationCommand {
    /// Start it.
    Start(StartConversation),
    /// Forget it: none of its texts can be read again.
    Forget {
        /// The conversation.
        id: Uuid,
        /// Server time.
        now: DateTime<Utc>,
    },
}

/// Fact `project_manager.conversation.started`; also the Conversation entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConversationStarted {
    /// The conversation's id.
    pub id: Uuid,
    /// The participating actors.
    pub actor_ids: Vec<Uuid>,
    /// The title.
    pub title: NonEmptyText,
    /// The id in the external source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<Label>,
    /// The external source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_source: Option<Label>,
    /// A status given by the ingress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Label>,
    /// The organization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<Label>,
    /// When the conversation started.
    #[serde(with = "crate::time")]
    pub created_at: DateTime<Utc>,
    /// Equal to `created_at`: nothing updates a conversation.
    #[serde(with = "crate::time")]
    pub updated_at: DateTime<Utc>,
}

impl ConversationStarted {
    /// The fact's name.
    pub const NAME: &'static str = "project_manager.conversation.started";

    fn same_content(&self, cmd: &StartConversation) -> bool {
        self.actor_ids == cmd.actor_ids
            && self.title == cmd.title
            && self.external_id == cmd.external_id
            && self.external_source == cmd.external_source
            && self.status == cmd.status
            && self.organization == cmd.organization
    }
}

/// The facts of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConversationEvent {
    /// `project_manager.conversation.started`
    ConversationStarted(ConversationStarted),
    /// `project_manager.conversation.forgotten`
    ConversationForgotten(Forgotten),
}

impl DomainEvent for ConversationEvent {
    fn event_type(&self) -> String {
        match self {
            Self::ConversationStarted(_) => ConversationStarted::NAME,
            Self::ConversationForgotten(_) => CONVERSATION_FORGOTTEN,
        }
        .into()
    }
    fn event_version(&self) -> String {
        EVENT_VERSION.into()
    }
}

/// The Conversation aggregate; its state is its start and whether it was forgotten.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Conversation {
    started: Option<ConversationStarted>,
    forgotten: Option<Forgotten>,
}

impl Conversation {
    /// The most participants a conversation starts with (TRUST.md "The boundary"): each
    /// is looked up, and a 1 MiB body of ids would otherwise be 25,000 lookups.
    pub const MAX_ACTORS: usize = 100;
}

impl Aggregate for Conversation {
    const TYPE: &'static str = "conversation";
    type Command = ConversationCommand;
    type Event = ConversationEvent;
    type Error = DomainError;
    type Services = Services;

    async fn handle(
        &mut self,
        cmd: ConversationCommand,
        services: &Services,
        sink: &EventSink<Self>,
    ) -> Result<(), DomainError> {
        let cmd = match cmd {
            ConversationCommand::Start(cmd) => cmd,
            ConversationCommand::Forget { id, now } => {
                // Precondition: only a started conversation is forgotten; invariant: once.
                if self.started.is_none() {
                    return Err(DomainError::ConversationNotFound(id));
                }
                if self.forgotten.is_none() {
                    let fact = Forgotten {
                        id,
                        forgotten_at: now,
                    };
                    sink.write(ConversationEvent::ConversationForgotten(fact), self)
                        .await;
                }
                return Ok(());
            }
        };
        // Invariant: a conversation is created at most once per id; an identical retry
        // is a no-op (never of a forgotten one: its texts are gone).
        if let Some(existing) = &self.started {
            return if self.forgotten.is_none() && existing.same_content(&cmd) {
                Ok(())
            } else {
                Err(DomainError::ConversationExists(existing.id))
            };
        }
        if cmd.actor_ids.is_empty() {
            return Err(DomainError::validation(
                "actor_ids",
                "needs at least one actor",
            ));
        }
        if cmd.actor_ids.len() > Self::MAX_ACTORS {
            return Err(DomainError::validation(
                "actor_ids",
                format!("at most {} actors", Self::MAX_ACTORS),
            ));
        }
        services
            .require_actors(cmd.actor_ids.iter().copied())
            .await?;
        let fact = ConversationStarted {
            id: cmd.id,
            actor_ids: cmd.actor_ids,
            title: cmd.title,
            external_id: cmd.external_id,
            external_source: cmd.external_source,
            status: cmd.status,
            organization: cmd.organization,
            created_at: cmd.now,
            updated_at: cmd.now,
        };
        sink.write(ConversationEvent::ConversationStarted(fact), self)
            .await;
        Ok(())
    }

    fn apply(&mut self, event: ConversationEvent) {
        match event {
            ConversationEvent::ConversationStarted(fact) => self.started = Some(fact),
            ConversationEvent::ConversationForgotten(fact) => self.forgotten = Some(fact),
        }
    }
}

impl PmAggregate for Conversation {
    fn creation(&self) -> Option<ConversationEvent> {
        self.started
            .clone()
            .map(ConversationEvent::ConversationStarted)
    }
    fn repeated(&self, command: &ConversationCommand) -> Option<ConversationEvent> {
        match command {
            ConversationCommand::Start(_) => self.creation(),
            ConversationCommand::Forget { .. } => self
                .forgotten
                .clone()
                .map(ConversationEvent::ConversationForgotten),
        }
    }
    fn conversation_id(&self) -> Option<Uuid> {
        self.started.as_ref().map(|s| s.id)
    }
    fn lookup_entity(&self) -> Option<crate::lookup::Entity> {
        self.started
            .as_ref()
            .map(|_| crate::lookup::Entity::Conversation)
    }
}

#[cfg(test)]
mod tests;
