//! The domain's [`Lookup`] port over the event store. An entity's creation fact is the
//! first event of its stream, so every lookup is one primary-key read of `sequence = 1`.
//! Entities never change or disappear once created, so positive answers are remembered
//! (bounded) and only "does not exist" goes to the database every time — a command still
//! sees every command acknowledged before it. A turn's actor (for who a fenced command may
//! speak as) is read from the saga rows, which commit with the runes they derive from.

use std::sync::Arc;

use async_trait::async_trait;
use cqrs_es::Aggregate;
use pm_application::fact::Fact;
use pm_domain::actor::Actor;
use pm_domain::checkpoint::ConversationCheckpoint;
use pm_domain::conversation::Conversation;
use pm_domain::lookup::TurnInfo;
use pm_domain::task::Task;
use pm_domain::types::ActorKind;
use pm_domain::{CheckpointInfo, Entity, Lookup, LookupError, TaskInfo};
use serde_json::Value;
use uuid::Uuid;

use crate::db::Args;
use crate::Database;

/// The bounded memory of entities known to exist, shared by the store (which learns
/// from its own commits) and the lookup.
#[derive(Debug)]
pub struct KnownEntities {
    map: quick_cache::sync::Cache<(&'static str, Uuid), Entity>,
}

impl KnownEntities {
    /// Remembers at most `capacity` entities (at least 16); past it the least recently
    /// used are forgotten.
    pub fn new(capacity: usize) -> Self {
        Self {
            map: quick_cache::sync::Cache::new(capacity.max(16)),
        }
    }

    /// Learns that entity `id` exists.
    pub fn learn(&self, id: Uuid, entity: Entity) {
        self.map.insert((entity.aggregate_type(), id), entity);
    }

    fn get(&self, aggregate_type: &'static str, id: Uuid) -> Option<Entity> {
        self.map.get(&(aggregate_type, id))
    }
}

/// The [`Lookup`] over the event store.
#[derive(Debug, Clone)]
pub struct StoreLookup {
    db: Database,
    known: Arc<KnownEntities>,
    turns: Arc<quick_cache::sync::Cache<Uuid, TurnInfo>>,
}

/// How many turns' actors are remembered.
const TURNS_REMEMBERED: usize = 10_000;

/// The actor of a turn's agent (`$1` turn); no row when the turn does not exist.
const TURN_ACTOR: &str = "SELECT a.actor_id FROM saga_turns t \
     JOIN saga_agents a ON a.id = t.agent_id WHERE t.id = $1";

impl StoreLookup {
    /// A lookup reading `db`, remembering in `known`.
    pub fn new(db: Database, known: Arc<KnownEntities>) -> Self {
        Self {
            db,
            known,
            turns: Arc::new(quick_cache::sync::Cache::new(TURNS_REMEMBERED)),
        }
    }

    /// Remembers the actor of a turn this replica has just handed to a worker, so that
    /// the worker's fenced commands are checked without a read (a turn's agent, and the
    /// actor it acts for, never change).
    pub fn learn_turn(&self, id: Uuid, info: TurnInfo) {
        self.turns.insert(id, info);
    }

    async fn find(
        &self,
        aggregate_type: &'static str,
        id: Uuid,
    ) -> Result<Option<Entity>, LookupError> {
        if let Some(known) = self.known.get(aggregate_type, id) {
            return Ok(Some(known));
        }
        let key = id.to_string();
        let row = self
            .db
            .fetch_optional(
                "SELECT event_type, payload FROM events \
                 WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence = 1",
                Args::new().text(aggregate_type).text(key.as_str()),
            )
            .await
            .map_err(|e| LookupError(e.to_string()))?;
        let row = row
            .map(|r| Ok::<_, sqlx::Error>((r.string("event_type")?, r.string("payload")?)))
            .transpose()
            .map_err(|e| LookupError(e.to_string()))?;
        let Some((event_type, payload)) = row else {
            return Ok(None);
        };
        let corrupt =
            |e: &dyn std::fmt::Display| LookupError(format!("corrupt creation fact of {key}: {e}"));
        // What a lookup tells (kinds, ids) is the history's shape: no text is opened.
        let payload =
            crate::keys::sealing::shape_only(&event_type, &payload).map_err(|e| corrupt(&e))?;
        let payload: Value = serde_json::from_str(&payload).map_err(|e| corrupt(&e))?;
        let entity = Fact::parse(&event_type, &payload)
            .map_err(|e| corrupt(&e))?
            .lookup_entity();
        if let Some(entity) = entity {
            self.known.learn(id, entity);
        }
        Ok(entity)
    }
}

#[async_trait]
impl Lookup for StoreLookup {
    async fn conversation_exists(&self, id: Uuid) -> Result<bool, LookupError> {
        Ok(matches!(
            self.find(Conversation::TYPE, id).await?,
            Some(Entity::Conversation)
        ))
    }

    async fn actor_kind(&self, id: Uuid) -> Result<Option<ActorKind>, LookupError> {
        Ok(match self.find(Actor::TYPE, id).await? {
            Some(Entity::Actor(kind)) => Some(kind),
            _ => None,
        })
    }

    async fn checkpoint(&self, id: Uuid) -> Result<Option<CheckpointInfo>, LookupError> {
        Ok(match self.find(ConversationCheckpoint::TYPE, id).await? {
            Some(Entity::Checkpoint(info)) => Some(info),
            _ => None,
        })
    }

    async fn task(&self, id: Uuid) -> Result<Option<TaskInfo>, LookupError> {
        Ok(match self.find(Task::TYPE, id).await? {
            Some(Entity::Task(info)) => Some(info),
            _ => None,
        })
    }

    async fn turn(&self, id: Uuid) -> Result<Option<TurnInfo>, LookupError> {
        if let Some(known) = self.turns.get(&id) {
            return Ok(Some(known));
        }
        let row = self
            .db
            .fetch_optional(TURN_ACTOR, Args::new().uuid(id))
            .await
            .map_err(|e| LookupError(e.to_string()))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let actor_id = row
            .opt_uuid("actor_id")
            .map_err(|e| LookupError(e.to_string()))?;
        let info = TurnInfo { actor_id };
        self.turns.insert(id, info);
        Ok(Some(info))
    }
}
