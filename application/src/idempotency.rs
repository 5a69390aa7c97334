//! The `Idempotency-Key` port: a repeat of the same key by the same role within 24 h gets
//! the first answer again, without a new fact.

use std::future::Future;

use crate::AppError;

/// How long a key is remembered.
pub const KEY_TTL_HOURS: i64 = 24;

/// A stored answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: String,
    /// The `Location` header, if any.
    pub location: Option<String>,
    /// The `X-Event-Position` header, if any.
    pub position: Option<String>,
}

/// The result of claiming a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key is new (or expired): the caller runs the command and then completes it.
    Claimed,
    /// The key has an answer: replay it.
    Done(StoredResponse),
    /// Another request with this key is still running.
    InFlight,
    /// The key was used for a different request.
    Mismatch,
}

/// Storage of idempotency keys.
///
/// # Errors
/// Every method fails with [`AppError::Unavailable`] when the store cannot be reached.
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Claims `key` for `role` and a request whose hash is `request_hash`.
    fn claim(
        &self,
        role: &str,
        key: &str,
        request_hash: &str,
    ) -> impl Future<Output = Result<Claim, AppError>> + Send;

    /// Records the answer of a claimed key.
    fn complete(
        &self,
        role: &str,
        key: &str,
        response: &StoredResponse,
    ) -> impl Future<Output = Result<(), AppError>> + Send;

    /// Gives up a claim whose request failed without an answer worth keeping.
    fn release(&self, role: &str, key: &str) -> impl Future<Output = Result<(), AppError>> + Send;
}
