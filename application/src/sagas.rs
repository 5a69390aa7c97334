//! The sagas as a processor: the session, agent, turn and plan machines of the domain
//! (`pm_domain::saga`) driven by the log's facts, by their durable deadlines and by
//! operators' controls.
//!
//! - [`SagaEngine`] keeps the machines of recently active conversations in memory
//!   (folded from their runes), turns each input into runes and deadline operations, and
//!   writes them through the [`SagaStore`] port in **one transaction** with the saga read
//!   rows — and, for facts, with the processor's cursor (compare-and-set): a fact applied
//!   once has its runes, a fact not applied has none, whatever crashes in between.
//! - [`SagaProcessor`] is the engine as a [`BatchHandler`](crate::processor::BatchHandler)
//!   of the processor runtime: it consumes the facts in log order.
//! - Deadlines are rows written with the transition that arms them; the owner of the
//!   processor fires due ones ([`SagaEngine::fire_due`]), each once, in the same kind of
//!   transaction (the row is deleted with the runes it causes).
//! - Every saga writer — the processor, the deadline scheduler, an operator's control on
//!   any replica — locks the processor's row in its transaction, so they take turns; a
//!   writer that finds saga runes it did not write since its last transaction reloads the
//!   conversations concerned before deciding again.

mod engine;
mod processor;
mod scheduler;

use std::future::Future;

use chrono::{DateTime, Utc};
use pm_domain::saga::{
    AgentView as SagaAgent, Deadline, DeadlineOp, Recorded, SessionView as SagaSession,
    TurnView as SagaTurn,
};
use pm_domain::types::ActorKind;
use uuid::Uuid;

use crate::bus::EventMetadata;
use crate::log::{LogPosition, LoggedEvent};
use crate::AppError;

pub use engine::{ControlTarget, SagaEngine};
pub use processor::SagaProcessor;
pub use scheduler::DeadlineScheduler;

/// The name of the saga processor.
pub const SAGAS: &str = "sagas";

/// A rune to append: its instance's next sequence, its conversation and its metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRune {
    /// The conversation every instance of it belongs to.
    pub conversation_id: Uuid,
    /// The instance and rune.
    pub recorded: Recorded,
    /// Its sequence in the instance's stream (1-based).
    pub sequence: i64,
    /// Correlation and causation (the fact, deadline or control that caused it).
    pub metadata: EventMetadata,
}

/// Everything one saga transaction writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SagaWrite {
    /// Runes, in the order they were decided.
    pub runes: Vec<NewRune>,
    /// Deadline row changes, in order (a later one for the same row wins).
    pub deadlines: Vec<(Uuid, DeadlineOp)>,
    /// Session rows to upsert, with the time of their change.
    pub sessions: Vec<(SagaSession, DateTime<Utc>)>,
    /// Agent rows to upsert.
    pub agents: Vec<(SagaAgent, DateTime<Utc>)>,
    /// Turn rows to upsert.
    pub turns: Vec<(SagaTurn, DateTime<Utc>)>,
}

impl SagaWrite {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.runes.is_empty()
            && self.deadlines.is_empty()
            && self.sessions.is_empty()
            && self.agents.is_empty()
            && self.turns.is_empty()
    }
}

/// A stored rune of a conversation, in log order.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRune {
    /// The instance and rune.
    pub recorded: Recorded,
    /// Its sequence in its instance's stream.
    pub sequence: i64,
    /// The log position of the fact that caused it, when a fact did.
    pub cause: Option<i64>,
}

/// Why a saga transaction did not commit.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// Another writer (an operator's control on another replica) wrote saga state since
    /// this writer's last transaction: `writes` is the count now. Reload and decide again.
    #[error("saga state was written by another writer ({writes} writes)")]
    Stale {
        /// The processor's write count now.
        writes: i64,
    },
    /// The processor's stored cursor is not where the batch started.
    #[error("the stored cursor moved")]
    CursorMoved,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] AppError),
}

/// What a committed saga transaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Committed {
    /// The position of its last rune, if it appended any.
    pub last_position: Option<LogPosition>,
    /// The processor's write count after it.
    pub writes: i64,
}

/// Storage of the sagas: their runes (in the event store), read rows, deadlines.
///
/// Every writing method holds the saga processor's row for its transaction, so saga
/// writers take turns; the row counts the transactions that wrote (`writes`), which is
/// how a writer learns that another one changed state it holds in memory.
///
/// # Errors
/// [`AppError::Unavailable`] when the store cannot be reached.
pub trait SagaStore: Send + Sync + 'static {
    /// Every rune of `conversation_id`, in log order.
    fn load(
        &self,
        conversation_id: Uuid,
    ) -> impl Future<Output = Result<Vec<StoredRune>, AppError>> + Send;

    /// The kind of a registered actor.
    fn actor_kind(
        &self,
        actor_id: Uuid,
    ) -> impl Future<Output = Result<Option<ActorKind>, AppError>> + Send;

    /// The conversation of an agent.
    fn agent_conversation(
        &self,
        agent_id: Uuid,
    ) -> impl Future<Output = Result<Option<Uuid>, AppError>> + Send;

    /// How many transactions have written saga state so far.
    fn writes(&self) -> impl Future<Output = Result<i64, AppError>> + Send;

    /// Writes `write` in one transaction, if the write count is still `writes`
    /// ([`CommitError::Stale`] otherwise). For a processor batch, `batch` is (from, to):
    /// the cursor moves from `from` to `to` (compare-and-set, [`CommitError::CursorMoved`]).
    fn commit(
        &self,
        write: SagaWrite,
        batch: Option<(LogPosition, LogPosition)>,
        writes: i64,
    ) -> impl Future<Output = Result<Committed, CommitError>> + Send;

    /// Records `event` as parked by the saga processor and moves its cursor from `from`
    /// past it.
    fn park(
        &self,
        from: LogPosition,
        event: &LoggedEvent,
        reason: &str,
    ) -> impl Future<Output = Result<LogPosition, CommitError>> + Send;

    /// Deadlines due at `now`, oldest first (at most `limit`), with their conversations.
    fn due(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<(Uuid, Deadline)>, AppError>> + Send;

    /// The conversations the start-up recovery looks at (FCMP §4): open sessions that wait
    /// for the user or have a deadline due at `now`, with their deadlines.
    fn recovering(
        &self,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<(Uuid, Vec<Deadline>)>, AppError>> + Send;
}
