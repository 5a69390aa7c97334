//! The Actor aggregate: a human or AI participant. TRANSITIONS.md needs actors to exist
//! (MessageAdded) but PRIMITIVES.md is unavailable, so the service adds the transition
//! `ActorRegistered` with the fact `project_manager.actor.registered`, and forgetting
//! (`project_manager.actor.forgotten`, TRUST.md "Forgetting a person").

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::forgetting::{Forgotten, ACTOR_FORGOTTEN};
use crate::types::ActorKind;
use crate::{DomainError, Label, NonEmptyText, PmAggregate, Services, EVENT_VERSION};

/// Command: register an actor.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisterActor {
    /// The actor's id (UUIDv5 of `external_identity` when given, else UUIDv7).
    pub id: Uuid,
    /// Human or AI.
    pub kind: ActorKind,
    /// The name shown for the actor.
    pub display_name: NonEmptyText,
    /// The actor's identity in an external system, if any.
    pub external_identity: Option<Label>,
    /// Server time.
    pub now: DateTime<Utc>,
}

/// The commands of an actor.
#[derive(Debug, Clone, PartialEq)]
pub enum ActorCommand {
    /// Register it.
    Register(RegisterActor),
    /// Forget it: its name and identity, and what it wrote, can never be read again.
    Forget {
        /// The actor.
        id: Uuid,
        /// Server time.
        now: DateTime<Utc>,
    },
}

/// Fact `project_manager.actor.registered`; also the Actor entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ActorRegistered {
    /// The actor's id.
    pub id: Uuid,
    /// Human or AI.
    pub kind: ActorKind,
    /// The name shown for the actor.
    pub display_name: NonEmptyText,
    /// The actor's identity in an external system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_identity: Option<Label>,
    /// When the actor was registered.
    #[serde(with = "crate::time")]
    pub created_at: DateTime<Utc>,
}

impl ActorRegistered {
    /// The fact's name.
    pub const NAME: &'static str = "project_manager.actor.registered";
}

/// The facts of an actor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ActorEvent {
    /// `project_manager.actor.registered`
    ActorRegistered(ActorRegistered),
    /// `project_manager.actor.forgotten`
    ActorForgotten(Forgotten),
}

impl DomainEvent for ActorEvent {
    fn event_type(&self) -> String {
        match self {
            Self::ActorRegistered(_) => ActorRegistered::NAME,
            Self::ActorForgotten(_) => ACTOR_FORGOTTEN,
        }
        .into()
    }
    fn event_version(&self) -> String {
        EVENT_VERSION.into()
    }
}

/// The Actor aggregate; its state is its registration and whether it was forgotten.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Actor {
    registered: Option<ActorRegistered>,
    forgotten: Option<Forgotten>,
}

impl Actor {
    fn register(&self, cmd: RegisterActor) -> Result<Option<ActorEvent>, DomainError> {
        if let Some(existing) = &self.registered {
            let same = self.forgotten.is_none()
                && existing.kind == cmd.kind
                && existing.display_name == cmd.display_name
                && existing.external_identity == cmd.external_identity;
            // A forgotten actor's texts are gone: no registration repeats them.
            return if same {
                Ok(None)
            } else {
                Err(DomainError::AlreadyExists {
                    entity: Self::TYPE,
                    id: existing.id,
                })
            };
        }
        Ok(Some(ActorEvent::ActorRegistered(ActorRegistered {
            id: cmd.id,
            kind: cmd.kind,
            display_name: cmd.display_name,
            external_identity: cmd.external_identity,
            created_at: cmd.now,
        })))
    }

    fn forget(&self, id: Uuid, now: DateTime<Utc>) -> Result<Option<ActorEvent>, DomainError> {
        // Precondition: only a registered actor is forgotten; invariant: once.
        if self.registered.is_none() {
            return Err(DomainError::ActorNotFound(id));
        }
        if self.forgotten.is_some() {
            return Ok(None);
        }
        Ok(Some(ActorEvent::ActorForgotten(Forgotten {
            id,
            forgotten_at: now,
        })))
    }
}

impl Aggregate for Actor {
    const TYPE: &'static str = "actor";
    type Command = ActorCommand;
    type Event = ActorEvent;
    type Error = DomainError;
    type Services = Services;

    async fn handle(
        &mut self,
        cmd: ActorCommand,
        _services: &Services,
        sink: &EventSink<Self>,
    ) -> Result<(), DomainError> {
        let fact = match cmd {
            ActorCommand::Register(cmd) => self.register(cmd)?,
            ActorCommand::Forget { id, now } => self.forget(id, now)?,
        };
        if let Some(fact) = fact {
            sink.write(fact, self).await;
        }
        Ok(())
    }

    fn apply(&mut self, event: ActorEvent) {
        match event {
            ActorEvent::ActorRegistered(fact) => self.registered = Some(fact),
            ActorEvent::ActorForgotten(fact) => self.forgotten = Some(fact),
        }
    }
}

impl PmAggregate for Actor {
    fn creation(&self) -> Option<ActorEvent> {
        self.registered.clone().map(ActorEvent::ActorRegistered)
    }
    fn repeated(&self, command: &ActorCommand) -> Option<ActorEvent> {
        match command {
            ActorCommand::Register(_) => self.creation(),
            ActorCommand::Forget { .. } => self.forgotten.clone().map(ActorEvent::ActorForgotten),
        }
    }
    fn conversation_id(&self) -> Option<Uuid> {
        None
    }
    fn lookup_entity(&self) -> Option<crate::lookup::Entity> {
        self.registered
            .as_ref()
            .map(|fact| crate::lookup::Entity::Actor(fact.kind))
    }
}

#[cfg(test)]
mod tests;
