//! The event store behind the command bus: a cqrs-es [`EventStore`] for every
//! project-manager aggregate.
//!
//! - **Loads** go through the crates' repositories (postgres-es / sqlite-es
//!   `PersistedEventRepository::get_events`) and fold the events with `Aggregate::apply`
//!   (the plain event store: never the snapshot store, which double-applies in 0.5.0).
//! - **Appends** go through the log's one [`Appender`]: one statement per command
//!   (postgres-es issues BEGIN, one INSERT per event and COMMIT), gathered by group commit
//!   on PostgreSQL, returning each fact's log position. The primary key
//!   `(aggregate_type, aggregate_id, sequence)` is the optimistic lock: a lost race is
//!   `AggregateConflict`, which the bus retries.
//! - **Per-aggregate serialization in-process**: a command holds its aggregate's slot
//!   lock from load to commit, so commands of one replica never race each other on one
//!   aggregate; races only remain between replicas, where the primary key decides.
//! - **Recently used aggregates stay in memory** (the slot), valid because every write to
//!   the aggregate through this process updates it and a write by another replica makes
//!   our next append conflict, which clears the slot. The slots are a bounded cache
//!   ([`Slots`]) that drops the least recently used idle ones when full.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use cqrs_es::persist::{PersistedEventRepository, SerializedEvent};
use cqrs_es::{
    Aggregate, AggregateContext, AggregateError, DomainEvent, EventEnvelope, EventStore,
};
use pm_application::bus::{AggregateStore, AppendFailure, EventMetadata, Fence, Load};
use pm_application::idempotency::IdempotencyKey;
use pm_application::log::LogPosition;
use pm_application::slots::{Held, Slots};
use pm_domain::{DomainError, PmAggregate};
use postgres_es::PostgresEventRepository;
use sqlite_es::SqliteEventRepository;
use uuid::Uuid;

use crate::append::{Appender, NewEvent};
use crate::keys::sealing::{Place, Unreadable};
use crate::lookup::KnownEntities;
use crate::Database;
use pm_domain::personal::personal_fields;

type StoreResult<T> = Result<T, AggregateError<DomainError>>;

/// What a slot remembers of an aggregate.
struct Cached {
    state: Box<dyn Any + Send + Sync>,
    version: usize,
    /// The forgettings heard of when the state was read ([`crate::keys::KeyStore::forgettings`]):
    /// a state read before a forgetting may hold its texts, and is read again.
    heard: u64,
}

/// One aggregate's lock and cached state.
#[derive(Default)]
pub struct Slot(Option<Cached>);

/// The aggregate context of [`PmStore`]: the state, its version, and the aggregate's
/// slot lock, held until commit (or until the context is dropped).
pub struct PmContext<A> {
    aggregate_id: String,
    aggregate: A,
    version: usize,
    heard: u64,
    slot: Held<Slot>,
}

impl<A: Aggregate> AggregateContext<A> for PmContext<A> {
    fn aggregate(&mut self) -> &mut A {
        &mut self.aggregate
    }
}

enum Repository {
    Postgres(PostgresEventRepository),
    Sqlite(SqliteEventRepository),
}

struct Inner {
    appender: Appender,
    repository: Repository,
    slots: Slots<(&'static str, String), Slot>,
    known: Arc<KnownEntities>,
}

/// The project-manager event store over PostgreSQL or SQLite. Cheap to clone.
#[derive(Clone)]
pub struct PmStore {
    inner: Arc<Inner>,
}

impl PmStore {
    /// A store over `db` that appends through `appender`, keeps at most about
    /// `slot_capacity` aggregates in memory (least recently used dropped first), and tells `known` about every created
    /// entity.
    pub fn new(
        db: &Database,
        appender: Appender,
        slot_capacity: usize,
        known: Arc<KnownEntities>,
    ) -> Self {
        let repository = match db {
            Database::Postgres(pool) => {
                Repository::Postgres(PostgresEventRepository::new(pool.clone()))
            }
            Database::Sqlite(pool) => Repository::Sqlite(SqliteEventRepository::new(pool.clone())),
        };
        Self {
            inner: Arc::new(Inner {
                appender,
                repository,
                slots: Slots::new(slot_capacity),
                known,
            }),
        }
    }

    async fn lock_slot<A: PmAggregate>(&self, aggregate_id: &str) -> Held<Slot> {
        self.inner
            .slots
            .hold(&(A::TYPE, aggregate_id.to_string()))
            .await
    }

    async fn read_events<A: PmAggregate>(
        &self,
        aggregate_id: &str,
    ) -> StoreResult<Vec<EventEnvelope<A>>> {
        let serialized = match &self.inner.repository {
            Repository::Postgres(repo) => repo.get_events::<A>(aggregate_id).await,
            Repository::Sqlite(repo) => repo.get_events::<A>(aggregate_id).await,
        }
        .map_err(|e| AggregateError::DatabaseConnectionError(Box::new(e)))?;
        let mut events = Vec::with_capacity(serialized.len());
        for mut event in serialized {
            self.open(&mut event).await?;
            events.push(envelope::<A>(event)?);
        }
        Ok(events)
    }

    /// Opens `event`'s sealed texts for its aggregate's state: one that cannot be read (its
    /// party forgotten) holds a stand-in, which the aggregate never shows.
    async fn open(&self, event: &mut SerializedEvent) -> StoreResult<()> {
        if personal_fields(&event.event_type).is_empty() {
            return Ok(());
        }
        let place = Place {
            event_type: &event.event_type,
            aggregate_type: &event.aggregate_type,
            aggregate_id: &event.aggregate_id,
            sequence: i64::try_from(event.sequence).unwrap_or(i64::MAX),
            conversation_id: None,
        };
        self.inner
            .appender
            .keys()
            .open_payload(&place, &mut event.payload, Unreadable::StandIn)
            .await
            .map_err(|e| AggregateError::DatabaseConnectionError(Box::new(e)))?;
        Ok(())
    }

    async fn load<A: PmAggregate>(
        &self,
        aggregate_id: &str,
        load: Load,
    ) -> StoreResult<PmContext<A>> {
        let mut slot = self.lock_slot::<A>(aggregate_id).await;
        let heard = self.inner.appender.keys().forgettings();
        if let Some(cached) = slot.0.as_ref().filter(|c| c.heard == heard) {
            if let Some(state) = cached.state.downcast_ref::<A>() {
                return Ok(PmContext {
                    aggregate_id: aggregate_id.to_string(),
                    aggregate: state.clone(),
                    version: cached.version,
                    heard,
                    slot,
                });
            }
        }
        let (aggregate, version) = if load == Load::AssumeNew {
            (A::default(), 0)
        } else {
            let events = self.read_events::<A>(aggregate_id).await?;
            let version = events.last().map_or(0, |e| e.sequence);
            let mut aggregate = A::default();
            for event in events {
                aggregate.apply(event.payload);
            }
            if version > 0 {
                slot.0 = Some(Cached {
                    state: Box::new(aggregate.clone()),
                    version,
                    heard,
                });
            }
            (aggregate, version)
        };
        Ok(PmContext {
            aggregate_id: aggregate_id.to_string(),
            aggregate,
            version,
            heard,
            slot,
        })
    }
}

fn envelope<A: Aggregate>(event: SerializedEvent) -> StoreResult<EventEnvelope<A>> {
    let payload = serde_json::from_value(event.payload)
        .map_err(|e| AggregateError::DeserializationError(Box::new(e)))?;
    // cqrs-es's metadata is text; ours also holds numbers (a fenced fact's `turn_epoch`).
    let metadata: serde_json::Map<String, serde_json::Value> =
        serde_json::from_value(event.metadata)
            .map_err(|e| AggregateError::DeserializationError(Box::new(e)))?;
    let metadata: HashMap<String, String> = metadata
        .into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => (k, s),
            other => (k, other.to_string()),
        })
        .collect();
    Ok(EventEnvelope {
        aggregate_id: event.aggregate_id,
        sequence: event.sequence,
        payload,
        metadata,
    })
}

impl<A: PmAggregate> EventStore<A> for PmStore {
    type AC = PmContext<A>;

    async fn load_events(&self, aggregate_id: &str) -> StoreResult<Vec<EventEnvelope<A>>> {
        self.read_events::<A>(aggregate_id).await
    }

    async fn load_aggregate(&self, aggregate_id: &str) -> StoreResult<PmContext<A>> {
        self.load::<A>(aggregate_id, Load::Read).await
    }

    async fn commit(
        &self,
        events: Vec<A::Event>,
        context: PmContext<A>,
        metadata: HashMap<String, String>,
    ) -> StoreResult<Vec<EventEnvelope<A>>> {
        let aggregate_id = context.aggregate_id.clone();
        let version = context.version;
        let json = serde_json::to_value(&metadata).map_err(unexpected)?;
        self.append_events(&events, context, json, None, None)
            .await
            .map_err(aggregate_error)?;
        Ok(events
            .into_iter()
            .enumerate()
            .map(|(i, payload)| EventEnvelope {
                aggregate_id: aggregate_id.clone(),
                sequence: version + i + 1,
                payload,
                metadata: metadata.clone(),
            })
            .collect())
    }
}

fn unexpected(e: impl std::error::Error + Send + Sync + 'static) -> AggregateError<DomainError> {
    AggregateError::UnexpectedError(Box::new(e))
}

impl PmStore {
    /// Appends `events` after the context's version through the appender; updates the slot
    /// and the known entities.
    async fn append_events<A: PmAggregate>(
        &self,
        events: &[A::Event],
        context: PmContext<A>,
        metadata: serde_json::Value,
        key: Option<&IdempotencyKey>,
        fence: Option<&Fence>,
    ) -> Result<Vec<LogPosition>, AppendFailure> {
        let PmContext {
            aggregate_id,
            aggregate,
            version,
            heard,
            mut slot,
        } = context;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let conversation_id = aggregate.conversation_id();
        let metadata = metadata.to_string();
        let mut rows = Vec::with_capacity(events.len());
        for (i, event) in events.iter().enumerate() {
            rows.push(NewEvent {
                aggregate_type: A::TYPE,
                aggregate_id: aggregate_id.clone(),
                sequence: (version + i + 1) as i64,
                event_type: event.event_type(),
                event_version: event.event_version(),
                payload: serde_json::to_string(event)
                    .map_err(|e| AppendFailure::Other(e.to_string()))?,
                metadata: metadata.clone(),
                conversation_id,
            });
        }
        let types: Vec<String> = rows.iter().map(|r| r.event_type.clone()).collect();
        let positions = match self.inner.appender.append(rows, key, fence).await {
            Ok(positions) => positions,
            Err(e) => {
                // Whatever happened, our picture of the aggregate may be stale now.
                slot.0 = None;
                return Err(e);
            }
        };
        if version == 0 {
            if let (Some(entity), Ok(id)) =
                (aggregate.lookup_entity(), aggregate_id.parse::<Uuid>())
            {
                self.inner.known.learn(id, entity);
            }
        }
        slot.0 = Some(Cached {
            state: Box::new(aggregate),
            version: version + events.len(),
            heard,
        });
        drop(slot);
        for event_type in types {
            metrics::counter!("pm_facts_appended_total", "type" => event_type).increment(1);
        }
        Ok(positions)
    }
}

/// An append's failure in cqrs-es's terms, for [`EventStore::commit`] (which carries no
/// key, so a taken key cannot happen there).
fn aggregate_error(e: AppendFailure) -> AggregateError<DomainError> {
    match e {
        AppendFailure::Conflict => AggregateError::AggregateConflict,
        AppendFailure::Unavailable(e) => AggregateError::DatabaseConnectionError(e.into()),
        AppendFailure::KeyTaken
        | AppendFailure::Fenced(_)
        | AppendFailure::TurnNotFound
        | AppendFailure::Other(_) => AggregateError::UnexpectedError(e.to_string().into()),
    }
}

impl<A: PmAggregate> AggregateStore<A> for PmStore {
    async fn load_with(&self, aggregate_id: &str, load: Load) -> StoreResult<PmContext<A>> {
        self.load::<A>(aggregate_id, load).await
    }

    async fn append(
        &self,
        events: Vec<A::Event>,
        context: PmContext<A>,
        metadata: &EventMetadata,
        key: Option<&IdempotencyKey>,
        fence: Option<&Fence>,
    ) -> Result<Vec<LogPosition>, AppendFailure> {
        let json =
            serde_json::to_value(metadata).map_err(|e| AppendFailure::Other(e.to_string()))?;
        self.append_events(&events, context, json, key, fence).await
    }
}
