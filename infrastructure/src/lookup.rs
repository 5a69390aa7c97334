//! The domain's [`Lookup`] port over the event store. An entity's creation fact is the
//! first event of its stream, so every lookup is one primary-key read of `sequence = 1`.
//! Entities never change or disappear once created, so positive answers are remembered
//! (bounded) and only "does not exist" goes to the database every time — a command still
//! sees every command acknowledged before it.

use std::sync::Arc;

use async_trait::async_trait;
use dashmap::DashMap;
use pm_domain::types::CheckpointType;
use pm_domain::{CheckpointInfo, Lookup, LookupError, TaskInfo};
use serde_json::Value;
use uuid::Uuid;

use crate::{on_db, Database};

/// What is known to exist, learned from creation facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// A started conversation.
    Conversation,
    /// A registered actor.
    Actor,
    /// A conversation checkpoint.
    Checkpoint(CheckpointInfo),
    /// A task.
    Task(TaskInfo),
}

impl Known {
    /// The aggregate type whose creation fact tells this.
    pub fn aggregate_type(&self) -> &'static str {
        match self {
            Self::Conversation => "conversation",
            Self::Actor => "actor",
            Self::Checkpoint(_) => "conversation_checkpoint",
            Self::Task(_) => "task",
        }
    }

    /// What a creation fact tells, if it is one.
    pub fn from_fact(event_type: &str, payload: &Value) -> Option<Self> {
        let uuid = |field: &str| payload.get(field)?.as_str()?.parse::<Uuid>().ok();
        match event_type {
            "project_manager.conversation.started" => Some(Self::Conversation),
            "project_manager.actor.registered" => Some(Self::Actor),
            "project_manager.conversation.checkpoint.created" => {
                Some(Self::Checkpoint(CheckpointInfo {
                    conversation_id: uuid("conversation_id")?,
                    checkpoint_type: CheckpointType::parse(
                        payload.get("checkpoint_type")?.as_str()?,
                    )?,
                }))
            }
            "project_manager.task.created" => Some(Self::Task(TaskInfo {
                conversation_id: uuid("conversation_id")?,
            })),
            _ => None,
        }
    }
}

/// The bounded memory of entities known to exist, shared by the store (which learns
/// from its own commits) and the lookup.
#[derive(Debug)]
pub struct KnownEntities {
    map: DashMap<(&'static str, Uuid), Known>,
    capacity: usize,
}

impl KnownEntities {
    /// Remembers at most `capacity` entities.
    pub fn new(capacity: usize) -> Self {
        Self {
            map: DashMap::new(),
            capacity,
        }
    }

    /// Learns from a committed creation fact.
    pub fn learn(&self, id: Uuid, event_type: &str, payload: &Value) {
        if let Some(known) = Known::from_fact(event_type, payload) {
            if self.map.len() >= self.capacity {
                self.map.clear();
            }
            self.map.insert((known.aggregate_type(), id), known);
        }
    }

    fn get(&self, aggregate_type: &'static str, id: Uuid) -> Option<Known> {
        self.map.get(&(aggregate_type, id)).map(|k| *k)
    }
}

/// The [`Lookup`] over the event store.
#[derive(Debug, Clone)]
pub struct StoreLookup {
    db: Database,
    known: Arc<KnownEntities>,
}

impl StoreLookup {
    /// A lookup reading `db`, remembering in `known`.
    pub fn new(db: Database, known: Arc<KnownEntities>) -> Self {
        Self { db, known }
    }

    async fn find(
        &self,
        aggregate_type: &'static str,
        id: Uuid,
    ) -> Result<Option<Known>, LookupError> {
        if let Some(known) = self.known.get(aggregate_type, id) {
            return Ok(Some(known));
        }
        let key = id.to_string();
        let row: Option<(String, String)> = on_db!(&self.db, d, pool, {
            sqlx::query_as(&d.sql(
                "SELECT event_type, payload::text FROM events \
                 WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence = 1",
            ))
            .bind(aggregate_type)
            .bind(&key)
            .fetch_optional(pool)
            .await
        })
        .map_err(|e| LookupError(e.to_string()))?;
        let row = row
            .map(|(t, p)| serde_json::from_str::<Value>(&p).map(|p| (t, p)))
            .transpose()
            .map_err(|e| LookupError(format!("corrupt payload of {key}: {e}")))?;
        Ok(row.and_then(|(event_type, payload)| {
            self.known.learn(id, &event_type, &payload);
            Known::from_fact(&event_type, &payload)
        }))
    }
}

#[async_trait]
impl Lookup for StoreLookup {
    async fn conversation_exists(&self, id: Uuid) -> Result<bool, LookupError> {
        Ok(matches!(
            self.find("conversation", id).await?,
            Some(Known::Conversation)
        ))
    }

    async fn actor_exists(&self, id: Uuid) -> Result<bool, LookupError> {
        Ok(matches!(self.find("actor", id).await?, Some(Known::Actor)))
    }

    async fn checkpoint(&self, id: Uuid) -> Result<Option<CheckpointInfo>, LookupError> {
        Ok(match self.find("conversation_checkpoint", id).await? {
            Some(Known::Checkpoint(info)) => Some(info),
            _ => None,
        })
    }

    async fn task(&self, id: Uuid) -> Result<Option<TaskInfo>, LookupError> {
        Ok(match self.find("task", id).await? {
            Some(Known::Task(info)) => Some(info),
            _ => None,
        })
    }
}
