//! The webhook dispatcher: on the replica that owns the `webhooks` processor, one
//! delivery loop per active subscription.
//!
//! A loop reads the log after its subscription's cursor through the subscription's type
//! filter and posts each event in log order; the cursor moves (compare-and-set, fenced by
//! the subscription's generation) only after a `2xx`, so a crash, an ownership change or a
//! lost answer delivers an event again — at least once, never out of order. A failed
//! delivery is retried after `base · 2ⁿ` (capped); after `max_attempts` the subscription
//! is paused with the failure recorded and its loop ends. Events that do not match move
//! the cursor too (to the log's head, without a write per event), so a quiet filter does
//! not rescan the log.
//!
//! Loops are reconciled with the store every `refresh` (or at once when this replica's
//! API changed a subscription): a new or resumed subscription gets a loop, a deleted or
//! paused one loses it. A loop whose write is refused (resumed or deleted meanwhile) ends;
//! the next reconciliation starts the resumed one afresh.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::signature;
use super::{Deliverer, Delivery, DeliveryError, DeliveryFailure, Subscription, WebhookStore};
use crate::clock::Clock;
use crate::log::{LogPosition, LogReader, LoggedEvent};
use crate::processor::ProcessorStore;
use crate::views::CloudEvent;

/// How failed deliveries are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per event before the subscription pauses (at least 1).
    pub max_attempts: u32,
    /// The wait after the first failure; it doubles after each further one.
    pub base: Duration,
    /// The longest wait.
    pub cap: Duration,
}

impl RetryPolicy {
    /// The wait after the `failed`-th failed attempt (1-based).
    pub fn delay(&self, failed: u32) -> Duration {
        let doublings = failed.saturating_sub(1).min(30);
        self.base.saturating_mul(1u32 << doublings).min(self.cap)
    }
}

/// Tuning of the dispatcher.
#[derive(Debug, Clone)]
pub struct DispatchOptions {
    /// Retries.
    pub retry: RetryPolicy,
    /// How often subscriptions are reloaded (changes made on other replicas show within
    /// this long).
    pub refresh: Duration,
    /// How often an idle loop reads the log without a doorbell.
    pub poll: Duration,
    /// How often ownership is confirmed (or sought).
    pub ownership_check: Duration,
    /// Events read per log query.
    pub batch: u32,
    /// This replica's id.
    pub owner: String,
}

/// The dispatcher's ports.
pub struct Ports<S, P, L, D> {
    /// Subscriptions and cursors.
    pub store: Arc<S>,
    /// Ownership of the `webhooks` processor.
    pub processors: P,
    /// The global log.
    pub log: L,
    /// HTTP.
    pub deliverer: Arc<D>,
    /// The time deliveries are signed at.
    pub clock: Arc<dyn Clock>,
}

/// Runs the delivery loops of this replica (see the module documentation).
pub struct Dispatcher<S, P, L, D> {
    ports: Ports<S, P, L, D>,
    options: DispatchOptions,
    changed: Arc<Notify>,
}

/// The running loops: per subscription, the generation it was started for, its stop
/// token and its task.
type Loops = HashMap<Uuid, (i64, CancellationToken, JoinHandle<()>)>;

/// How one event's delivery ended.
enum Outcome {
    Delivered,
    /// Paused, deleted, resumed elsewhere, or shutting down: the loop ends.
    Stop,
}

impl<S, P, L, D> Dispatcher<S, P, L, D>
where
    S: WebhookStore,
    P: ProcessorStore,
    L: LogReader + Clone,
    D: Deliverer,
{
    /// A dispatcher over `ports`.
    pub fn new(ports: Ports<S, P, L, D>, options: DispatchOptions) -> Self {
        Self {
            ports,
            options,
            changed: Arc::new(Notify::new()),
        }
    }

    /// Notified by the API after it created, resumed or deleted a subscription, so this
    /// replica reconciles at once instead of at the next refresh.
    pub fn changes(&self) -> Arc<Notify> {
        self.changed.clone()
    }

    /// Runs until `shutdown`; then stops every loop and gives ownership up.
    #[tracing::instrument(name = "webhooks", skip_all, fields(owner = %self.options.owner))]
    pub async fn run(self, shutdown: CancellationToken) {
        let name = super::WEBHOOKS;
        let mut loops: Loops = HashMap::new();
        // The processor position last stored: written again only when it moves.
        let mut reported: Option<LogPosition> = None;
        let mut leader = false;
        let mut checked: Option<tokio::time::Instant> = None;
        let mut refreshed: Option<tokio::time::Instant> = None;
        let tick = self.options.refresh.min(self.options.ownership_check);
        while !shutdown.is_cancelled() {
            if checked.is_none_or(|at| at.elapsed() >= self.options.ownership_check) {
                let held = match self.ports.processors.claim(name, &self.options.owner).await {
                    Ok(held) => held,
                    Err(e) => {
                        tracing::warn!(error = %e, "webhooks: ownership check failed");
                        false
                    }
                };
                if held != leader {
                    tracing::info!(leader = held, "webhooks ownership changed");
                    leader = held;
                    refreshed = None;
                }
                checked = Some(tokio::time::Instant::now());
            }
            if !leader {
                stop_all(&mut loops).await;
            } else if refreshed.is_none_or(|at| at.elapsed() >= self.options.refresh)
                && self.reconcile(&mut loops, &mut reported, &shutdown).await
            {
                refreshed = Some(tokio::time::Instant::now());
            }
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = self.changed.notified() => refreshed = None,
                _ = tokio::time::sleep(tick) => {}
            }
        }
        stop_all(&mut loops).await;
        if leader {
            if let Err(e) = self
                .ports
                .processors
                .release(name, &self.options.owner)
                .await
            {
                tracing::warn!(error = %e, "webhooks: could not release ownership");
            }
        }
    }

    /// Starts and stops loops to match the active subscriptions; `false` when the store
    /// could not be read (retried at the next tick).
    async fn reconcile(
        &self,
        loops: &mut Loops,
        reported: &mut Option<LogPosition>,
        shutdown: &CancellationToken,
    ) -> bool {
        let active = match self.ports.store.active().await {
            Ok(active) => active,
            Err(e) => {
                tracing::warn!(error = %e, "webhooks: cannot load subscriptions");
                return false;
            }
        };
        let wanted: HashMap<Uuid, i64> = active.iter().map(|s| (s.id, s.generation)).collect();
        let stale: Vec<Uuid> = loops
            .iter()
            .filter(|(id, (generation, _, task))| {
                wanted.get(id) != Some(generation) || task.is_finished()
            })
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            if let Some((_, token, task)) = loops.remove(&id) {
                token.cancel();
                joined(task.await);
            }
        }
        for subscription in &active {
            if loops.contains_key(&subscription.id) {
                continue;
            }
            let token = shutdown.child_token();
            let task = tokio::spawn(
                Loop {
                    subscription: subscription.clone(),
                    store: self.ports.store.clone(),
                    log: self.ports.log.clone(),
                    deliverer: self.ports.deliverer.clone(),
                    clock: self.ports.clock.clone(),
                    options: self.options.clone(),
                    token: token.clone(),
                }
                .run(),
            );
            loops.insert(subscription.id, (subscription.generation, token, task));
        }
        let slowest = active.iter().map(|s| s.position).min();
        let position = match slowest {
            Some(p) => Some(p),
            None => self.ports.log.head().await.ok(),
        };
        if let Some(position) = position.filter(|p| *reported != Some(*p)) {
            match self.ports.store.report_position(position).await {
                Ok(()) => *reported = Some(position),
                Err(e) => tracing::debug!(error = %e, "webhooks: cannot store the position"),
            }
        }
        metrics::gauge!("pm_webhooks_active").set(active.len() as f64);
        true
    }
}

async fn stop_all(loops: &mut Loops) {
    for (_, (_, token, task)) in loops.drain() {
        token.cancel();
        joined(task.await);
    }
}

/// A stopped loop's end: a panic is a defect to see in the log, not to drop.
fn joined(result: Result<(), tokio::task::JoinError>) {
    if let Err(e) = result {
        if e.is_panic() {
            tracing::error!(error = %e, "a webhook delivery loop panicked");
        }
    }
}

/// One subscription's delivery loop.
struct Loop<S, L, D> {
    subscription: Subscription,
    store: Arc<S>,
    log: L,
    deliverer: Arc<D>,
    clock: Arc<dyn Clock>,
    options: DispatchOptions,
    token: CancellationToken,
}

impl<S: WebhookStore, L: LogReader, D: Deliverer> Loop<S, L, D> {
    #[tracing::instrument(name = "webhook", skip_all, fields(webhook = %self.subscription.id))]
    async fn run(self) {
        let filter = self.subscription.filter();
        let mut doorbell = self.log.doorbell();
        let mut position = self.subscription.position;
        while !self.token.is_cancelled() {
            doorbell.borrow_and_update();
            // The head first: every event up to it that matches is in the read below, so
            // a short read lets the cursor skip to it.
            let read = async {
                let head = self.log.head().await?;
                let events = self
                    .log
                    .read_after(position, &filter, self.options.batch)
                    .await?;
                Ok::<_, crate::AppError>((head, events))
            };
            let (head, events) = match read.await {
                Ok(read) => read,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook: cannot read the log");
                    if !self
                        .pause(self.options.poll.max(Duration::from_secs(1)))
                        .await
                    {
                        return;
                    }
                    continue;
                }
            };
            for event in &events {
                match self.deliver(event).await {
                    Outcome::Delivered => {}
                    Outcome::Stop => return,
                }
                if !self.advance(position, event.position).await {
                    return;
                }
                position = event.position;
            }
            if events.len() < self.options.batch as usize {
                if head > position {
                    if !self.advance(position, head).await {
                        return;
                    }
                    position = head;
                }
                tokio::select! {
                    _ = self.token.cancelled() => {}
                    _ = doorbell.changed() => {}
                    _ = tokio::time::sleep(self.options.poll) => {}
                }
            }
        }
    }

    /// Sleeps `wait` unless cancelled; `false` when cancelled.
    async fn pause(&self, wait: Duration) -> bool {
        tokio::select! {
            _ = self.token.cancelled() => false,
            _ = tokio::time::sleep(wait) => true,
        }
    }

    /// Moves the stored cursor; retries while the store is away. `false` when the loop
    /// must end (fenced, or cancelled before the write went through — the event is
    /// delivered again later, which at least once allows).
    async fn advance(&self, from: LogPosition, to: LogPosition) -> bool {
        loop {
            match self
                .store
                .advance(
                    self.subscription.id,
                    self.subscription.generation,
                    from,
                    to,
                    self.clock.now(),
                )
                .await
            {
                Ok(moved) => return moved,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook: cannot store the cursor");
                    if !self.pause(Duration::from_secs(1)).await {
                        return false;
                    }
                }
            }
        }
    }

    /// Delivers one event, retrying until it succeeds, the retries run out (the
    /// subscription pauses) or the loop is stopped.
    async fn deliver(&self, event: &LoggedEvent) -> Outcome {
        let cloud = CloudEvent::from(event);
        let body = match serde_json::to_vec(&cloud) {
            Ok(body) => body,
            Err(e) => {
                // Cannot happen with JSON values; if it did, retrying would not help.
                self.failed(event, &cloud.id, u32::MAX, e.to_string().into())
                    .await;
                return Outcome::Stop;
            }
        };
        let mut attempts = match self.subscription.failing {
            Some((position, attempts)) if position == event.position => attempts,
            _ => 0,
        };
        loop {
            attempts = attempts.saturating_add(1);
            let timestamp = self.clock.now().timestamp();
            let result =
                match signature::sign(&self.subscription.secret, &cloud.id, timestamp, &body) {
                    Ok(signature) => {
                        let delivery = Delivery {
                            url: self.subscription.url.clone(),
                            id: cloud.id.clone(),
                            timestamp,
                            signature,
                            body: body.clone(),
                            trace: event.meta().trace(),
                        };
                        tokio::select! {
                            _ = self.token.cancelled() => return Outcome::Stop,
                            result = self.deliverer.deliver(&delivery) => result,
                        }
                    }
                    // A secret that cannot sign will not sign next time either.
                    Err(e) => {
                        attempts = u32::MAX;
                        Err(DeliveryError {
                            status: None,
                            message: e.to_string(),
                        })
                    }
                };
            match result {
                Ok(()) => {
                    metrics::counter!("pm_webhook_deliveries_total", "outcome" => "delivered")
                        .increment(1);
                    return Outcome::Delivered;
                }
                Err(e) => {
                    metrics::counter!("pm_webhook_deliveries_total", "outcome" => "failed")
                        .increment(1);
                    if !self.failed(event, &cloud.id, attempts, e).await {
                        return Outcome::Stop;
                    }
                }
            }
            if !self.pause(self.options.retry.delay(attempts)).await {
                return Outcome::Stop;
            }
        }
    }

    /// Records a failed attempt (pausing after the last); `false` when the loop must end.
    async fn failed(
        &self,
        event: &LoggedEvent,
        id: &str,
        attempts: u32,
        error: DeliveryError,
    ) -> bool {
        let pause = attempts >= self.options.retry.max_attempts;
        let failure = DeliveryFailure {
            position: event.position.to_string(),
            event_id: id.to_string(),
            event_type: event.event_type.clone(),
            attempts: attempts.min(self.options.retry.max_attempts.max(1)),
            status: error.status,
            error: error.message,
            at: self.clock.now(),
        };
        tracing::warn!(position = %event.position, attempts, status = ?failure.status, error = %failure.error, pause, "webhook delivery failed");
        match self
            .store
            .fail(
                self.subscription.id,
                self.subscription.generation,
                &failure,
                pause,
            )
            .await
        {
            Ok(true) if pause => {
                metrics::counter!("pm_webhook_pauses_total").increment(1);
                false
            }
            Ok(true) => true,
            // Resumed or deleted meanwhile.
            Ok(false) => false,
            // The store is away: keep retrying the delivery; the pause is written with a
            // later failure.
            Err(e) => {
                tracing::warn!(error = %e, "webhook: cannot record the failure");
                true
            }
        }
    }
}

impl From<String> for DeliveryError {
    fn from(message: String) -> Self {
        Self {
            status: None,
            message,
        }
    }
}

#[cfg(test)]
mod tests;
