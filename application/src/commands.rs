//! One method per use case of the command API. Each mints the target id (UUIDv7, or UUIDv5
//! from an external identity so retried deliveries land on the same id), stamps the
//! server time, and runs one domain command through the [`CommandBus`]. The inputs are
//! the request bodies of API.md (wire types, in `pm_api_types::commands`): the HTTP layer
//! deserializes them directly, so a field that breaks its type's rule (an empty title) is
//! rejected naming the field.

use std::sync::Arc;

use pm_domain::actor::{Actor, ActorCommand, ActorEvent, ActorRegistered, RegisterActor};
use pm_domain::checkpoint::{
    CheckpointEvent, ConversationCheckpoint, ConversationCheckpointCreated,
    CreateConversationCheckpoint,
};
use pm_domain::conversation::{
    Conversation, ConversationCommand, ConversationEvent, ConversationStarted, StartConversation,
};
use pm_domain::message::{AddMessage, Message, MessageAdded, MessageEvent};
use pm_domain::task::{
    CreateTask, CreateTaskCheckpoint, Task, TaskCheckpointCreated, TaskCommand, TaskCreated,
    TaskEvent,
};
use pm_domain::tool_policy::ToolPolicy;
use pm_domain::types::TaskCheckpointType;
use pm_domain::{ids, Label};
use uuid::Uuid;

use crate::bus::{AggregateStore, CommandBus, CommandContext, Ending, Load, Outcome};
use crate::clock::Clock;
use crate::AppError;

pub use pm_api_types::commands::{
    AddMessageInput, CreateConversationCheckpointInput, CreateTaskCheckpointInput, CreateTaskInput,
    RegisterActorInput, StartConversationInput, ToolPolicyInput,
};

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
    + AggregateStore<ToolPolicy>
{
}

impl<S> CommandStore for S where
    S: AggregateStore<Actor>
        + AggregateStore<Conversation>
        + AggregateStore<ConversationCheckpoint>
        + AggregateStore<Task>
        + AggregateStore<Message>
        + AggregateStore<ToolPolicy>
{
}

/// The entity of an outcome, or an internal error when the aggregate emitted a fact of
/// another kind than the use case creates (a bug).
fn expect<E, T>(
    outcome: Outcome<E>,
    f: impl FnOnce(E) -> Option<T>,
) -> Result<Outcome<T>, AppError> {
    outcome
        .try_map(f)
        .ok_or_else(|| AppError::Internal("the aggregate emitted an unexpected fact".into()))
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
    #[tracing::instrument(skip_all, fields(role = %ctx.role, correlation_id = %ctx.correlation_id))]
    pub async fn register_actor(
        &self,
        input: RegisterActorInput,
        ctx: &CommandContext,
    ) -> Result<Outcome<ActorRegistered>, AppError> {
        let id = input
            .external_identity
            .as_ref()
            .map_or_else(Uuid::now_v7, |e| ids::actor_id(e.as_str()));
        let now = self.clock.now();
        let cmd = RegisterActor {
            id,
            kind: input.kind,
            display_name: input.display_name,
            external_identity: input.external_identity,
            now,
        };
        let outcome = self
            .bus
            .execute::<Actor>(id, Load::AssumeNew, ActorCommand::Register(cmd), ctx, now)
            .await?;
        expect(outcome, |e| match e {
            ActorEvent::ActorRegistered(f) => Some(f),
            ActorEvent::ActorForgotten(_) => None,
        })
    }

    /// `ConversationStarted`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    #[tracing::instrument(skip_all, fields(role = %ctx.role, correlation_id = %ctx.correlation_id))]
    pub async fn start_conversation(
        &self,
        input: StartConversationInput,
        ctx: &CommandContext,
    ) -> Result<Outcome<ConversationStarted>, AppError> {
        ctx.scope
            .may_start(input.organization.as_ref().map(Label::as_str))?;
        let id = match (&input.external_source, &input.external_id) {
            (Some(source), Some(external)) => {
                ids::conversation_id(source.as_str(), external.as_str())
            }
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
            .execute::<Conversation>(
                id,
                Load::AssumeNew,
                ConversationCommand::Start(cmd),
                ctx,
                now,
            )
            .await?;
        expect(outcome, |e| match e {
            ConversationEvent::ConversationStarted(f) => Some(f),
            ConversationEvent::ConversationForgotten(_) => None,
        })
    }

    /// `ConversationCheckpointCreated`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    #[tracing::instrument(skip_all, fields(role = %ctx.role, correlation_id = %ctx.correlation_id))]
    pub async fn create_conversation_checkpoint(
        &self,
        conversation_id: Uuid,
        input: CreateConversationCheckpointInput,
        ctx: &CommandContext,
    ) -> Result<Outcome<ConversationCheckpointCreated>, AppError> {
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
            .execute::<ConversationCheckpoint>(
                id,
                Load::AssumeNew,
                cmd,
                &ctx.ending(Ending::ConversationTurn),
                now,
            )
            .await?;
        expect(
            outcome,
            |CheckpointEvent::ConversationCheckpointCreated(f)| Some(f),
        )
    }

    /// `TaskCreated`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    #[tracing::instrument(skip_all, fields(role = %ctx.role, correlation_id = %ctx.correlation_id))]
    pub async fn create_task(
        &self,
        conversation_id: Uuid,
        input: CreateTaskInput,
        ctx: &CommandContext,
    ) -> Result<Outcome<TaskCreated>, AppError> {
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
        let outcome = self
            .bus
            .execute::<Task>(id, Load::AssumeNew, cmd, ctx, now)
            .await?;
        expect(outcome, |e| match e {
            TaskEvent::TaskCreated(f) => Some(f),
            TaskEvent::TaskCheckpointCreated(_) => None,
        })
    }

    /// `TaskCheckpointCreated`.
    ///
    /// # Errors
    /// See [`CommandBus::execute`].
    #[tracing::instrument(skip_all, fields(role = %ctx.role, correlation_id = %ctx.correlation_id))]
    pub async fn create_task_checkpoint(
        &self,
        task_id: Uuid,
        input: CreateTaskCheckpointInput,
        ctx: &CommandContext,
    ) -> Result<Outcome<TaskCheckpointCreated>, AppError> {
        let id = Uuid::now_v7();
        let now = self.clock.now();
        let ends_turn = matches!(
            input.checkpoint_type,
            TaskCheckpointType::WorkCompleted | TaskCheckpointType::WorkPaused
        );
        let cmd = TaskCommand::CreateTaskCheckpoint(CreateTaskCheckpoint {
            id,
            task_id,
            checkpoint_type: input.checkpoint_type,
            now,
        });
        let ctx = if ends_turn {
            &ctx.ending(Ending::TaskTurn(task_id))
        } else {
            ctx
        };
        let outcome = self
            .bus
            .execute::<Task>(task_id, Load::Read, cmd, ctx, now)
            .await?;
        expect(outcome, |e| match e {
            TaskEvent::TaskCheckpointCreated(f) => Some(f),
            TaskEvent::TaskCreated(_) => None,
        })
    }

    /// `MessageAdded`, once the caller may speak as its `actor_id`
    /// ([`crate::speaker::may_speak_as`]).
    ///
    /// # Errors
    /// [`AppError::ActorForbidden`] (nothing written); see [`CommandBus::execute`].
    #[tracing::instrument(skip_all, fields(role = %ctx.role, correlation_id = %ctx.correlation_id))]
    pub async fn add_message(
        &self,
        conversation_id: Uuid,
        input: AddMessageInput,
        ctx: &CommandContext,
    ) -> Result<Outcome<MessageAdded>, AppError> {
        crate::speaker::require_voice(&*self.bus.services().lookup, input.actor_id, ctx).await?;
        let id = input
            .external_identity
            .as_ref()
            .map_or_else(Uuid::now_v7, |e| {
                ids::message_id(conversation_id, e.as_str())
            });
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
        let outcome = self
            .bus
            .execute::<Message>(id, Load::AssumeNew, cmd, ctx, now)
            .await?;
        expect(outcome, |MessageEvent::MessageAdded(f)| Some(f))
    }
}

mod forgetting;
mod tool_policies;
