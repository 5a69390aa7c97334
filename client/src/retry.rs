//! Bounded retries: which failures are retried ([`is_retryable`]), how long to wait
//! (exponential backoff with jitter, honouring `Retry-After`), and when to give up.
//!
//! | failure | retried |
//! |---|---|
//! | connect error, timeout, broken connection | yes |
//! | `502`, `503` (`service_unavailable`, `projection_lagging`), `504` | yes, after `Retry-After` if the answer has one |
//! | any `4xx` (incl. `409 idempotency_key_in_use`) | never |
//! | `500 internal_error` (a bug; retrying would repeat it) | never |
//! | an answer that does not parse, invalid input | never |
//!
//! Commands are safe to retry: every attempt of one call carries the same
//! `Idempotency-Key`, so the service runs the command at most once.

use std::time::{Duration, SystemTime};

use crate::Error;

/// How often and how patiently a call is retried.
///
/// ```
/// use std::time::Duration;
/// use pm_client::RetryPolicy;
///
/// let policy = RetryPolicy::default()
///     .max_attempts(6)
///     .base_delay(Duration::from_millis(50))
///     .max_delay(Duration::from_secs(2));
/// assert_eq!(policy.attempts(), 6);
/// assert_eq!(RetryPolicy::none().attempts(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    base_delay: Duration,
    max_delay: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, backoff from 200 ms up to 5 s.
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retry.
    pub fn none() -> Self {
        Self::default().max_attempts(1)
    }

    /// Attempts per call, the first included (at least 1).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// The backoff before the first retry; it doubles with every further retry.
    pub fn base_delay(mut self, d: Duration) -> Self {
        self.base_delay = d;
        self
    }

    /// The longest backoff. A `Retry-After` longer than this is not waited for: the call
    /// fails with the answer (its [`Error::retry_after`] tells how long the service asked).
    pub fn max_delay(mut self, d: Duration) -> Self {
        self.max_delay = d;
        self
    }

    /// Attempts per call.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The longest backoff.
    pub fn longest_delay(&self) -> Duration {
        self.max_delay
    }

    /// The backoff after the `failures`-th consecutive failure (1-based), with `jitter`
    /// in `[0, 1)`: "equal jitter", i.e. between half and all of
    /// `min(max_delay, base_delay * 2^(failures-1))`.
    pub fn backoff(&self, failures: u32, jitter: f64) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        let cap = self
            .base_delay
            .saturating_mul(1u32 << doublings)
            .min(self.max_delay);
        let jitter = jitter.clamp(0.0, 1.0);
        cap / 2 + cap.mul_f64(jitter) / 2
    }

    /// Whether to retry after `attempts` attempts ended in `error`, and after how long;
    /// `None`: give up and return `error`.
    pub fn decide(&self, attempts: u32, error: &Error, jitter: f64) -> Option<Duration> {
        if !is_retryable(error) || attempts >= self.max_attempts {
            return None;
        }
        let backoff = self.backoff(attempts, jitter);
        match error.retry_after() {
            Some(asked) if asked > self.max_delay => None,
            Some(asked) => Some(asked.max(backoff)),
            None => Some(backoff),
        }
    }
}

/// Whether a failure is worth another attempt (see the module's table).
pub fn is_retryable(error: &Error) -> bool {
    match error {
        Error::Transport { .. } => true,
        Error::Problem(_) | Error::Status { .. } => matches!(error.status(), Some(502..=504)),
        Error::Decode { .. } | Error::InvalidInput(_) => false,
    }
}

/// A `Retry-After` value: delay-seconds or an HTTP date (a date in the past is zero).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse().ok().map(Duration::from_secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A jitter in `[0, 1)`.
pub(crate) fn jitter() -> f64 {
    fastrand::f64()
}

#[cfg(test)]
mod tests;
