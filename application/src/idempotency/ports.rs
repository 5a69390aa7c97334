//! The ports of the `Idempotency-Key` use case: the keys' rows, and whether the replica
//! holding a claim is still alive. Both only do I/O; what to make of their answers is
//! [`super::decision`]'s.

use std::future::Future;

use chrono::{DateTime, Utc};

use super::{IdempotencyKey, StoredAnswer, StoredResponse};
use crate::AppError;

/// A key's stored row, as a claim found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    /// The hash of the request that wrote the row.
    pub request_hash: String,
    /// Answered or not.
    pub state: KeyState,
}

/// Whether a key's row has its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState {
    /// Answered: replay this.
    Done(StoredResponse),
    /// Claimed and not answered yet.
    Pending {
        /// The replica holding the claim (`None` for a row written without one).
        owner: Option<String>,
        /// When the claim was made.
        claimed_at: Option<DateTime<Utc>>,
    },
}

/// What claiming a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The key had no row (or only one older than the TTL): it is pending now, claimed
    /// by the caller.
    Now,
    /// The key has this row: nothing was changed.
    Found(KeyRow),
    /// The row vanished between the claim and the read (purged): claim again.
    Gone,
}

/// Storage of idempotency keys.
///
/// # Errors
/// Every method fails with [`AppError::Unavailable`] when the store cannot be reached.
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Claims `key` for the replica `replica` when it has no live row; otherwise reads the
    /// row.
    fn claim(
        &self,
        key: &IdempotencyKey,
        replica: &str,
    ) -> impl Future<Output = Result<Claimed, AppError>> + Send;

    /// Takes over the pending claim of `key` held by `from` for `replica`
    /// (compare-and-set on its owner); `false` when the row changed meanwhile.
    fn take_over(
        &self,
        key: &IdempotencyKey,
        from: Option<&str>,
        replica: &str,
    ) -> impl Future<Output = Result<bool, AppError>> + Send;

    /// Records the answer of an unclaimed key whose command wrote nothing; `false` (and
    /// nothing recorded) when the key has a row already.
    fn record(
        &self,
        key: &IdempotencyKey,
        answer: &StoredAnswer,
    ) -> impl Future<Output = Result<bool, AppError>> + Send;

    /// Records the answer of a claimed key whose command wrote nothing (a key completed
    /// by its append keeps that answer).
    fn complete(
        &self,
        key: &IdempotencyKey,
        answer: &StoredAnswer,
    ) -> impl Future<Output = Result<(), AppError>> + Send;

    /// Gives up the claim `replica` holds on `key` (its request failed without an answer
    /// worth keeping), so a retry runs the command again.
    fn release(
        &self,
        key: &IdempotencyKey,
        replica: &str,
    ) -> impl Future<Output = Result<(), AppError>> + Send;
}

/// Whether a replica is still running — asked only of a pending claim held by another
/// replica, so that a crashed replica's claims are taken over at once instead of after
/// [`super::CLAIM_TIMEOUT`].
///
/// # Errors
/// [`AppError::Unavailable`] when the answer cannot be had.
pub trait ReplicaLiveness: Send + Sync + 'static {
    /// Whether the replica with this id is alive.
    fn is_alive(&self, replica: &str) -> impl Future<Output = Result<bool, AppError>> + Send;
}
