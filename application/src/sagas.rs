//! The sagas as a processor: the session, agent, turn, plan and tool call machines of the domain
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
//! - A conversation's machines are its own: every saga writer — the processor, the
//!   deadline scheduler, an operator's control on any replica — decides on one
//!   conversation's machines under that conversation's lock in memory, and commits only if
//!   the conversation's stored version is still the one its machines were loaded at
//!   (compare-and-set per conversation). Writers of different conversations never wait
//!   for each other; a writer that finds a conversation changed elsewhere reloads the
//!   conversations of that write (their machines hold its unwritten decisions), no
//!   others.
//! - A long conversation is loaded from its latest [`snapshot`] and the runes after it,
//!   not from its whole history.

mod engine;
mod processor;
mod scheduler;
mod slots;
pub mod snapshot;
mod written;

use std::future::Future;

use chrono::{DateTime, Utc};
use pm_domain::saga::{
    AgentView, Deadline, DeadlineOp, LeaseHeld, Recorded, SessionView, ToolCallView, TurnView,
};
use pm_domain::types::ActorKind;
use uuid::Uuid;

use crate::bus::EventMetadata;
use crate::log::{LogPosition, LoggedEvent};
use crate::AppError;

pub use engine::{ControlTarget, SagaEngine, WorkerDone, SAGA_ROLE, SYSTEM_PRINCIPAL};
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
    /// The conversations decided on, each with the version its machines were loaded at:
    /// the transaction moves each to the next version, or fails with
    /// [`CommitError::Conflict`] when another writer moved it first.
    pub conversations: Vec<(Uuid, i64)>,
    /// Deadlines this transaction fires: each row must still be stored (with its epoch)
    /// and is deleted — a deadline fired elsewhere meanwhile is a conflict, so each fires
    /// once.
    pub fired: Vec<(Uuid, Deadline)>,
    /// Runes, in the order they were decided.
    pub runes: Vec<NewRune>,
    /// Deadline row changes, in order (a later one for the same row wins).
    pub deadlines: Vec<(Uuid, DeadlineOp)>,
    /// Workers' leases the write was decided on: each `turn_lease` row must still be
    /// stored with its epoch (and be live at `live_at` when set), locked until the write
    /// commits — or the write fails with [`CommitError::LeaseGone`].
    pub leases: Vec<LeaseHeld>,
    /// Session rows to upsert, as of the time of their change.
    pub sessions: Vec<SessionView>,
    /// Agent rows to upsert.
    pub agents: Vec<AgentView>,
    /// Turn rows to upsert.
    pub turns: Vec<TurnView>,
    /// Tool call rows to upsert.
    pub tool_calls: Vec<PlacedCall>,
}

/// A tool call row with its place in its turn's report order (0 first), which the reads
/// list a turn's calls by: a batch's calls share one time. A call keeps the place it was
/// first written with.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacedCall {
    /// The call.
    pub call: ToolCallView,
    /// Its place in its turn.
    pub place: i64,
}

/// Which turns a claim may take (`POST /v1/turns/claim`'s filters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ClaimFilter {
    /// Only this agent's turns.
    pub agent_id: Option<Uuid>,
    /// Only turns of agents acting for this actor.
    pub actor_id: Option<Uuid>,
    /// Only this conversation's turns.
    pub conversation_id: Option<Uuid>,
    /// Only turns of this kind.
    pub kind: Option<pm_domain::saga::TurnKind>,
    /// Only turns of conversations the claimant may see.
    pub scope: crate::scope::Scope,
}

/// A turn a look found claimable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimableTurn {
    /// The turn.
    pub turn_id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// The conversation's version the look saw the turn claimable at: machines cached at
    /// it or later that refuse the claim are current (another claimant was first); older
    /// ones are stale.
    pub version: i64,
}

/// A conversation's saga state as stored: its version, its latest snapshot (of the
/// format asked for) and its runes after the snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredConversation {
    /// How many saga transactions have written the conversation (0: none yet). Read
    /// before the snapshot and the runes, so they are at least as new as the version.
    pub version: i64,
    /// The machines as of a position, if a snapshot was asked for and is stored.
    pub snapshot: Option<StoredSnapshot>,
    /// Its runes after the snapshot's position (all of them without one), in log order.
    pub runes: Vec<StoredRune>,
}

/// A conversation's machines encoded as of `position`: the fold of every rune of the
/// conversation at or before it, and of none after ([`snapshot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSnapshot {
    /// The log position the snapshot was taken at.
    pub position: LogPosition,
    /// The encoding's format ([`snapshot::FORMAT`]).
    pub format: i32,
    /// The encoded machines.
    pub state: Vec<u8>,
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
    /// Its own log position.
    pub position: LogPosition,
}

/// Why a saga transaction did not commit.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// Another writer (an operator's control or a deadline on another replica) committed
    /// saga state of these conversations since their machines were loaded, or fired a
    /// deadline this write fires. Nothing was written: reload them and decide again.
    #[error("saga state of {} conversation(s) was written by another writer", conversations.len())]
    Conflict {
        /// The conversations found changed (every one of the write when the store cannot
        /// tell which).
        conversations: Vec<Uuid>,
    },
    /// A lease of [`SagaWrite::leases`] is no longer stored as the write was decided on
    /// (it expired, or a fenced command that ended its turn took it). Nothing was written.
    #[error("the lease of turn {turn_id} epoch {turn_epoch} is gone")]
    LeaseGone {
        /// The turn.
        turn_id: Uuid,
        /// The claim's epoch.
        turn_epoch: i64,
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
}

/// Storage of the sagas: their runes (in the event store), read rows, deadlines, and each
/// conversation's version (how a writer learns that another one changed state it holds in
/// memory).
///
/// # Errors
/// [`AppError::Unavailable`] when the store cannot be reached.
pub trait SagaStore: Send + Sync + 'static {
    /// The version of `conversation_id`, its snapshot of format `snapshot` (if asked for
    /// and stored) and its runes after the snapshot — every rune without one.
    fn load(
        &self,
        conversation_id: Uuid,
        snapshot: Option<i32>,
    ) -> impl Future<Output = Result<StoredConversation, AppError>> + Send;

    /// Stores `snapshot` as `conversation_id`'s unless one of a later position and the same
    /// format is stored. The future borrows nothing from the store: snapshots are written
    /// beside the saga path (spawned), never on it.
    fn save_snapshot(
        &self,
        conversation_id: Uuid,
        snapshot: StoredSnapshot,
    ) -> impl Future<Output = Result<(), AppError>> + Send + 'static;

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

    /// The stored version of a conversation (0 when it has none): machines cached at
    /// another version are stale (another replica wrote the conversation since).
    fn conversation_version(
        &self,
        conversation_id: Uuid,
    ) -> impl Future<Output = Result<i64, AppError>> + Send;

    /// The conversation of a turn.
    fn turn_conversation(
        &self,
        turn_id: Uuid,
    ) -> impl Future<Output = Result<Option<Uuid>, AppError>> + Send;

    /// The position of the last event logged in the conversation of turn `turn_id` (`None`
    /// for a turn the sagas have not recorded): what the sagas must have decided before a
    /// worker's report on the turn is (the worker's fenced facts come before its report).
    fn turn_logged_through(
        &self,
        turn_id: Uuid,
    ) -> impl Future<Output = Result<Option<LogPosition>, AppError>> + Send;

    /// Claimable turns matching `filter` (dispatched, or streaming with no worker, in an
    /// active session), oldest first, at most `limit`, with their conversations and those
    /// conversations' versions as of the look.
    fn claimable(
        &self,
        filter: &ClaimFilter,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<ClaimableTurn>, AppError>> + Send;

    /// A heartbeat: moves the `turn_lease` row of (`turn_id`, `turn_epoch`) to `until` if
    /// it is still live at `now`; answers the new expiry, or `None` when the claim no
    /// longer holds the turn. Writes no rune.
    fn renew_lease(
        &self,
        turn_id: Uuid,
        turn_epoch: i64,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Option<DateTime<Utc>>, AppError>> + Send;

    /// Writes `write` in one transaction, if every conversation of it is still at its
    /// version and every deadline it fires is still stored ([`CommitError::Conflict`]
    /// otherwise). For a processor batch, `batch` is (from, to): the cursor moves from
    /// `from` to `to` (compare-and-set, [`CommitError::CursorMoved`]). Only a batch
    /// touches the processor's row, so writers of different conversations run in
    /// parallel.
    fn commit(
        &self,
        write: SagaWrite,
        batch: Option<(LogPosition, LogPosition)>,
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
