//! [`Worker`]: the worker's loop of WORKERS.md — long-poll a claim, hold the turn with
//! heartbeats while working it, answer with commands fenced by the claim — so a worker
//! program is a loop over [`Worker::next`] and the commands of its [`TurnHandle`].
//!
//! Why a type for it: the protocol's safety rests on details every worker would otherwise
//! write again — renewing the lease well before it ends, stopping at once when the
//! service says the claim is gone (`409 turn_fenced`), sending the fence with every write,
//! and giving held turns back when the process stops so they do not wait for their
//! leases to expire.

mod builder;
#[cfg(feature = "nats")]
mod doorbell;
mod handle;
mod lease;

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;

pub use builder::WorkerBuilder;
pub use handle::TurnHandle;

use crate::retry::jitter;
use crate::{ClaimRequest, ClaimedTurn, Client, Error};
pub(crate) use lease::Lease;

/// A worker (role `llm`): claims turns one at a time and hands each out as a
/// [`TurnHandle`] that keeps its lease alive.
///
/// Cheap to clone (clones are the same worker: [`shutdown`](Worker::shutdown) on one stops
/// them all). Run several in one process for parallelism, each with its own name.
///
/// ```no_run
/// # async fn run(client: pm_client::Client) -> Result<(), pm_client::Error> {
/// use std::time::Duration;
///
/// let worker = pm_client::Worker::builder(client, "llm-1")
///     .lease(Duration::from_secs(30))
///     .wait(Duration::from_secs(10))
///     .build()?;
/// while let Some(turn) = worker.next().await? {
///     // … work it with turn.add_message(…), turn.create_conversation_checkpoint(…) …
///     turn.finish();
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    request: ClaimRequest,
    lease: Duration,
    /// `true` once shut down.
    closed: watch::Sender<bool>,
    /// The claims handed out, to release at shutdown.
    held: Mutex<Vec<Weak<Lease>>>,
    /// Claims in flight: a shutdown waits (a little) for their answers.
    in_flight: watch::Sender<usize>,
    /// Turns claimed after the worker closed, kept alive for the shutdown to release.
    kept: Mutex<Vec<Arc<Lease>>>,
    /// The agents' wakeup doorbells it sleeps on between claims, when given.
    #[cfg(feature = "nats")]
    doorbell: Option<doorbell::Doorbell>,
}

impl Inner {
    fn new(client: Client, request: ClaimRequest, lease: Duration) -> Self {
        Self {
            client,
            request,
            lease,
            closed: watch::channel(false).0,
            held: Mutex::new(Vec::new()),
            in_flight: watch::channel(0).0,
            kept: Mutex::new(Vec::new()),
            #[cfg(feature = "nats")]
            doorbell: None,
        }
    }
}

/// How long a closed worker waits for a claim in flight to answer: the service may have
/// committed it already (its answer takes milliseconds then), and a turn so claimed is
/// released rather than left to its lease. A claim still long-polling after this is
/// abandoned — the service stops waiting when the request goes away.
const CLAIM_GRACE: Duration = Duration::from_secs(2);

/// Counts a claim in flight for as long as it lives.
struct InFlight<'w>(&'w watch::Sender<usize>);

impl<'w> InFlight<'w> {
    fn new(count: &'w watch::Sender<usize>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Worker {
    /// A builder for a worker named `name` (shown to operators on its turns' leases).
    pub fn builder(client: Client, name: impl Into<String>) -> WorkerBuilder {
        WorkerBuilder::new(client, ClaimRequest::new().worker(name))
    }

    /// A worker claiming with `request` (its name, wait, lease and filters set).
    fn with(client: Client, request: ClaimRequest, lease: Duration) -> Self {
        Self {
            inner: Arc::new(Inner::new(client, request, lease)),
        }
    }

    /// [`Worker::with`], sleeping on `doorbell` between claims.
    #[cfg(feature = "nats")]
    fn with_doorbell(
        client: Client,
        request: ClaimRequest,
        lease: Duration,
        doorbell: doorbell::Doorbell,
    ) -> Self {
        let mut inner = Inner::new(client, request, lease);
        inner.doorbell = Some(doorbell);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The claim to send: with doorbells it answers at once (the wait is the doorbell's).
    fn claim_request(&self) -> ClaimRequest {
        #[cfg(feature = "nats")]
        if self.inner.doorbell.is_some() {
            return self.inner.request.clone().wait(Duration::ZERO);
        }
        self.inner.request.clone()
    }

    /// After a claim found nothing: with doorbells, sleeps until one rings (or the
    /// worker's wait passed: a ring may be missed); a long-poll already waited.
    async fn idle(&self) {
        #[cfg(feature = "nats")]
        if let Some(doorbell) = &self.inner.doorbell {
            let wait = self.inner.request.wait.unwrap_or(Duration::from_secs(10));
            doorbell.wait(wait).await;
        }
    }

    /// The worker's name.
    pub fn name(&self) -> &str {
        self.inner.request.worker.as_deref().unwrap_or_default()
    }

    /// The worker's client.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The next turn: long-polls claims until one succeeds; `None` once the worker is shut
    /// down (also while waiting: the long-poll is abandoned).
    ///
    /// Failures worth waiting out (the service unreachable or unavailable) are retried
    /// here with the client's backoff, so a worker outlives a restart of the service. A
    /// claim whose answer was lost is not seen again: its turn waits for its lease to
    /// expire (see [`Client::claim`]). A claim in flight when the worker closes is waited
    /// for a moment (the service may have committed it): a turn it brings is released by
    /// [`shutdown`](Worker::shutdown), not left to its lease.
    ///
    /// # Errors
    /// The failures no wait cures: `401`/`403` (a token without the `llm` role), `422`
    /// (filters the service refuses).
    pub async fn next(&self) -> Result<Option<TurnHandle>, Error> {
        let mut closed = self.inner.closed.subscribe();
        let mut failures = 0;
        loop {
            if *closed.borrow_and_update() {
                return Ok(None);
            }
            let in_flight = InFlight::new(&self.inner.in_flight);
            let claim = self.inner.client.claim(self.claim_request());
            tokio::pin!(claim);
            let answer = tokio::select! {
                _ = closed.wait_for(|c| *c) => None,
                answer = &mut claim => Some(answer),
            };
            let Some(answer) = answer else {
                // Closed with a claim in flight: the service may have committed it. Take
                // its answer (briefly) and hand the turn to the shutdown's releases
                // instead of leaving it to its lease.
                if let Ok(Ok(Some(claimed))) = tokio::time::timeout(CLAIM_GRACE, &mut claim).await {
                    self.keep_for_release(claimed);
                }
                return Ok(None);
            };
            let error = match answer {
                Ok(Some(claimed)) => {
                    // Still counted in flight until held: a shutdown now releases it.
                    let handle = self.hold(claimed).await;
                    drop(in_flight);
                    return Ok(handle);
                }
                Ok(None) => {
                    failures = 0;
                    drop(in_flight);
                    tokio::select! {
                        _ = closed.wait_for(|c| *c) => return Ok(None),
                        () = self.idle() => {}
                    }
                    continue;
                }
                Err(e) if e.is_retryable() => e,
                Err(e) => return Err(e),
            };
            drop(in_flight);
            failures += 1;
            let delay = self.inner.client.inner.retry.backoff(failures, jitter());
            tracing::warn!(worker = self.name(), error = %error, ?delay, "claim failed; waiting");
            tokio::select! {
                _ = closed.wait_for(|c| *c) => return Ok(None),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// A claimed turn as a handle with its heartbeat running; released at once (and
    /// `None`) when the worker was shut down meanwhile.
    async fn hold(&self, claimed: ClaimedTurn) -> Option<TurnHandle> {
        let lease = Lease::new(
            self.inner.client.clone(),
            claimed.fence(),
            self.inner.lease,
            claimed.lease_expires_at,
        );
        lease.start_heartbeat();
        {
            let mut held = self.held();
            held.retain(|l| l.strong_count() > 0);
            held.push(Arc::downgrade(&lease));
        }
        if *self.inner.closed.borrow() {
            release(&lease, "worker_shutdown").await;
            return None;
        }
        Some(TurnHandle::new(claimed, lease))
    }

    /// A turn claimed after the worker closed: kept (alive, without a handle) until the
    /// shutdown releases it.
    fn keep_for_release(&self, claimed: ClaimedTurn) {
        let lease = Lease::new(
            self.inner.client.clone(),
            claimed.fence(),
            self.inner.lease,
            claimed.lease_expires_at,
        );
        self.held().push(Arc::downgrade(&lease));
        self.kept().push(lease);
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Lease>>> {
        self.inner
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Lease>>> {
        self.inner
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stops claiming: [`next`](Worker::next) answers `None` from now on (a waiting one at
    /// once, abandoning its long-poll). Turns already handed out stay held; see
    /// [`shutdown`](Worker::shutdown).
    ///
    /// With several workers in one process, close them all before shutting any down:
    /// otherwise a turn one of them releases wakes the long-poll of another, which claims
    /// it only to release it again — or, if that worker is shut down while the claim is
    /// being answered, leaves it to wait for its lease.
    pub fn close(&self) {
        self.inner.closed.send_replace(true);
    }

    /// Stops the worker ([`close`](Worker::close)) and releases every turn it handed out
    /// and not finished — so another worker claims it at once instead of after its lease.
    /// The handles of those turns stay usable as values, but their commands fail with
    /// `turn_fenced` and their [`ended`](TurnHandle::ended) resolves. Answers how many
    /// turns were released; failures are logged (their leases expire instead).
    pub async fn shutdown(&self) -> usize {
        self.close();
        self.settle().await;
        let leases: Vec<Arc<Lease>> = self.held().drain(..).filter_map(|l| l.upgrade()).collect();
        self.kept().clear();
        let releases = leases.iter().map(|l| release(l, "worker_shutdown"));
        futures::future::join_all(releases)
            .await
            .into_iter()
            .filter(|released| *released)
            .count()
    }

    /// Waits (briefly) until the claims in flight when the worker closed have answered: a
    /// turn one brings is kept for [`shutdown`](Worker::shutdown) to release. A fleet
    /// closes and settles every worker before it shuts any down, so that no worker's
    /// still-open long-poll claims a turn another one just released.
    pub async fn settle(&self) {
        let mut in_flight = self.inner.in_flight.subscribe();
        let _ = tokio::time::timeout(CLAIM_GRACE, in_flight.wait_for(|n| *n == 0)).await;
    }

    /// Whether [`close`](Worker::close) or [`shutdown`](Worker::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        *self.inner.closed.borrow()
    }
}

/// Ends a held claim and releases its turn; `true` when the service released it.
async fn release(lease: &Lease, reason: &str) -> bool {
    if !lease.end("released (shutdown)") {
        return false;
    }
    match lease.client.release(lease.fence, Some(reason)).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(turn_id = %lease.fence.turn_id, error = %e, "release failed; the lease will expire");
            false
        }
    }
}
