//! `Idempotency-Key` as a use case: a repeat of the same key by the same role within 24 h
//! gets the first answer again, without a new fact — also after a crash, a database
//! outage or a failover between the command and its answer.
//!
//! - **The common case costs no extra statement**: a request runs its command at once,
//!   and a command that writes a fact **writes its key's row in the same statement as the
//!   append** ([`IdempotencyKey`] travels with the facts to the store), done with the
//!   fact's position. When the key already has a row (a repeat, or a key still claimed
//!   elsewhere) the append writes nothing and the bus answers the typed
//!   [`AppError::IdempotencyKeyTaken`]; only then is the key claimed and read.
//! - **The slow path**: a key is **claimed** by the replica that runs its command (the
//!   claim names that replica); the append then completes the claimed row in its own
//!   statement. Either way a key is absent or pending with no fact written, or done with
//!   its fact's position — never "written but unanswerable". A retry of a done key gets
//!   the answer rebuilt from that fact; a claim whose replica is gone
//!   ([`ReplicaLiveness`]), whose request ended, or that is older than [`CLAIM_TIMEOUT`]
//!   is taken over by the next request with the key, which runs the command once:
//!   nothing holds a key for a day.
//! - Answers that write nothing (an identical repeat, a rejection) are recorded after the
//!   command; if that record is lost, running the command again gives the same answer.
//!
//! What to do at each step is decided by a pure state machine ([`decision`]); the
//! [`Idempotency`] decorator performs its actions against its ports ([`ports`]) around a
//! [`KeyedCommand`]. The HTTP layer only maps the header in and the [`Handled`] outcome
//! out.

pub mod decision;
pub mod ports;
mod use_case;

#[cfg(test)]
mod tests;

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::log::LogPosition;
#[cfg(doc)]
use crate::AppError;

pub use ports::{Claimed, IdempotencyStore, KeyRow, KeyState, ReplicaLiveness};
pub use use_case::{Handled, Idempotency, KeyedCommand, Ran, Replay, RunOutcome};

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
    /// fails with [`AppError::IdempotencyKeyTaken`] — writing nothing — when the key has
    /// a row.
    pub claimed: bool,
    /// The replica running the request. With `claimed`, the claim's owner: the append
    /// completes the key only while this replica still holds the claim, and writes nothing
    /// ([`AppError::IdempotencyKeyTaken`]) when another took it over meanwhile — that one
    /// runs the command, so it is written once.
    pub owner: String,
}

impl IdempotencyKey {
    /// The unclaimed key `key` of `role` for a request: its hash is the SHA-256 of the
    /// method, the path and the body, so the same key with another request is told apart.
    pub fn for_request(role: &str, key: &str, method: &str, path: &str, body: &[u8]) -> Self {
        Self::for_fenced_request(role, key, method, path, None, body)
    }

    /// [`IdempotencyKey::for_request`] of a command fenced by a worker's claim: the claim
    /// (turn and epoch) is part of the request, so a key reused under another claim is
    /// another request (`422 idempotency_key_reused`), never the first claim's answer
    /// replayed. Unfenced requests hash as before.
    pub fn for_fenced_request(
        role: &str,
        key: &str,
        method: &str,
        path: &str,
        fence: Option<crate::bus::TurnRef>,
        body: &[u8],
    ) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(method);
        hasher.update(b" ");
        hasher.update(path);
        if let Some(fence) = fence {
            hasher.update(format!("\npm-turn: {} {}", fence.turn_id, fence.turn_epoch));
        }
        hasher.update(b"\n");
        hasher.update(body);
        Self {
            role: role.to_string(),
            key: key.to_string(),
            request_hash: format!("{:x}", hasher.finalize()),
            claimed: false,
            owner: String::new(),
        }
    }
}

/// An answer that wrote nothing, kept as it was sent so a repeat gets it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: String,
    /// The `Location` header, if any.
    pub location: Option<String>,
}

/// A stored answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredResponse {
    /// The command wrote the fact at this position: the answer is `201 Created` with that
    /// fact (read back from the log).
    Appended(LogPosition),
    /// An answer that wrote nothing, as it was sent.
    Answer(StoredAnswer),
}
