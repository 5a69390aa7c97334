//! A conversation as the read model shows it.

use chrono::{DateTime, Utc};
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::types::{CheckpointType, TaskStatus};
use pm_domain::NonEmptyText;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `GET /v1/conversations/{id}`: the conversation's fact (its `updated_at` is the server
/// time of the latest fact belonging to it), its latest checkpoint and its counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConversationView {
    /// The conversation.
    #[serde(flatten)]
    pub conversation: ConversationStarted,
    /// Its most recent checkpoint in log order, or null.
    pub latest_checkpoint: Option<LatestCheckpoint>,
    /// How many checkpoints it has.
    pub checkpoint_count: i64,
    /// How many messages it has.
    pub message_count: i64,
    /// How many tasks it has.
    pub task_count: i64,
    /// Its tasks by derived status (every status, zeros included).
    pub task_counts: TaskCounts,
}

/// A conversation's latest checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LatestCheckpoint {
    /// The checkpoint's id.
    pub id: Uuid,
    /// Its type.
    pub checkpoint_type: CheckpointType,
    /// Its summary.
    pub summary: NonEmptyText,
    /// When it was recorded.
    #[serde(with = "pm_domain::time")]
    pub created_at: DateTime<Utc>,
}

impl From<&ConversationCheckpointCreated> for LatestCheckpoint {
    fn from(c: &ConversationCheckpointCreated) -> Self {
        Self {
            id: c.id,
            checkpoint_type: c.checkpoint_type,
            summary: c.summary.clone(),
            created_at: c.created_at,
        }
    }
}

/// Task counts by status, serialized as `{"NOT_STARTED": n, "WORK_STARTED": n, …}` with
/// every status of [`TaskStatus::all`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskCounts(pub [i64; TaskStatus::COUNT]);

impl TaskCounts {
    /// The count of `status`.
    pub fn get(&self, status: TaskStatus) -> i64 {
        self.0[status.index()]
    }

    /// Adds `n` to the count of `status`.
    pub fn add(&mut self, status: TaskStatus, n: i64) {
        self.0[status.index()] += n;
    }

    /// The sum of all counts.
    pub fn total(&self) -> i64 {
        self.0.iter().sum()
    }
}

impl Serialize for TaskCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(TaskStatus::COUNT))?;
        for status in TaskStatus::all() {
            map.serialize_entry(status.as_str(), &self.get(status))?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for TaskCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = std::collections::HashMap::<String, i64>::deserialize(d)?;
        let mut counts = Self::default();
        for (status, n) in map {
            let status = TaskStatus::parse(&status).ok_or_else(|| {
                serde::de::Error::custom(format!("unknown task status {status:?}"))
            })?;
            counts.add(status, n);
        }
        Ok(counts)
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for TaskCounts {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let mut object = ObjectBuilder::new()
            .description(Some("Tasks by derived status, every status included"))
            .additional_properties(Some(
                utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
            ));
        for status in TaskStatus::all() {
            let count = ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                    utoipa::openapi::KnownFormat::Int64,
                )))
                .minimum(Some(0));
            object = object
                .property(status.as_str(), count)
                .required(status.as_str());
        }
        object.into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for TaskCounts {}
