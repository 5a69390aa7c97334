//! The `Idempotency-Key` port: a repeat of the same key by the same role within 24 h gets
//! the first answer again, without a new fact — also after a crash, a database outage or
//! a failover between the command and its answer.
//!
//! - **The common case costs no extra statement**: a request runs its command at once,
//!   and a command that writes a fact **writes its key's row in the same statement as the
//!   append** ([`IdempotencyKey`] travels with the facts to the store), done with the
//!   fact's position. When the key already has a row (a repeat, or a key still claimed
//!   elsewhere) the append writes nothing and the bus answers the typed
//!   [`AppError::IdempotencyKeyTaken`]; only
//!   then is the key claimed and read (the slow path below).
//! - **The slow path**: a key is **claimed** by the replica that runs its command (the
//!   claim names that replica); the append then completes the claimed row in its own
//!   statement. Either way a key is absent or pending with no fact written, or done with
//!   its fact's position — never "written but unanswerable". A retry of a done key gets
//!   the answer rebuilt from that fact; a claim whose replica is gone (or that is older
//!   than [`CLAIM_TIMEOUT`]) is taken over by the next request with the key, which runs
//!   the command once: nothing holds a key for a day.
//! - Answers that write nothing (an identical repeat, a rejection) are recorded after the
//!   command; if that record is lost, running the command again gives the same answer.

use std::future::Future;
use std::time::Duration;

use crate::log::LogPosition;
use crate::AppError;

/// How long a key is remembered.
pub const KEY_TTL_HOURS: i64 = 24;

/// A claim older than this is abandoned whoever holds it (commands take milliseconds).
pub const CLAIM_TIMEOUT: Duration = Duration::from_secs(60);

/// A key as the store of facts records it: written or completed in the append's own
/// statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    /// The caller's role (keys are scoped to it).
    pub role: String,
    /// The key.
    pub key: String,
    /// The hash of the request (method, path, body) the key was sent with.
    pub request_hash: String,
    /// Whether this request holds a claim on the key (its row exists, pending): the
    /// append completes that row. Otherwise the append writes the key's row itself, and
    /// fails with [`AppError::IdempotencyKeyTaken`] — writing nothing — when the key has a row.
    pub claimed: bool,
}

/// A stored answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredResponse {
    /// The command wrote the fact at this position: the answer is `201 Created` with that
    /// fact (read back from the log).
    Appended(LogPosition),
    /// An answer that wrote nothing, as it was sent.
    Answer {
        /// The HTTP status.
        status: u16,
        /// The JSON body.
        body: String,
        /// The `Location` header, if any.
        location: Option<String>,
    },
}

/// The result of claiming a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key is new, expired or abandoned: the caller runs the command, then
    /// [`IdempotencyStore::finish`]es it.
    Claimed,
    /// The key has an answer: replay it.
    Done(StoredResponse),
    /// Another request with this key is still running on a live replica.
    InFlight,
    /// The key was used for a different request.
    Mismatch,
}

/// Storage of idempotency keys.
///
/// # Errors
/// Every method fails with [`AppError::Unavailable`] when the store cannot be reached.
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Claims `key` for `role` and a request whose hash is `request_hash`, for this
    /// replica.
    fn claim(
        &self,
        role: &str,
        key: &str,
        request_hash: &str,
    ) -> impl Future<Output = Result<Claim, AppError>> + Send;

    /// Marks the key in flight on this replica for the request about to run it without a
    /// claim; `false` when a request with it already runs here. [`Self::finish`] ends it.
    fn enter(&self, role: &str, key: &str) -> bool;

    /// Records the answer of an unclaimed key whose command wrote nothing; `false` (and
    /// nothing recorded) when the key has a row already.
    fn record(
        &self,
        key: &IdempotencyKey,
        status: u16,
        body: &str,
        location: Option<&str>,
    ) -> impl Future<Output = Result<bool, AppError>> + Send;

    /// Records the answer of a claimed key whose command wrote nothing (a key completed
    /// by its append keeps that answer).
    fn complete(
        &self,
        role: &str,
        key: &str,
        status: u16,
        body: &str,
        location: Option<&str>,
    ) -> impl Future<Output = Result<(), AppError>> + Send;

    /// Gives a claim up (its request failed without an answer worth keeping).
    fn release(&self, role: &str, key: &str) -> impl Future<Output = Result<(), AppError>> + Send;

    /// The request that claimed the key has ended (answered or not): until then the key
    /// counts as in flight on this replica.
    fn finish(&self, role: &str, key: &str);
}
