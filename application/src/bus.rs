//! The command bus: load → handle → commit through the project's [`AggregateStore`], with
//! a bounded retry when a command loses an optimistic-concurrency race (cqrs-es does not
//! retry `AggregateConflict` itself).
//!
//! The bus stands in for `CqrsFramework::execute`, which runs the same three steps but
//! throws the committed events away; the API needs them (the created entity, the log
//! position for `X-Event-Position`) and needs the retry.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{AggregateContext, AggregateError, EventStore};
use pm_domain::{DomainError, PmAggregate, Services};
use uuid::Uuid;

use crate::idempotency::IdempotencyKey;
use crate::log::LogPosition;
use crate::trace::genai::{self, SpanSink};
use crate::AppError;

/// How the store should load an aggregate for a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// Read its stream (or use the store's memory of it).
    Read,
    /// The id was just minted or derived by the caller, so the aggregate is almost surely
    /// new: the store may skip reading an empty stream. A wrong guess is caught at commit
    /// as `AggregateConflict`, and the bus then retries with [`Load::Read`].
    AssumeNew,
}

/// What every fact of a command records besides its payload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EventMetadata {
    /// Ties together everything one request caused.
    pub correlation_id: String,
    /// The position or id of what caused the command, if anything did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
    /// The authenticated caller's role.
    pub role: String,
    /// Who caused it: the authenticated principal's name, or `system` for what the
    /// service writes on its own — the audit trail names a caller, not only its role
    /// (TRUST.md "The log says who").
    pub principal: String,
    /// The server time of the command.
    #[serde(with = "pm_domain::time")]
    pub recorded_at: DateTime<Utc>,
    /// The worker's claim a fenced command acted for (WORKERS.md): `turn_id` and
    /// `turn_epoch` in the stored metadata, CloudEvent extensions `turnid`, `turnepoch`.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnRef>,
    /// The trace of what caused it (issue 34): `traceparent` and `tracestate` in the
    /// stored metadata, CloudEvent extensions of the same names.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::TraceContext>,
}

/// A turn and the epoch of a claim on it: what `PM-Turn-Id` and `PM-Turn-Epoch` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TurnRef {
    /// The turn.
    pub turn_id: Uuid,
    /// The claim's epoch.
    pub turn_epoch: i64,
}

/// A command fenced by a worker's claim (WORKERS.md "Fencing"): it is written only while
/// the claim holds the turn — checked in the transaction that appends it, against the
/// lease row an expiry or an interrupt removes — and otherwise refused (`409 turn_fenced`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    /// The claim.
    pub turn: TurnRef,
    /// Whether the command ends its turn when it is the turn's kind (a conversation
    /// checkpoint a conversation turn; `WORK_COMPLETED`/`WORK_PAUSED` of the task a task
    /// turn): then the lease ends in the same transaction, so an interrupt racing it loses.
    pub ends: Option<Ending>,
    /// The time the lease must be live at.
    pub now: DateTime<Utc>,
}

/// Which turns a fenced command ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A conversation turn (a conversation checkpoint).
    ConversationTurn,
    /// The task turn of this task (`WORK_COMPLETED`, `WORK_PAUSED`).
    TaskTurn(Uuid),
}

/// Why an append wrote nothing, typed so that the bus (and the `Idempotency-Key` use case
/// above it) decide on it by matching — never by downcasting a boxed cqrs-es error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendFailure {
    /// Another writer took the stream's sequence first: reload and retry.
    #[error("a stream's sequence is taken")]
    Conflict,
    /// The command's unclaimed `Idempotency-Key` already has a row (another request with
    /// the key ran or runs): nothing was written.
    #[error("the Idempotency-Key already has a record")]
    KeyTaken,
    /// A fenced command's claim does not hold its turn: nothing was written.
    #[error("turn_fenced: {0}")]
    Fenced(String),
    /// A fenced command names a turn that does not exist: nothing was written.
    #[error("turn not found")]
    TurnNotFound,
    /// The store could not be reached (a retry may succeed).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Anything else (a bug, a corrupt row).
    #[error("the append failed: {0}")]
    Other(String),
}

impl From<AppendFailure> for AppError {
    fn from(e: AppendFailure) -> Self {
        match e {
            AppendFailure::Conflict => AppError::ConcurrencyConflict { attempts: 1 },
            AppendFailure::KeyTaken => AppError::IdempotencyKeyTaken,
            AppendFailure::Fenced(detail) => AppError::TurnFenced(detail),
            AppendFailure::TurnNotFound => AppError::TurnNotFound,
            AppendFailure::Unavailable(e) => AppError::Unavailable(e),
            AppendFailure::Other(e) => AppError::Internal(e),
        }
    }
}

/// What the bus needs of an event store beyond cqrs-es's [`EventStore`].
///
/// # Errors
/// Loading: cqrs-es's [`AggregateError`] (`DatabaseConnectionError` when the store is
/// unreachable). Appending: [`AppendFailure`].
pub trait AggregateStore<A: PmAggregate>: EventStore<A> {
    /// Loads an aggregate as `load` says.
    fn load_with(
        &self,
        aggregate_id: &str,
        load: Load,
    ) -> impl Future<Output = Result<Self::AC, AggregateError<DomainError>>> + Send;

    /// Appends `events` after the context's version; returns each one's log position once
    /// it is durable. With `key`, the idempotency key is completed (pointed at the last
    /// fact) in the same statement as the append.
    fn append(
        &self,
        events: Vec<A::Event>,
        context: Self::AC,
        metadata: &EventMetadata,
        key: Option<&IdempotencyKey>,
        fence: Option<&Fence>,
    ) -> impl Future<Output = Result<Vec<LogPosition>, AppendFailure>> + Send;
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
    /// The authenticated caller's name, recorded with every fact the command writes
    /// (see [`EventMetadata::principal`]).
    pub principal: String,
    /// The organizations the caller may write in (TRUST.md "Organizations").
    pub scope: crate::scope::Scope,
    /// The actors the caller may speak as (TRUST.md "Who a principal may speak for").
    pub voice: crate::speaker::Voice,
    /// The request's `Idempotency-Key`, if it has one: written or completed by the
    /// command's append.
    pub idempotency_key: Option<IdempotencyKey>,
    /// The worker's claim the command acts for (`PM-Turn-Id`, `PM-Turn-Epoch`).
    pub turn: Option<TurnRef>,
    /// Which turns the command ends, when fenced (set by the use case that knows the
    /// command; see [`Fence::ends`]).
    pub ends: Option<Ending>,
    /// The request's span in its trace (issue 34), recorded with every fact it writes.
    pub trace: Option<crate::trace::TraceContext>,
}

impl CommandContext {
    /// The same context for a command that ends `ending`'s turns.
    pub fn ending(&self, ending: Ending) -> Self {
        Self {
            ends: Some(ending),
            ..self.clone()
        }
    }
}

/// What a command did, with its entity `E`.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<E> {
    /// A new fact was committed.
    Created {
        /// The created entity (the fact).
        entity: E,
        /// The fact's position in the global log.
        position: LogPosition,
    },
    /// The command repeated an existing entity exactly; no fact was written.
    Existing {
        /// The existing entity.
        entity: E,
    },
}

impl<E> Outcome<E> {
    /// The entity, created or existing.
    pub fn entity(&self) -> &E {
        match self {
            Self::Created { entity, .. } | Self::Existing { entity } => entity,
        }
    }

    /// The outcome with its entity mapped; `None` when `f` rejects it.
    pub fn try_map<T>(self, f: impl FnOnce(E) -> Option<T>) -> Option<Outcome<T>> {
        Some(match self {
            Self::Created { entity, position } => Outcome::Created {
                entity: f(entity)?,
                position,
            },
            Self::Existing { entity } => Outcome::Existing { entity: f(entity)? },
        })
    }
}

/// Runs commands against aggregates in a store.
pub struct CommandBus<S> {
    store: S,
    services: Services,
    max_attempts: u32,
    /// Where commands' spans go, when spans are exported.
    spans: Option<Arc<dyn SpanSink>>,
}

impl<S> CommandBus<S> {
    /// A bus over `store`, giving aggregates `services`, trying each command at most
    /// `max_attempts` times (at least once).
    pub fn new(store: S, services: Services, max_attempts: u32) -> Self {
        Self {
            store,
            services,
            max_attempts: max_attempts.max(1),
            spans: None,
        }
    }

    /// The bus, handing each command's span to `spans` (a command of a request in a
    /// trace); `None`: no spans.
    #[must_use]
    pub fn with_spans(mut self, spans: Option<Arc<dyn SpanSink>>) -> Self {
        self.spans = spans;
        self
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The services the aggregates get (use cases read cross-aggregate facts with them
    /// before running a command, e.g. who may speak as an actor).
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Handles `command` on aggregate `id` and commits what it emits. The outcome's entity
    /// is the first fact emitted, or the aggregate's creation fact when the command
    /// repeated it exactly.
    ///
    /// # Errors
    /// [`AppError::Domain`] when a rule rejects the command (nothing is written),
    /// [`AppError::ConcurrencyConflict`] when every attempt lost a race, and
    /// [`AppError::Unavailable`]/[`AppError::Internal`] for store failures.
    #[tracing::instrument(name = "command", skip_all, fields(aggregate = A::TYPE, %id))]
    pub async fn execute<A>(
        &self,
        id: Uuid,
        load: Load,
        command: A::Command,
        ctx: &CommandContext,
        now: DateTime<Utc>,
    ) -> Result<Outcome<A::Event>, AppError>
    where
        A: PmAggregate,
        A::Command: Clone + Send + Sync,
        A::Event: Clone,
        S: AggregateStore<A>,
    {
        let Some((spans, parent)) = self.spans.as_ref().zip(ctx.trace.as_ref()) else {
            return self.attempts::<A>(id, load, command, ctx, now).await;
        };
        // Wall-clock times: `now` is the command's (an injected clock in tests).
        let start = Utc::now();
        let outcome = self.attempts::<A>(id, load, command, ctx, now).await;
        let result = match &outcome {
            Ok(Outcome::Created { .. }) => Ok("created"),
            Ok(Outcome::Existing { .. }) => Ok("existing"),
            Err(e @ AppError::Domain(_)) => Err(("refused", e.to_string())),
            Err(e) => Err(("failed", e.to_string())),
        };
        spans.finished(genai::command(
            A::TYPE,
            id,
            parent,
            (start, Utc::now()),
            result,
        ));
        outcome
    }

    /// [`CommandBus::execute`]'s attempts.
    async fn attempts<A>(
        &self,
        id: Uuid,
        load: Load,
        command: A::Command,
        ctx: &CommandContext,
        now: DateTime<Utc>,
    ) -> Result<Outcome<A::Event>, AppError>
    where
        A: PmAggregate,
        A::Command: Clone + Send + Sync,
        A::Event: Clone,
        S: AggregateStore<A>,
    {
        let aggregate_id = id.to_string();
        let key = ctx.idempotency_key.as_ref();
        let metadata = EventMetadata {
            correlation_id: ctx.correlation_id.clone(),
            causation_id: ctx.causation_id.clone(),
            role: ctx.role.clone(),
            principal: ctx.principal.clone(),
            recorded_at: now,
            turn: ctx.turn,
            trace: ctx.trace.clone(),
        };
        let fence = ctx.turn.map(|turn| Fence {
            turn,
            ends: ctx.ends,
            now,
        });
        for attempt in 1..=self.max_attempts {
            let load = if attempt == 1 { load } else { Load::Read };
            let mut context = self
                .store
                .load_with(&aggregate_id, load)
                .await
                .map_err(store_error)?;
            let sink = EventSink::default();
            context
                .aggregate()
                .handle(command.clone(), &self.services, &sink)
                .await?;
            let events = sink.collect().await;
            let Some(first) = events.first().cloned() else {
                let entity = context.aggregate().repeated(&command).ok_or_else(|| {
                    AppError::Internal(format!(
                        "{} {id} emitted nothing and has no entity",
                        A::TYPE
                    ))
                })?;
                return Ok(Outcome::Existing { entity });
            };
            match self
                .store
                .append(events, context, &metadata, key, fence.as_ref())
                .await
            {
                Ok(positions) => {
                    let position = positions
                        .last()
                        .copied()
                        .ok_or_else(|| AppError::Internal("store reported no position".into()))?;
                    return Ok(Outcome::Created {
                        entity: first,
                        position,
                    });
                }
                Err(AppendFailure::Conflict) => {
                    metrics::counter!("pm_command_conflicts_total", "aggregate" => A::TYPE)
                        .increment(1);
                    tracing::debug!(attempt, "optimistic conflict, retrying");
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppError::ConcurrencyConflict {
            attempts: self.max_attempts,
        })
    }
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

#[cfg(test)]
mod tests;
