//! The command bus: load → handle → commit through a cqrs-es [`EventStore`], with a
//! bounded retry when a command loses an optimistic-concurrency race (cqrs-es does not
//! retry `AggregateConflict` itself).
//!
//! The bus stands in for `CqrsFramework::execute`, which runs the same three steps but
//! throws the committed events away; the API needs them (the created entity, the log
//! position for `X-Event-Position`) and needs the retry.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use cqrs_es::event_sink::EventSink;
use cqrs_es::{AggregateContext, AggregateError, EventStore};
use pm_domain::{DomainError, PmAggregate, Services};
use serde_json::Value;
use uuid::Uuid;

use crate::log::LogPosition;
use crate::AppError;

/// The metadata key under which a store reports a committed event's log position.
pub const POSITION_KEY: &str = "position";

/// What the bus needs of an event store beyond cqrs-es's [`EventStore`].
pub trait AggregateStore<A: PmAggregate>: EventStore<A> {
    /// Like [`EventStore::load_aggregate`], but when the store knows nothing of the
    /// aggregate it may assume it is new instead of reading: for ids just minted or
    /// derived by the caller. A wrong assumption is caught at commit as
    /// `AggregateConflict`, and the bus then retries with a real load.
    fn load_presumed_new(
        &self,
        aggregate_id: &str,
    ) -> impl Future<Output = Result<Self::AC, AggregateError<DomainError>>> + Send;
}

/// Who is asking, and why: becomes the facts' metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandContext {
    /// Ties together everything one request caused.
    pub correlation_id: String,
    /// The position or id of what caused this command, if anything did.
    pub causation_id: Option<String>,
    /// The authenticated caller's role (`ingress`, `llm`, `admin`, ...).
    pub role: String,
}

/// What a command did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A new fact was committed.
    Created {
        /// The created entity (the fact's payload).
        entity: Value,
        /// The fact's position in the global log.
        position: LogPosition,
    },
    /// The command repeated an existing entity exactly; no fact was written.
    Existing {
        /// The existing entity.
        entity: Value,
    },
}

impl Outcome {
    /// The entity, created or existing.
    pub fn entity(&self) -> &Value {
        match self {
            Self::Created { entity, .. } | Self::Existing { entity } => entity,
        }
    }
}

/// Runs commands against aggregates in a store.
pub struct CommandBus<S> {
    store: S,
    services: Services,
    max_attempts: u32,
}

impl<S> CommandBus<S> {
    /// A bus over `store`, giving aggregates `services`, trying each command at most
    /// `max_attempts` times (at least once).
    pub fn new(store: S, services: Services, max_attempts: u32) -> Self {
        Self {
            store,
            services,
            max_attempts: max_attempts.max(1),
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Handles `command` on aggregate `id` and commits what it emits.
    ///
    /// `presume_new` tells the store the id was just minted or derived, so it may skip
    /// reading an empty stream (see [`AggregateStore::load_presumed_new`]).
    ///
    /// # Errors
    /// [`AppError::Domain`] when a rule rejects the command (nothing is written),
    /// [`AppError::ConcurrencyConflict`] when every attempt lost a race, and
    /// [`AppError::Unavailable`]/[`AppError::Internal`] for store failures.
    pub async fn execute<A>(
        &self,
        id: Uuid,
        presume_new: bool,
        command: A::Command,
        ctx: &CommandContext,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Outcome, AppError>
    where
        A: PmAggregate,
        A::Command: Clone + Send + Sync,
        S: AggregateStore<A>,
    {
        let aggregate_id = id.to_string();
        for attempt in 1..=self.max_attempts {
            let mut context = if presume_new && attempt == 1 {
                self.store.load_presumed_new(&aggregate_id).await
            } else {
                self.store.load_aggregate(&aggregate_id).await
            }
            .map_err(store_error)?;
            let sink = EventSink::default();
            context
                .aggregate()
                .handle(command.clone(), &self.services, &sink)
                .await?;
            let events = sink.collect().await;
            let Some(first) = events.first() else {
                let entity = context.aggregate().entity().ok_or_else(|| {
                    AppError::Internal(format!(
                        "{} {id} emitted nothing and has no entity",
                        A::TYPE
                    ))
                })?;
                return Ok(Outcome::Existing { entity });
            };
            let entity = serde_json::to_value(first)
                .map_err(|e| AppError::Internal(format!("fact does not serialize: {e}")))?;
            match self.store.commit(events, context, metadata(ctx, now)).await {
                Ok(committed) => {
                    let position = committed
                        .last()
                        .and_then(|e| e.metadata.get(POSITION_KEY))
                        .and_then(|p| p.parse().ok())
                        .ok_or_else(|| AppError::Internal("store reported no position".into()))?;
                    return Ok(Outcome::Created { entity, position });
                }
                Err(AggregateError::AggregateConflict) => {
                    metrics::counter!("pm_command_conflicts_total", "aggregate" => A::TYPE)
                        .increment(1);
                    tracing::debug!(aggregate = A::TYPE, %id, attempt, "optimistic conflict, retrying");
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(e) => return Err(store_error(e)),
            }
        }
        Err(AppError::ConcurrencyConflict {
            attempts: self.max_attempts,
        })
    }
}

fn metadata(ctx: &CommandContext, now: chrono::DateTime<chrono::Utc>) -> HashMap<String, String> {
    let mut m = HashMap::with_capacity(4);
    m.insert("correlation_id".into(), ctx.correlation_id.clone());
    if let Some(causation) = &ctx.causation_id {
        m.insert("causation_id".into(), causation.clone());
    }
    m.insert("role".into(), ctx.role.clone());
    m.insert("recorded_at".into(), pm_domain::time::format(&now));
    m
}

/// A short, growing pause with jitter so racing writers spread out.
fn backoff(attempt: u32) -> Duration {
    let jitter = u64::from(Uuid::new_v4().as_u128() as u8 % 8);
    Duration::from_millis((1u64 << attempt.min(6)) + jitter)
}

fn store_error(e: AggregateError<DomainError>) -> AppError {
    match e {
        AggregateError::UserError(e) => AppError::Domain(e),
        AggregateError::AggregateConflict => AppError::ConcurrencyConflict { attempts: 1 },
        AggregateError::DatabaseConnectionError(e) => AppError::Unavailable(e.to_string()),
        AggregateError::DeserializationError(e) | AggregateError::UnexpectedError(e) => {
            AppError::Internal(e.to_string())
        }
    }
}
