//! One method per use case of the command API. Each mints the target id (UUIDv7, or UUIDv5
//! from an external identity so retried deliveries land on the same id), stamps the
//! server time, and runs one domain command through the [`CommandBus`].

use std::sync::Arc;

use chrono::{DateTime, Utc};
use pm_domain::actor::{Actor, RegisterActor};
use pm_domain::checkpoint::{ConversationCheckpoint, CreateConversationCheckpoint};
use pm_domain::conversation::{Conversation, StartConversation};
use pm_domain::message::{AddMessage, Message};
use pm_domain::task::{CreateTask, CreateTaskCheckpoint, Task, TaskCommand};
use pm_domain::types::{ActorKind, CheckpointType, TaskCheckpointType};
use pm_domain::{ids, NonEmptyText};
use uuid::Uuid;

use crate::bus::{AggregateStore, CommandBus, CommandContext, Outcome};
use crate::clock::Clock;
use crate::AppError;

/// Input of `POST /v1/actors`.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisterActorInput {
    /// Human or AI.
    pub kind: ActorKind,
    /// The name shown.
    pub display_name: NonEmptyText,
    /// Identity in an external system; makes the id derived.
    pub external_identity: Option<String>,
}

/// Input of `POST /v1/conversations`.
#[derive(Debug, Clone, PartialEq)]
pub struct StartConversationInput {
    /// Participating actors.
    pub actor_ids: Vec<Uuid>,
    /// Title.
    pub title: NonEmptyText,
    /// Id in the external source.
    pub external_id: Option<String>,
    /// External source.
    pub external_source: Option<String>,
    /// Status given by the ingress.
    pub status: Option<String>,
    /// Organization.
    pub organization: Option<String>,
}

/// Input of `POST /v1/conversations/{id}/checkpoints`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateCheckpointInput {
    /// Checkpoint type.
    pub checkpoint_type: CheckpointType,
    /// Summary.
    pub summary: NonEmptyText,
}

/// Input of `POST /v1/conversations/{id}/tasks`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTaskInput {
    /// The BEGIN_WORK checkpoint.
    pub checkpoint_id: Uuid,
    /// Instructions.
    pub instructions: NonEmptyText,
    /// Assignee.
    pub assigned_to: Option<Uuid>,
}

/// Input of `POST /v1/conversations/{id}/messages`.
#[derive(Debug, Clone, PartialEq)]
pub struct AddMessageInput {
    /// Author.
    pub actor_id: Uuid,
    /// Text.
    pub content: NonEmptyText,
    /// Related task.
    pub task_id: Option<Uuid>,
    /// Identity in an external system; makes the id derived.
    pub external_identity: Option<String>,
    /// When it was written.
    pub time: Option<DateTime<Utc>>,
}

/// The answer of a command use case.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandResult {
    /// Created or existing, with the entity.
    pub outcome: Outcome,
    /// The path of the entity (the `Location` header).
    pub location: String,
}

/// The command use cases.
pub struct Commands<S> {
    bus: CommandBus<S>,
    clock: Arc<dyn Clock>,
}

/// The store every command use case needs.
pub trait CommandStore:
    AggregateStore<Actor>
    + AggregateStore<Conversation>
    + AggregateStore<ConversationCheckpoint>
    + AggregateStore<Task>
    + AggregateStore<Message>
{
}

impl<S> CommandStore for S where
    S: AggregateStore<Actor>
        + AggregateStore<Conversation>
        + AggregateStore<ConversationCheckpoint>
        + AggregateStore<Task>
        + AggregateStore<Message>
{
}

impl<S: CommandStore> Commands<S> {
    /// The use cases over a bus and a clock.
    pub fn new(bus: CommandBus<S>, clock: Arc<dyn Clock>) -> Self {
        Self { bus, clock }
    }

    /// The bus.
    pub fn bus(&self) -> &CommandBus<S> {
        &self.bus
    }

    /// `ActorRegistered`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    pub async fn register_actor(
        &self,
        input: RegisterActorInput,
        ctx: &CommandContext,
    ) -> Result<CommandResult, AppError> {
        let id = input
            .external_identity
            .as_deref()
            .map_or_else(Uuid::now_v7, ids::actor_id);
        let now = self.clock.now();
        let cmd = RegisterActor {
            id,
            kind: input.kind,
            display_name: input.display_name,
            external_identity: input.external_identity,
            now,
        };
        let outcome = self.bus.execute::<Actor>(id, true, cmd, ctx, now).await?;
        Ok(CommandResult {
            outcome,
            location: format!("/v1/actors/{id}"),
        })
    }

    /// `ConversationStarted`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    pub async fn start_conversation(
        &self,
        input: StartConversationInput,
        ctx: &CommandContext,
    ) -> Result<CommandResult, AppError> {
        let id = match (&input.external_source, &input.external_id) {
            (Some(source), Some(external)) => ids::conversation_id(source, external),
            _ => Uuid::now_v7(),
        };
        let now = self.clock.now();
        let cmd = StartConversation {
            id,
            actor_ids: input.actor_ids,
            title: input.title,
            external_id: input.external_id,
            external_source: input.external_source,
            status: input.status,
            organization: input.organization,
            now,
        };
        let outcome = self
            .bus
            .execute::<Conversation>(id, true, cmd, ctx, now)
            .await?;
        Ok(CommandResult {
            outcome,
            location: format!("/v1/conversations/{id}"),
        })
    }

    /// `ConversationCheckpointCreated`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    pub async fn create_checkpoint(
        &self,
        conversation_id: Uuid,
        input: CreateCheckpointInput,
        ctx: &CommandContext,
    ) -> Result<CommandResult, AppError> {
        let id = Uuid::now_v7();
        let now = self.clock.now();
        let cmd = CreateConversationCheckpoint {
            id,
            conversation_id,
            checkpoint_type: input.checkpoint_type,
            summary: input.summary,
            now,
        };
        let outcome = self
            .bus
            .execute::<ConversationCheckpoint>(id, true, cmd, ctx, now)
            .await?;
        Ok(CommandResult {
            outcome,
            location: format!("/v1/conversations/{conversation_id}/checkpoints/{id}"),
        })
    }

    /// `TaskCreated`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    pub async fn create_task(
        &self,
        conversation_id: Uuid,
        input: CreateTaskInput,
        ctx: &CommandContext,
    ) -> Result<CommandResult, AppError> {
        let id = Uuid::now_v7();
        let now = self.clock.now();
        let cmd = TaskCommand::CreateTask(CreateTask {
            id,
            conversation_id,
            checkpoint_id: input.checkpoint_id,
            instructions: input.instructions,
            assigned_to: input.assigned_to,
            now,
        });
        let outcome = self.bus.execute::<Task>(id, true, cmd, ctx, now).await?;
        Ok(CommandResult {
            outcome,
            location: format!("/v1/tasks/{id}"),
        })
    }

    /// `TaskCheckpointCreated`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    pub async fn create_task_checkpoint(
        &self,
        task_id: Uuid,
        checkpoint_type: TaskCheckpointType,
        ctx: &CommandContext,
    ) -> Result<CommandResult, AppError> {
        let id = Uuid::now_v7();
        let now = self.clock.now();
        let cmd = TaskCommand::CreateTaskCheckpoint(CreateTaskCheckpoint {
            id,
            task_id,
            checkpoint_type,
            now,
        });
        let outcome = self
            .bus
            .execute::<Task>(task_id, false, cmd, ctx, now)
            .await?;
        Ok(CommandResult {
            outcome,
            location: format!("/v1/tasks/{task_id}/checkpoints/{id}"),
        })
    }

    /// `MessageAdded`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    pub async fn add_message(
        &self,
        conversation_id: Uuid,
        input: AddMessageInput,
        ctx: &CommandContext,
    ) -> Result<CommandResult, AppError> {
        let id = input
            .external_identity
            .as_deref()
            .map_or_else(Uuid::now_v7, |e| ids::message_id(conversation_id, e));
        let now = self.clock.now();
        let cmd = AddMessage {
            id,
            conversation_id,
            actor_id: input.actor_id,
            content: input.content,
            task_id: input.task_id,
            external_identity: input.external_identity,
            time: input.time.map(pm_domain::time::truncate),
            now,
        };
        let outcome = self.bus.execute::<Message>(id, true, cmd, ctx, now).await?;
        Ok(CommandResult {
            outcome,
            location: format!("/v1/conversations/{conversation_id}/messages/{id}"),
        })
    }
}
