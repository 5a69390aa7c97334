//! A task as the read model shows it: its fact plus its derived status.

use chrono::{DateTime, Utc};
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use pm_domain::types::TaskStatus;
use serde::{Deserialize, Serialize};

/// A task with its derived status (lists, and the base of [`TaskDetail`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskView {
    /// The task.
    #[serde(flatten)]
    pub task: TaskCreated,
    /// Its conversation's organization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// The type of its most recent checkpoint (task event order), or `NOT_STARTED`.
    pub status: TaskStatus,
    /// When the status last changed; null while `NOT_STARTED`.
    #[serde(with = "opt_time")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<DateTime<Utc>>))]
    pub status_changed_at: Option<DateTime<Utc>>,
    /// How many checkpoints it has.
    pub checkpoint_count: i64,
}

/// `GET /v1/tasks/{id}`: the task and its checkpoint history in the task's event order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskDetail {
    /// The task.
    #[serde(flatten)]
    pub task: TaskView,
    /// Its checkpoints, oldest first.
    pub checkpoints: Vec<TaskCheckpointView>,
}

/// A task checkpoint with its place in the task's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskCheckpointView {
    /// The checkpoint.
    #[serde(flatten)]
    pub checkpoint: TaskCheckpointCreated,
    /// Its sequence in the task's stream (the task's creation is 1).
    pub sequence: i64,
}

/// An optional RFC 3339 time that is serialized as `null` when absent.
pub(crate) use pm_domain::time::opt as opt_time;
