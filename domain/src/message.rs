//! The Message aggregate: transition `MessageAdded`.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{DomainError, Label, NonEmptyText, PmAggregate, Services, EVENT_VERSION};

/// Command: add a message to a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct AddMessage {
    /// The message's id (UUIDv5 of conversation and `external_identity` when given).
    pub id: Uuid,
    /// The conversation (must exist).
    pub conversation_id: Uuid,
    /// The author (must be registered).
    pub actor_id: Uuid,
    /// The text.
    pub content: NonEmptyText,
    /// The task the message is about (must be a task of this conversation).
    pub task_id: Option<Uuid>,
    /// The message's identity in an external system.
    pub external_identity: Option<Label>,
    /// When the message was written, if the caller knows; else the server time.
    pub time: Option<DateTime<Utc>>,
    /// Server time.
    pub now: DateTime<Utc>,
}

/// Fact `project_manager.message.added`; also the Message entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MessageAdded {
    /// The message's id.
    pub id: Uuid,
    /// When it was written.
    #[serde(with = "crate::time")]
    pub time: DateTime<Utc>,
    /// The author.
    pub actor_id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// The task it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// The text.
    pub content: NonEmptyText,
    /// Its identity in an external system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_identity: Option<Label>,
}

impl MessageAdded {
    /// The fact's name.
    pub const NAME: &'static str = "project_manager.message.added";

    fn same_content(&self, cmd: &AddMessage) -> bool {
        self.conversation_id == cmd.conversation_id
            && self.actor_id == cmd.actor_id
            && self.content == cmd.content
            && self.task_id == cmd.task_id
            && self.external_identity == cmd.external_identity
            && cmd.time.is_none_or(|t| t == self.time)
    }
}

/// The facts of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageEvent {
    /// `project_manager.message.added`
    MessageAdded(MessageAdded),
}

impl DomainEvent for MessageEvent {
    fn event_type(&self) -> String {
        MessageAdded::NAME.into()
    }
    fn event_version(&self) -> String {
        EVENT_VERSION.into()
    }
}

/// The Message aggregate; immutable once created.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Message {
    added: Option<MessageAdded>,
}

impl Aggregate for Message {
    const TYPE: &'static str = "message";
    type Command = AddMessage;
    type Event = MessageEvent;
    type Error = DomainError;
    type Services = Services;

    async fn handle(
        &mut self,
        cmd: AddMessage,
        services: &Services,
        sink: &EventSink<Self>,
    ) -> Result<(), DomainError> {
        // Invariant: messages are immutable once created; an identical retry is a no-op.
        if let Some(existing) = &self.added {
            return if existing.same_content(&cmd) {
                Ok(())
            } else {
                Err(DomainError::AlreadyExists {
                    entity: Self::TYPE,
                    id: existing.id,
                })
            };
        }
        services.require_conversation(cmd.conversation_id).await?;
        services.require_actors([cmd.actor_id]).await?;
        if let Some(task_id) = cmd.task_id {
            let task = services.lookup.task(task_id).await?;
            if task.is_none_or(|t| t.conversation_id != cmd.conversation_id) {
                return Err(DomainError::MessageTaskNotFound(task_id));
            }
        }
        let fact = MessageAdded {
            id: cmd.id,
            time: cmd.time.unwrap_or(cmd.now),
            actor_id: cmd.actor_id,
            conversation_id: cmd.conversation_id,
            task_id: cmd.task_id,
            content: cmd.content,
            external_identity: cmd.external_identity,
        };
        sink.write(MessageEvent::MessageAdded(fact), self).await;
        Ok(())
    }

    fn apply(&mut self, event: MessageEvent) {
        match event {
            MessageEvent::MessageAdded(fact) => self.added = Some(fact),
        }
    }
}

impl PmAggregate for Message {
    fn creation(&self) -> Option<MessageEvent> {
        self.added.clone().map(MessageEvent::MessageAdded)
    }
    fn conversation_id(&self) -> Option<Uuid> {
        self.added.as_ref().map(|m| m.conversation_id)
    }
}

#[cfg(test)]
mod tests;
