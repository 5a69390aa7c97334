//! Failed sign-ins slowed down (TRUST.md "The boundary"): more than 20 failed
//! authentications from one address within a minute, and that address is answered
//! `429 too_many_requests` for the rest of the minute — guessing tokens costs a minute per
//! twenty tries, and other addresses are not affected.
//!
//! Only presented credentials that fail count (an unknown token, an invalid JWT or cookie,
//! a console sign-in with a wrong token): a request without any is not a guess. Once an
//! address is held, even a valid token from it waits: a guess that happens to be right
//! must not get through the minute it was throttled in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::ApiError;

/// Failures from one address within [`WINDOW`] before it is held.
pub const MAX_FAILURES: u32 = 20;
/// The window failures are counted in.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at once; beyond, windows that ended are forgotten first (and, if
/// every one is live, the table is cleared rather than grow without bound).
const MAX_ADDRESSES: usize = 100_000;

/// Failed authentications per address.
#[derive(Debug, Default)]
pub struct Throttle {
    windows: Mutex<HashMap<IpAddr, Window>>,
    /// How many addresses have a window: requests skip the lock while it is zero.
    live: AtomicUsize,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

impl Throttle {
    /// Lets a request from `address` try to authenticate, unless the address is held.
    ///
    /// # Errors
    /// `429 too_many_requests` with the rest of the minute as `Retry-After`.
    pub fn admit(&self, address: Option<IpAddr>) -> Result<(), ApiError> {
        match address.and_then(|a| self.held(a, Instant::now())) {
            Some(wait) => {
                crate::metrics::refused(crate::metrics::refusal::FAILED_AUTHENTICATIONS);
                Err(ApiError::too_many_requests(
                    "too many failed authentications from this address; try again later",
                    wait,
                ))
            }
            None => Ok(()),
        }
    }

    /// Counts a presented credential from `address` that was refused.
    pub fn refused(&self, address: Option<IpAddr>) {
        if let Some(address) = address {
            self.failed(address, Instant::now());
        }
    }

    /// How long `address` is still held, if it is.
    pub fn held(&self, address: IpAddr, now: Instant) -> Option<Duration> {
        if self.live.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let window = windows.get(&address)?;
        let ends = window.started + WINDOW;
        (window.failures >= MAX_FAILURES && ends > now).then(|| ends - now)
    }

    /// Counts a failed authentication from `address`.
    pub fn failed(&self, address: IpAddr, now: Instant) {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if windows.len() >= MAX_ADDRESSES && !windows.contains_key(&address) {
            windows.retain(|_, w| w.started + WINDOW > now);
            if windows.len() >= MAX_ADDRESSES {
                windows.clear();
            }
        }
        let window = windows.entry(address).or_insert(Window {
            started: now,
            failures: 0,
        });
        if window.started + WINDOW <= now {
            *window = Window {
                started: now,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
        self.live.store(windows.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn given_twenty_failures_within_a_minute_when_asked_then_held_for_the_rest_of_it() {
        let throttle = Throttle::default();
        let start = Instant::now();
        for i in 0..MAX_FAILURES - 1 {
            throttle.failed(A, start + Duration::from_secs(u64::from(i)));
        }
        assert_eq!(throttle.held(A, start + Duration::from_secs(20)), None);
        throttle.failed(A, start + Duration::from_secs(20));
        let held = throttle.held(A, start + Duration::from_secs(20));
        assert_eq!(
            held,
            Some(Duration::from_secs(40)),
            "the rest of the minute"
        );
        assert_eq!(
            throttle.held(B, start + Duration::from_secs(20)),
            None,
            "others unaffected"
        );
        assert_eq!(throttle.held(A, start + WINDOW), None, "the minute is over");
    }

    #[test]
    fn given_failures_spread_over_minutes_when_asked_then_never_held() {
        let throttle = Throttle::default();
        let start = Instant::now();
        for i in 0..60 {
            // One failure every 4 s: 15 a minute.
            throttle.failed(A, start + Duration::from_secs(4 * i));
            assert_eq!(throttle.held(A, start + Duration::from_secs(4 * i)), None);
        }
    }

    #[test]
    fn given_no_failures_when_asked_then_nobody_is_held() {
        assert_eq!(Throttle::default().held(A, Instant::now()), None);
    }
}
