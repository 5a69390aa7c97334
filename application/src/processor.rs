//! The processor runtime: a named consumer of the global log. It reads from its stored
//! cursor in batches and hands each batch to its [`BatchHandler`], which applies the
//! events and stores the new cursor in one database transaction (exactly-once effect).
//!
//! - **One owner at a time**: ownership ([`ProcessorStore::claim`]) that ends when its
//!   holder dies (on PostgreSQL a session-level advisory lock on a dedicated connection,
//!   on SQLite an exclusive lock on a file beside the database), so another replica takes
//!   over within one [`RunnerOptions::ownership_check`]. The handler also moves the cursor
//!   with compare-and-set, so even two owners at once could not apply an event twice.
//! - **Poison events are parked**: when a batch fails for a reason retrying will not fix,
//!   [`isolate`] finds the culprit (split around the event the handler names, or bisected
//!   when it cannot name one); the events before it are applied, it is recorded with its
//!   error and skipped, and the processor goes on.
//! - **Transient errors are retried** with exponential backoff.
//! - **Events from the log tail** ([`ProcessorRunner::with_tail`]): a runner at the tail's
//!   position takes its events from the process's one reader of the log instead of
//!   reading the store itself; behind it, it reads the store (see [`feed`]).
//! - **Status** (cursor, lag, parked count) is published on a watch channel and as
//!   metrics (`pm_processor_lag_events`, `pm_processor_events_total`,
//!   `pm_processor_parked_total`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::log::{EventFilter, LogPosition, LogReader, LoggedEvent};
use crate::AppError;

mod feed;
pub mod isolate;

use feed::Feed;
use isolate::{apply_isolating, Failure, Isolation};

/// Why a batch did not apply. The transaction was rolled back in every case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// `events[index]` cannot be applied (bad payload, violated constraint): park it.
    #[error("event {index} of the batch is poison: {reason}")]
    Poison {
        /// Its index in the batch.
        index: usize,
        /// Why.
        reason: String,
    },
    /// The batch cannot be applied as a whole and retrying will not help, but the handler
    /// cannot tell which event is at fault (a multi-row statement failed): the runner
    /// bisects the batch to find the culprit and park it.
    #[error("the batch cannot be applied: {0}")]
    Rejected(String),
    /// The database is unavailable or the transaction lost a race: retry later.
    #[error("transient: {0}")]
    Transient(String),
    /// The stored cursor is not where this runner thought (another owner moved it).
    #[error("the stored cursor moved")]
    CursorMoved,
}

/// Applies batches of one processor.
pub trait BatchHandler: Send + Sync + 'static {
    /// The processor's name.
    fn name(&self) -> &str;

    /// Applies `events` (the events right after `from`) and moves the stored cursor from
    /// `from` to the last event's position, in one transaction.
    ///
    /// # Errors
    /// [`BatchError`]; nothing is applied then.
    fn apply(
        &self,
        from: LogPosition,
        events: &[LoggedEvent],
    ) -> impl Future<Output = Result<LogPosition, BatchError>> + Send;

    /// Records `event` as parked with `reason` and moves the cursor past it, in one
    /// transaction.
    ///
    /// # Errors
    /// [`BatchError::Transient`] or [`BatchError::CursorMoved`].
    fn park(
        &self,
        from: LogPosition,
        event: &LoggedEvent,
        reason: &str,
    ) -> impl Future<Output = Result<LogPosition, BatchError>> + Send;
}

/// Cursor and ownership storage of processors.
///
/// # Errors
/// Every method fails with [`AppError::Unavailable`] when the store cannot be reached.
pub trait ProcessorStore: Send + Sync + 'static {
    /// Takes ownership of processor `name` for `owner` when nobody alive holds it, or
    /// confirms `owner` still holds it; `true` when `owner` is the owner.
    fn claim(&self, name: &str, owner: &str)
        -> impl Future<Output = Result<bool, AppError>> + Send;
    /// Gives ownership of `name` up.
    fn release(&self, name: &str, owner: &str)
        -> impl Future<Output = Result<(), AppError>> + Send;
    /// The stored cursor of `name`.
    fn cursor(&self, name: &str) -> impl Future<Output = Result<LogPosition, AppError>> + Send;
}

/// Tuning of a runner.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Events per batch.
    pub batch_size: u32,
    /// How long an idle runner waits before polling the log again.
    pub poll_interval: Duration,
    /// How often the owner confirms it still owns the processor, and how often a replica
    /// that does not own it tries to take it over.
    pub ownership_check: Duration,
    /// The identity of this replica.
    pub owner: String,
    /// After a batch that was not full, wait this long before reading again, so events
    /// arriving at a high rate are applied in fewer, larger transactions (bounded extra
    /// latency for much less work per event).
    pub linger: Duration,
}

/// What a runner reports about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessorStatus {
    /// Whether this replica owns the processor.
    pub leader: bool,
    /// The last cursor this runner knows.
    pub cursor: LogPosition,
    /// Events parked by this runner since start.
    pub parked: u64,
    /// The last error, if the runner is retrying.
    pub last_error: Option<String>,
}

/// Runs one processor until `shutdown`.
pub struct ProcessorRunner<H, S, L> {
    handler: Arc<H>,
    store: S,
    log: L,
    options: RunnerOptions,
    status: watch::Sender<ProcessorStatus>,
    tail: Option<crate::log::tail::LogTail>,
}

impl<H: BatchHandler, S: ProcessorStore, L: LogReader> ProcessorRunner<H, S, L> {
    /// A runner of `handler`; returns it with a receiver of its status.
    pub fn new(
        handler: Arc<H>,
        store: S,
        log: L,
        options: RunnerOptions,
    ) -> (Self, watch::Receiver<ProcessorStatus>) {
        let (status, rx) = watch::channel(ProcessorStatus::default());
        (
            Self {
                handler,
                store,
                log,
                options,
                status,
                tail: None,
            },
            rx,
        )
    }

    /// Takes events from `tail` (the process's reader of the log, which must be run)
    /// whenever its batches continue from the cursor, instead of reading the store.
    #[must_use]
    pub fn with_tail(mut self, tail: crate::log::tail::LogTail) -> Self {
        self.tail = Some(tail);
        self
    }

    /// Runs until `shutdown` is cancelled, then gives ownership up.
    #[tracing::instrument(name = "processor", skip_all, fields(processor = self.handler.name(), owner = %self.options.owner))]
    pub async fn run(self, shutdown: CancellationToken) {
        let name = self.handler.name().to_string();
        let mut doorbell = self.log.doorbell();
        let mut backoff = Duration::from_millis(50);
        let mut leader = false;
        let mut claimed_at = tokio::time::Instant::now();
        let mut cursor = None;
        // The lag metric costs a query of the log's head: at most once a second.
        let mut lag_reported: Option<tokio::time::Instant> = None;
        let all = EventFilter::default();
        // Subscribed to the tail only while this replica owns the processor: a replica that
        // does not would hold the tail's last batches unread, and keep the tail reading
        // whole events where the head alone would do.
        let mut feed: Option<Feed> = None;
        while !shutdown.is_cancelled() {
            if !leader || claimed_at.elapsed() >= self.options.ownership_check {
                match self.store.claim(&name, &self.options.owner).await {
                    Ok(held) => {
                        if held != leader {
                            tracing::info!(processor = %name, leader = held, "processor ownership changed");
                        }
                        leader = held;
                        claimed_at = tokio::time::Instant::now();
                        if !held {
                            cursor = None;
                        }
                    }
                    Err(e) => {
                        self.fail(&name, &e.to_string(), &mut backoff, &shutdown)
                            .await;
                        leader = false;
                        // Not the owner as far as it knows: off the tail too.
                        feed = None;
                        continue;
                    }
                }
                self.status.send_modify(|s| s.leader = leader);
            }
            if !leader {
                // Subscribed to the tail only while owning: a replica that does not would
                // hold the tail's batches unread.
                feed = None;
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = tokio::time::sleep(self.options.ownership_check) => {}
                }
                continue;
            }
            let from = match cursor {
                Some(c) => c,
                None => match self.store.cursor(&name).await {
                    Ok(c) => {
                        self.status.send_modify(|s| s.cursor = c);
                        c
                    }
                    Err(e) => {
                        self.fail(&name, &e.to_string(), &mut backoff, &shutdown)
                            .await;
                        continue;
                    }
                },
            };
            cursor = Some(from);
            doorbell.borrow_and_update();
            let read = match &self.tail {
                Some(tail) => {
                    feed.get_or_insert_with(|| Feed::new(tail.clone()))
                        .read(from, self.options.batch_size, &self.log)
                        .await
                }
                None => {
                    self.log
                        .read_after(from, &all, self.options.batch_size)
                        .await
                }
            };
            let events = match read {
                Ok(events) => events,
                Err(e) => {
                    self.fail(&name, &e.to_string(), &mut backoff, &shutdown)
                        .await;
                    continue;
                }
            };
            if lag_reported.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                self.report_lag(&name, from).await;
                lag_reported = Some(tokio::time::Instant::now());
            }
            if events.is_empty() {
                match &mut feed {
                    Some(feed) => tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = feed.wait(self.options.poll_interval) => {}
                    },
                    None => {
                        self.idle(&mut doorbell, self.options.poll_interval, &shutdown)
                            .await
                    }
                }
                continue;
            }
            let full = events.len() >= self.options.batch_size as usize;
            metrics::histogram!("pm_processor_batch_events", "processor" => name.clone())
                .record(events.len() as f64);
            match self.apply(&name, from, &events).await {
                Ok(next) => {
                    cursor = Some(next);
                    backoff = Duration::from_millis(50);
                    self.status.send_modify(|s| {
                        s.cursor = next;
                        s.last_error = None;
                    });
                    if !full && !self.options.linger.is_zero() {
                        tokio::select! {
                            _ = shutdown.cancelled() => {}
                            _ = tokio::time::sleep(self.options.linger) => {}
                        }
                    }
                }
                Err(BatchError::CursorMoved) => {
                    tracing::warn!(processor = %name, "stored cursor moved under us; reloading");
                    cursor = None;
                }
                Err(e) => {
                    cursor = None;
                    self.fail(&name, &e.to_string(), &mut backoff, &shutdown)
                        .await;
                }
            }
        }
        if leader {
            if let Err(e) = self.store.release(&name, &self.options.owner).await {
                tracing::warn!(processor = %name, error = %e, "could not release ownership");
            }
        }
    }

    /// Applies a batch; a poison event in it is isolated ([`isolate`]): the events before
    /// it are applied, it is parked, and the events after it are applied in turn. Returns
    /// the cursor after the batch.
    #[tracing::instrument(name = "batch", skip_all, fields(from = %from, events = events.len()))]
    async fn apply(
        &self,
        name: &str,
        from: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        let mut target = Isolating {
            handler: &*self.handler,
            status: &self.status,
            name,
            at: from,
        };
        apply_isolating(&mut target, events).await?;
        Ok(target.at)
    }

    async fn report_lag(&self, name: &str, cursor: LogPosition) {
        if let Ok(head) = self.log.head().await {
            let lag = head.distance_from(cursor);
            metrics::gauge!("pm_processor_lag_events", "processor" => name.to_string())
                .set(lag as f64);
        }
    }

    async fn fail(
        &self,
        name: &str,
        error: &str,
        backoff: &mut Duration,
        shutdown: &CancellationToken,
    ) {
        tracing::warn!(
            processor = name,
            error,
            retry_in_ms = backoff.as_millis() as u64,
            "processor error; retrying"
        );
        self.status
            .send_modify(|s| s.last_error = Some(error.to_string()));
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(*backoff) => {}
        }
        *backoff = (*backoff * 2).min(Duration::from_secs(5));
    }

    async fn idle(
        &self,
        doorbell: &mut watch::Receiver<u64>,
        wait: Duration,
        shutdown: &CancellationToken,
    ) {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = doorbell.changed() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// The runner's side of [`isolate`]: runs go through the handler from the cursor reached
/// so far; a culprit is parked and counted.
struct Isolating<'r, H> {
    handler: &'r H,
    status: &'r watch::Sender<ProcessorStatus>,
    name: &'r str,
    at: LogPosition,
}

impl<H: BatchHandler> Isolation for Isolating<'_, H> {
    type Error = BatchError;

    async fn apply(&mut self, events: &[LoggedEvent]) -> Result<(), Failure<BatchError>> {
        match self.handler.apply(self.at, events).await {
            Ok(next) => {
                self.at = next;
                metrics::counter!("pm_processor_events_total", "processor" => self.name.to_string())
                    .increment(events.len() as u64);
                Ok(())
            }
            Err(BatchError::Poison { index, reason }) => Err(Failure::Poison { index, reason }),
            Err(BatchError::Rejected(reason)) => Err(Failure::Rejected(reason)),
            Err(e) => Err(Failure::Stop(e)),
        }
    }

    async fn set_aside(&mut self, event: &LoggedEvent, reason: &str) -> Result<(), BatchError> {
        tracing::error!(processor = self.name, position = %event.position, event_type = %event.event_type, %reason, "parking a poison event");
        self.at = self.handler.park(self.at, event, reason).await?;
        metrics::counter!("pm_processor_parked_total", "processor" => self.name.to_string())
            .increment(1);
        self.status.send_modify(|s| s.parked += 1);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
