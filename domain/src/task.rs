//! The Task aggregate: transitions `TaskCreated` and `TaskCheckpointCreated`. A task's
//! checkpoints are events of the task's own stream, so their order is the task's event
//! order and "the most recent checkpoint" never depends on clocks.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::types::{CheckpointType, TaskCheckpointType, TaskStatus};
use crate::{DomainError, NonEmptyText, PmAggregate, Services, EVENT_VERSION};

/// Command: create a task after a `BEGIN_WORK` checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTask {
    /// The task's id (UUIDv7).
    pub id: Uuid,
    /// The conversation (must exist).
    pub conversation_id: Uuid,
    /// The `BEGIN_WORK` checkpoint of that conversation the task comes from.
    pub checkpoint_id: Uuid,
    /// What is to be done.
    pub instructions: NonEmptyText,
    /// The actor the task is assigned to (must be registered).
    pub assigned_to: Option<Uuid>,
    /// Server time.
    pub now: DateTime<Utc>,
}

/// Command: record progress on a task.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTaskCheckpoint {
    /// The task checkpoint's id (UUIDv7).
    pub id: Uuid,
    /// The task (must exist; it is the aggregate the command goes to).
    pub task_id: Uuid,
    /// The kind of progress.
    pub checkpoint_type: TaskCheckpointType,
    /// Server time.
    pub now: DateTime<Utc>,
}

/// The commands of a task.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskCommand {
    /// `TaskCreated`
    CreateTask(CreateTask),
    /// `TaskCheckpointCreated`
    CreateTaskCheckpoint(CreateTaskCheckpoint),
}

/// Fact `project_manager.task.created`; also the Task entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskCreated {
    /// The task's id.
    pub id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// The `BEGIN_WORK` checkpoint it comes from.
    pub checkpoint_id: Uuid,
    /// What is to be done.
    pub instructions: NonEmptyText,
    /// The assignee.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned_to: Option<Uuid>,
    /// When it was created.
    #[serde(with = "crate::time")]
    pub created_at: DateTime<Utc>,
}

/// Fact `project_manager.task.checkpoint.created`; also the TaskCheckpoint entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskCheckpointCreated {
    /// The task checkpoint's id.
    pub id: Uuid,
    /// Its task.
    pub task_id: Uuid,
    /// The kind of progress.
    #[serde(rename = "type")]
    pub checkpoint_type: TaskCheckpointType,
    /// When it was recorded.
    #[serde(with = "crate::time")]
    pub created_at: DateTime<Utc>,
}

impl TaskCreated {
    /// The fact's name.
    pub const NAME: &'static str = "project_manager.task.created";
}

impl TaskCheckpointCreated {
    /// The fact's name.
    pub const NAME: &'static str = "project_manager.task.checkpoint.created";
}

/// The facts of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TaskEvent {
    /// `project_manager.task.created`
    TaskCreated(TaskCreated),
    /// `project_manager.task.checkpoint.created`
    TaskCheckpointCreated(TaskCheckpointCreated),
}

impl DomainEvent for TaskEvent {
    fn event_type(&self) -> String {
        match self {
            Self::TaskCreated(_) => TaskCreated::NAME,
            Self::TaskCheckpointCreated(_) => TaskCheckpointCreated::NAME,
        }
        .into()
    }
    fn event_version(&self) -> String {
        EVENT_VERSION.into()
    }
}

/// The Task aggregate: the task and the latest of its checkpoints.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Task {
    created: Option<TaskCreated>,
    checkpoint_count: u64,
    latest: Option<TaskCheckpointType>,
}

impl Task {
    /// The task's derived status: its latest checkpoint's type, or `NOT_STARTED`.
    pub fn status(&self) -> TaskStatus {
        TaskStatus::from(self.latest)
    }

    /// How many checkpoints the task has.
    pub fn checkpoint_count(&self) -> u64 {
        self.checkpoint_count
    }

    async fn create(
        &mut self,
        cmd: CreateTask,
        services: &Services,
        sink: &EventSink<Self>,
    ) -> Result<(), DomainError> {
        // Invariant: tasks are immutable once created.
        if let Some(existing) = &self.created {
            let same = existing.conversation_id == cmd.conversation_id
                && existing.checkpoint_id == cmd.checkpoint_id
                && existing.instructions == cmd.instructions
                && existing.assigned_to == cmd.assigned_to;
            return if same {
                Ok(())
            } else {
                Err(DomainError::AlreadyExists {
                    entity: Self::TYPE,
                    id: existing.id,
                })
            };
        }
        services.require_conversation(cmd.conversation_id).await?;
        let checkpoint = services
            .lookup
            .checkpoint(cmd.checkpoint_id)
            .await?
            .ok_or(DomainError::CheckpointNotFound(cmd.checkpoint_id))?;
        if checkpoint.conversation_id != cmd.conversation_id {
            return Err(DomainError::CheckpointConversationMismatch(
                cmd.checkpoint_id,
            ));
        }
        if checkpoint.checkpoint_type != CheckpointType::BeginWork {
            return Err(DomainError::CheckpointNotBeginWork(cmd.checkpoint_id));
        }
        services.require_actors(cmd.assigned_to).await?;
        let fact = TaskCreated {
            id: cmd.id,
            conversation_id: cmd.conversation_id,
            checkpoint_id: cmd.checkpoint_id,
            instructions: cmd.instructions,
            assigned_to: cmd.assigned_to,
            created_at: cmd.now,
        };
        sink.write(TaskEvent::TaskCreated(fact), self).await;
        Ok(())
    }

    async fn checkpoint(
        &mut self,
        cmd: CreateTaskCheckpoint,
        sink: &EventSink<Self>,
    ) -> Result<(), DomainError> {
        if self.created.is_none() {
            return Err(DomainError::TaskNotFound(cmd.task_id));
        }
        let fact = TaskCheckpointCreated {
            id: cmd.id,
            task_id: cmd.task_id,
            checkpoint_type: cmd.checkpoint_type,
            created_at: cmd.now,
        };
        sink.write(TaskEvent::TaskCheckpointCreated(fact), self)
            .await;
        Ok(())
    }
}

impl Aggregate for Task {
    const TYPE: &'static str = "task";
    type Command = TaskCommand;
    type Event = TaskEvent;
    type Error = DomainError;
    type Services = Services;

    async fn handle(
        &mut self,
        cmd: TaskCommand,
        services: &Services,
        sink: &EventSink<Self>,
    ) -> Result<(), DomainError> {
        match cmd {
            TaskCommand::CreateTask(cmd) => self.create(cmd, services, sink).await,
            TaskCommand::CreateTaskCheckpoint(cmd) => self.checkpoint(cmd, sink).await,
        }
    }

    fn apply(&mut self, event: TaskEvent) {
        match event {
            TaskEvent::TaskCreated(fact) => self.created = Some(fact),
            TaskEvent::TaskCheckpointCreated(fact) => {
                self.checkpoint_count += 1;
                self.latest = Some(fact.checkpoint_type);
            }
        }
    }
}

impl PmAggregate for Task {
    fn creation(&self) -> Option<TaskEvent> {
        self.created.clone().map(TaskEvent::TaskCreated)
    }
    fn conversation_id(&self) -> Option<Uuid> {
        self.created.as_ref().map(|t| t.conversation_id)
    }
    fn lookup_entity(&self) -> Option<crate::lookup::Entity> {
        self.created.as_ref().map(|t| {
            crate::lookup::Entity::Task(crate::TaskInfo {
                conversation_id: t.conversation_id,
            })
        })
    }
}

#[cfg(test)]
mod tests;
