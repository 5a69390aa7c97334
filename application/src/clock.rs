//! The injected clock: server time comes from here so tests can control it.

use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Now, truncated to the microsecond precision every stored time has.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        pm_domain::time::truncate(Utc::now())
    }
}

/// A clock that runs with the system clock, shifted by an offset that tests move
/// forward ([`ManualClock::advance`]) to make deadlines fall due without waiting.
#[derive(Debug, Default)]
pub struct ManualClock {
    offset: Mutex<Duration>,
}

impl ManualClock {
    /// A clock at the system time.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut offset = self.offset.lock().unwrap_or_else(|e| e.into_inner());
        *offset += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        let offset = *self.offset.lock().unwrap_or_else(|e| e.into_inner());
        pm_domain::time::truncate(Utc::now() + offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_forward_when_advanced() {
        let clock = ManualClock::new();
        let before = clock.now();
        clock.advance(Duration::hours(1));
        assert!(clock.now() - before >= Duration::hours(1));
    }
}
