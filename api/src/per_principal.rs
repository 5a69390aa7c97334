//! How much of the service one principal may hold open at once (TRUST.md "The
//! boundary"): event streams and waiting claims are cheap each but unbounded together —
//! one token could open thousands of streams, each replaying the log from the database.
//! Over its share a principal is answered `429 too_many_requests` with `Retry-After`;
//! other principals are not affected.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::ApiError;

/// Open things of one kind, counted per principal.
#[derive(Debug)]
pub struct PerPrincipal {
    what: &'static str,
    reason: &'static str,
    max: usize,
    open: Mutex<HashMap<String, usize>>,
}

/// One open thing: its principal's count goes down when it is dropped (the stream ended,
/// its client went away, the claim was answered).
#[derive(Debug)]
pub struct Slot {
    owner: Arc<PerPrincipal>,
    principal: String,
}

impl PerPrincipal {
    /// At most `max` open `what`s per principal; a refusal is counted as `reason` (one of
    /// [`crate::metrics::refusal`]).
    pub fn new(what: &'static str, reason: &'static str, max: usize) -> Arc<Self> {
        Arc::new(Self {
            what,
            reason,
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for `principal`, unless it holds `max` already.
    ///
    /// # Errors
    /// `429 too_many_requests`.
    pub fn take(self: &Arc<Self>, principal: &str) -> Result<Slot, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let count = open.entry(principal.to_string()).or_insert(0);
        if *count >= self.max {
            crate::metrics::refused(self.reason);
            return Err(ApiError::too_many_requests(
                format!(
                    "this principal has {} {} open, the most it may; close one first",
                    self.max, self.what
                ),
                Duration::from_secs(1),
            ));
        }
        *count += 1;
        Ok(Slot {
            owner: self.clone(),
            principal: principal.to_string(),
        })
    }

    /// How many `principal` holds.
    pub fn held(&self, principal: &str) -> usize {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(principal).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.owner.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = open.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_full_share_when_another_is_taken_then_429_until_one_is_dropped() {
        let streams = PerPrincipal::new("event streams", "streams", 2);
        let first = streams.take("alice").expect("first");
        let _second = streams.take("alice").expect("second");
        let refused = streams.take("alice").map(|_| ()).map_err(|e| e.code);
        assert_eq!(refused, Err("too_many_requests"));
        assert!(
            streams.take("bob").is_ok(),
            "another principal is not affected"
        );
        drop(first);
        assert_eq!(streams.held("alice"), 1);
        assert!(streams.take("alice").is_ok());
    }

    #[test]
    fn given_every_slot_dropped_when_counted_then_nothing_is_remembered() {
        let claims = PerPrincipal::new("waiting claims", "waiting_claims", 1);
        drop(claims.take("alice").expect("taken"));
        assert_eq!(claims.held("alice"), 0);
        assert!(claims.open.lock().expect("lock").is_empty());
    }
}
