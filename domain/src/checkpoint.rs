//! The ConversationCheckpoint aggregate: transition `ConversationCheckpointCreated`.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::types::CheckpointType;
use crate::{DomainError, NonEmptyText, PmAggregate, Services, EVENT_VERSION};

/// Command: record a decision for a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateConversationCheckpoint {
    /// The checkpoint's id (UUIDv7).
    pub id: Uuid,
    /// The conversation it belongs to (must exist).
    pub conversation_id: Uuid,
    /// One of the supported checkpoint types.
    pub checkpoint_type: CheckpointType,
    /// LLM-optimized representation of the conversation state.
    pub summary: NonEmptyText,
    /// Server time.
    pub now: DateTime<Utc>,
}

/// Fact `project_manager.conversation.checkpoint.created`; also the checkpoint entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConversationCheckpointCreated {
    /// The checkpoint's id.
    pub id: Uuid,
    /// The conversation it belongs to.
    pub conversation_id: Uuid,
    /// Its type.
    pub checkpoint_type: CheckpointType,
    /// LLM-optimized representation of the conversation state.
    pub summary: NonEmptyText,
    /// When it was recorded.
    #[serde(with = "crate::time")]
    pub created_at: DateTime<Utc>,
}

impl ConversationCheckpointCreated {
    /// The fact's name.
    pub const NAME: &'static str = "project_manager.conversation.checkpoint.created";
}

/// The facts of a conversation checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CheckpointEvent {
    /// `project_manager.conversation.checkpoint.created`
    ConversationCheckpointCreated(ConversationCheckpointCreated),
}

impl DomainEvent for CheckpointEvent {
    fn event_type(&self) -> String {
        ConversationCheckpointCreated::NAME.into()
    }
    fn event_version(&self) -> String {
        EVENT_VERSION.into()
    }
}

/// The ConversationCheckpoint aggregate; immutable once created.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConversationCheckpoint {
    created: Option<ConversationCheckpointCreated>,
}

impl Aggregate for ConversationCheckpoint {
    const TYPE: &'static str = "conversation_checkpoint";
    type Command = CreateConversationCheckpoint;
    type Event = CheckpointEvent;
    type Error = DomainError;
    type Services = Services;

    async fn handle(
        &mut self,
        cmd: CreateConversationCheckpoint,
        services: &Services,
        sink: &EventSink<Self>,
    ) -> Result<(), DomainError> {
        // Invariant: checkpoints are immutable once created.
        if let Some(existing) = &self.created {
            let same = existing.conversation_id == cmd.conversation_id
                && existing.checkpoint_type == cmd.checkpoint_type
                && existing.summary == cmd.summary;
            return if same {
                Ok(())
            } else {
                Err(DomainError::AlreadyExists {
                    entity: "checkpoint",
                    id: existing.id,
                })
            };
        }
        services.require_conversation(cmd.conversation_id).await?;
        let fact = ConversationCheckpointCreated {
            id: cmd.id,
            conversation_id: cmd.conversation_id,
            checkpoint_type: cmd.checkpoint_type,
            summary: cmd.summary,
            created_at: cmd.now,
        };
        sink.write(CheckpointEvent::ConversationCheckpointCreated(fact), self)
            .await;
        Ok(())
    }

    fn apply(&mut self, event: CheckpointEvent) {
        match event {
            CheckpointEvent::ConversationCheckpointCreated(fact) => self.created = Some(fact),
        }
    }
}

impl PmAggregate for ConversationCheckpoint {
    fn creation(&self) -> Option<CheckpointEvent> {
        self.created
            .clone()
            .map(CheckpointEvent::ConversationCheckpointCreated)
    }
    fn conversation_id(&self) -> Option<Uuid> {
        self.created.as_ref().map(|c| c.conversation_id)
    }
    fn lookup_entity(&self) -> Option<crate::lookup::Entity> {
        self.created.as_ref().map(|c| {
            crate::lookup::Entity::Checkpoint(crate::CheckpointInfo {
                conversation_id: c.conversation_id,
                checkpoint_type: c.checkpoint_type,
            })
        })
    }
}

#[cfg(test)]
mod tests;
