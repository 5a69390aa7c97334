//! [`Lease`]: one claim as a [`Worker`](crate::Worker) holds it — whether it still holds
//! its turn, the heartbeat task that renews it, and the guard its fenced commands pass.
//!
//! A claim ends in one of two ways, and whichever happens first wins, once:
//! - **lost**: the service answered `409 turn_fenced` (to a heartbeat or a command) — the
//!   lease expired, a newer claim took the turn, an operator interrupted it, it ended;
//! - **ended** by this worker: finished, released, reported in error, dropped, or released
//!   by [`Worker::shutdown`](crate::Worker::shutdown).
//!
//! Either way the heartbeat stops, and the claim's commands fail at once with
//! `turn_fenced` instead of asking the service what it would answer anyway.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::codes::TURN_FENCED;
use crate::{Client, Error, Problem, TurnFence};

/// One claim's shared state (the handle, its heartbeat task and its commands hold it).
pub(crate) struct Lease {
    pub(crate) client: Client,
    pub(crate) fence: TurnFence,
    /// The lease each heartbeat asks for.
    length: Duration,
    state: Mutex<State>,
    heartbeat: Mutex<Option<tokio::task::AbortHandle>>,
    /// Turns `true` once the claim is lost or ended, for those awaiting that.
    over: tokio::sync::watch::Sender<bool>,
}

struct State {
    status: Status,
    expires_at: DateTime<Utc>,
}

enum Status {
    Held,
    /// The service's refusal that told.
    Lost(Problem),
    /// What this worker did to end it.
    Ended(&'static str),
}

impl Lease {
    /// A held claim whose lease ends at `expires_at`; heartbeats ask for `length`.
    pub(crate) fn new(
        client: Client,
        fence: TurnFence,
        length: Duration,
        expires_at: DateTime<Utc>,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            fence,
            length,
            state: Mutex::new(State {
                status: Status::Held,
                expires_at,
            }),
            heartbeat: Mutex::new(None),
            over: tokio::sync::watch::channel(false).0,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Ok` while the claim holds its turn; else the `turn_fenced` error its commands get.
    pub(crate) fn check(&self) -> Result<(), Error> {
        match &self.state().status {
            Status::Held => Ok(()),
            Status::Lost(problem) => Err(Error::Problem(problem.clone())),
            Status::Ended(how) => Err(Error::Problem(Problem {
                status: 409,
                code: TURN_FENCED.into(),
                title: "Conflict".into(),
                detail: format!(
                    "turn {} epoch {}: this worker {how} the claim (no request was sent)",
                    self.fence.turn_id, self.fence.turn_epoch
                ),
                kind: String::new(),
                retry_after: None,
            })),
        }
    }

    /// Whether the claim still holds its turn as far as this worker knows.
    pub(crate) fn is_held(&self) -> bool {
        matches!(self.state().status, Status::Held)
    }

    /// Whether the service fenced the claim off.
    pub(crate) fn is_lost(&self) -> bool {
        matches!(self.state().status, Status::Lost(_))
    }

    /// When the lease ends unless renewed, as of the last heartbeat.
    pub(crate) fn expires_at(&self) -> DateTime<Utc> {
        self.state().expires_at
    }

    /// Learns from a failed call of the claim: a `turn_fenced` means it is lost.
    pub(crate) fn observe(&self, error: &Error) {
        if let Some(problem) = error.problem().filter(|p| p.code == TURN_FENCED) {
            let mut state = self.state();
            if matches!(state.status, Status::Held) {
                state.status = Status::Lost(problem.clone());
                drop(state);
                self.over.send_replace(true);
                tracing::info!(turn_id = %self.fence.turn_id, epoch = self.fence.turn_epoch,
                    detail = %problem.detail, "the claim was fenced off");
                self.stop_heartbeat();
            }
        }
    }

    /// Ends a held claim (`how`: what this worker did) and stops its heartbeat; `false`
    /// when it had already ended or been lost, so whoever ends it acts once.
    pub(crate) fn end(&self, how: &'static str) -> bool {
        let mut state = self.state();
        if !matches!(state.status, Status::Held) {
            return false;
        }
        state.status = Status::Ended(how);
        drop(state);
        self.over.send_replace(true);
        self.stop_heartbeat();
        true
    }

    /// Like [`Lease::end`], but answers the error of a claim that had ended already.
    pub(crate) fn take(&self, how: &'static str) -> Result<(), Error> {
        if self.end(how) {
            Ok(())
        } else {
            self.check()
        }
    }

    /// Waits until the claim is lost or ended; answers the error its commands now get.
    pub(crate) async fn over(&self) -> Error {
        let mut over = self.over.subscribe();
        // The sender lives as long as `self`: waiting cannot fail.
        let _ = over.wait_for(|over| *over).await;
        match self.check() {
            Err(e) => e,
            Ok(()) => Error::InvalidInput("the claim ended".into()),
        }
    }

    /// Starts renewing the lease every third of its length.
    pub(crate) fn start_heartbeat(self: &Arc<Self>) {
        let every = self.length / 3;
        let task = tokio::spawn(beat(Arc::downgrade(self), every));
        *self
            .heartbeat
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task.abort_handle());
    }

    /// Stops renewing the lease without ending the claim (a report that ends the lease
    /// itself is on its way: a heartbeat racing it would only be refused).
    pub(crate) fn stop_heartbeat(&self) {
        let task = self
            .heartbeat
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            task.abort();
        }
    }

    /// Releases a claim this worker gives up without a word from its owner (a dropped
    /// handle): in the background, best effort — if it fails, the lease expires.
    pub(crate) fn release_in_background(self: &Arc<Self>, how: &'static str, reason: &'static str) {
        if !self.end(how) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (client, fence) = (self.client.clone(), self.fence);
        runtime.spawn(async move {
            if let Err(e) = client.release(fence, Some(reason)).await {
                tracing::debug!(turn_id = %fence.turn_id, error = %e, "release failed; the lease will expire");
            }
        });
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("fence", &self.fence)
            .field("held", &self.is_held())
            .finish()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop_heartbeat();
    }
}

/// The heartbeat: renews the lease every `every` until the claim ends or is lost. A
/// failure that says nothing about the claim (the service unreachable) is tried again
/// sooner; only `turn_fenced` gives up — then the lease is lost for good.
async fn beat(lease: Weak<Lease>, every: Duration) {
    let mut delay = every;
    loop {
        tokio::time::sleep(delay).await;
        let Some(lease) = lease.upgrade() else {
            return;
        };
        if !lease.is_held() {
            return;
        }
        match lease
            .client
            .heartbeat(lease.fence, Some(lease.length))
            .await
        {
            Ok(renewed) => {
                lease.state().expires_at = renewed.lease_expires_at;
                delay = every;
            }
            Err(e) => {
                lease.observe(&e);
                if lease.is_lost() {
                    return;
                }
                tracing::warn!(turn_id = %lease.fence.turn_id, error = %e, "heartbeat failed; trying again");
                delay = (every / 3).max(Duration::from_millis(100));
            }
        }
    }
}
