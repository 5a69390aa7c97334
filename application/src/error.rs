//! The application's error: a domain rule, a lost race, or the store.

use pm_domain::DomainError;

/// Why a use case failed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A domain rule rejected the command; nothing was written.
    #[error(transparent)]
    Domain(#[from] DomainError),
    /// The command lost an optimistic-concurrency race on every attempt.
    #[error("concurrency conflict persisted after {attempts} attempts")]
    ConcurrencyConflict {
        /// How many times the command was tried.
        attempts: u32,
    },
    /// A position that is not in the log: malformed, or beyond its committed end (the
    /// client's mistake: never waited for).
    #[error("{0}")]
    InvalidPosition(String),
    /// A read asked for a log position the read model has not processed in time.
    #[error("the read model has processed up to {processed}, not yet {wanted}; retry later")]
    ProjectionLagging {
        /// How far the read model got.
        processed: crate::log::LogPosition,
        /// What the read asked for.
        wanted: crate::log::LogPosition,
    },
    /// The command's unclaimed `Idempotency-Key` already has a record (the append answered
    /// [`crate::bus::AppendFailure::KeyTaken`]); nothing was written.
    #[error("the Idempotency-Key already has a record")]
    IdempotencyKeyTaken,
    /// A command fenced by a worker's claim whose claim no longer holds the turn
    /// (WORKERS.md `409 turn_fenced`); nothing was written.
    #[error("{0}")]
    TurnFenced(String),
    /// A fenced command or a turn report names a turn that does not exist.
    #[error("turn not found")]
    TurnNotFound,
    /// The caller may not start a conversation in the organization it named (TRUST.md
    /// "Organizations"); nothing was written.
    #[error(transparent)]
    StartRefused(#[from] crate::scope::StartRefused),
    /// The caller may not speak as the actor the command names (TRUST.md "Who a
    /// principal may speak for"); nothing was written.
    #[error(transparent)]
    ActorForbidden(#[from] crate::speaker::SpeakRefused),
    /// The store could not be reached; the command may be retried.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Anything else (a bug or corrupt data); the cause is logged, not shown.
    #[error("internal error: {0}")]
    Internal(String),
}
