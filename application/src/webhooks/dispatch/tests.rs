//! The dispatcher against in-memory fakes: a log, a subscription store, a receiver whose
//! answers the tests choose, and an ownership the tests grant or refuse. Time is tokio's
//! paused clock, so backoffs pass at once.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use super::*;
use crate::clock::SystemClock;
use crate::log::memory::MemoryLog;
use crate::webhooks::{NewWebhook, WebhookState, WebhookView};
use crate::AppError;

struct Row {
    subscription: Subscription,
    state: WebhookState,
    last_error: Option<DeliveryFailure>,
}

#[derive(Default)]
struct FakeStore {
    rows: Mutex<HashMap<Uuid, Row>>,
    reported: Mutex<Option<LogPosition>>,
    /// Cursor writes that fail as if the database were away, before they succeed again.
    away: Mutex<u32>,
}

impl FakeStore {
    fn with(&self, f: impl FnOnce(&mut HashMap<Uuid, Row>) -> bool) -> bool {
        f(&mut self.rows.lock().expect("lock"))
    }

    fn row<T>(&self, id: Uuid, f: impl FnOnce(&Row) -> T) -> T {
        f(self.rows.lock().expect("lock").get(&id).expect("a row"))
    }
}

impl WebhookStore for FakeStore {
    async fn create(&self, new: &NewWebhook) -> Result<(), AppError> {
        self.with(|rows| {
            rows.insert(
                new.id,
                Row {
                    subscription: Subscription {
                        id: new.id,
                        url: new.url.clone(),
                        types: new.types.clone(),
                        scope: new.scope.clone(),
                        secret: new.secret.clone(),
                        position: new.position,
                        generation: 0,
                        failing: None,
                    },
                    state: WebhookState::Active,
                    last_error: None,
                },
            );
            true
        });
        Ok(())
    }

    async fn list(&self) -> Result<Vec<WebhookView>, AppError> {
        unreachable!("the dispatcher does not list")
    }

    async fn get(&self, _: Uuid) -> Result<Option<WebhookView>, AppError> {
        unreachable!("the dispatcher does not get")
    }

    async fn delete(&self, id: Uuid) -> Result<bool, AppError> {
        Ok(self.with(|rows| rows.remove(&id).is_some()))
    }

    async fn resume(
        &self,
        id: Uuid,
        from: Option<LogPosition>,
        _: DateTime<Utc>,
    ) -> Result<Option<WebhookView>, AppError> {
        self.with(|rows| {
            let row = rows.get_mut(&id).expect("a row");
            row.state = WebhookState::Active;
            row.last_error = None;
            row.subscription.generation += 1;
            if let Some(from) = from {
                row.subscription.position = LogPosition(from.0 - 1);
            }
            true
        });
        Ok(None)
    }

    async fn active(&self) -> Result<Vec<Subscription>, AppError> {
        let rows = self.rows.lock().expect("lock");
        Ok(rows
            .values()
            .filter(|r| r.state == WebhookState::Active)
            .map(|r| Subscription {
                failing: r
                    .last_error
                    .as_ref()
                    .and_then(|f| Some((f.position.parse().ok()?, f.attempts))),
                ..r.subscription.clone()
            })
            .collect())
    }

    async fn advance(
        &self,
        id: Uuid,
        generation: i64,
        from: LogPosition,
        to: LogPosition,
        _: DateTime<Utc>,
    ) -> Result<bool, AppError> {
        {
            let mut away = self.away.lock().expect("lock");
            if *away > 0 {
                *away -= 1;
                return Err(AppError::Unavailable("the database is away".into()));
            }
        }
        Ok(self.with(|rows| match rows.get_mut(&id) {
            Some(row)
                if row.state == WebhookState::Active
                    && row.subscription.generation == generation
                    && row.subscription.position == from =>
            {
                row.subscription.position = to;
                row.last_error = None;
                true
            }
            _ => false,
        }))
    }

    async fn fail(
        &self,
        id: Uuid,
        generation: i64,
        failure: &DeliveryFailure,
        pause: bool,
    ) -> Result<bool, AppError> {
        Ok(self.with(|rows| match rows.get_mut(&id) {
            Some(row)
                if row.state == WebhookState::Active
                    && row.subscription.generation == generation =>
            {
                row.last_error = Some(failure.clone());
                if pause {
                    row.state = WebhookState::Paused;
                }
                true
            }
            _ => false,
        }))
    }

    async fn report_position(&self, position: LogPosition) -> Result<(), AppError> {
        *self.reported.lock().expect("lock") = Some(position);
        Ok(())
    }
}

/// Ownership granted while `owned` is set.
#[derive(Clone)]
struct FakeOwnership(Arc<Mutex<bool>>);

impl ProcessorStore for FakeOwnership {
    async fn claim(&self, _: &str, _: &str) -> Result<bool, AppError> {
        Ok(*self.0.lock().expect("lock"))
    }

    async fn release(&self, _: &str, _: &str) -> Result<(), AppError> {
        Ok(())
    }

    async fn cursor(&self, _: &str) -> Result<LogPosition, AppError> {
        Ok(LogPosition::START)
    }
}

/// Records every delivery; answers with the queued statuses first, then `2xx`, or
/// always `500` while `down`.
#[derive(Default)]
struct Receiver {
    received: Mutex<Vec<Delivery>>,
    failures: Mutex<VecDeque<u16>>,
    down: Mutex<bool>,
}

impl Deliverer for Receiver {
    async fn deliver(&self, delivery: &Delivery) -> Result<(), DeliveryError> {
        self.received.lock().expect("lock").push(delivery.clone());
        let status = if *self.down.lock().expect("lock") {
            Some(500)
        } else {
            self.failures.lock().expect("lock").pop_front()
        };
        match status {
            Some(status) => Err(DeliveryError {
                status: Some(status),
                message: format!("answered {status}"),
            }),
            None => Ok(()),
        }
    }
}

impl Receiver {
    fn positions(&self) -> Vec<i64> {
        self.received
            .lock()
            .expect("lock")
            .iter()
            .map(|d| {
                let body: serde_json::Value = serde_json::from_slice(&d.body).expect("json");
                body["data"]["n"].as_i64().expect("n")
            })
            .collect()
    }
}

struct Harness {
    log: MemoryLog,
    store: Arc<FakeStore>,
    receiver: Arc<Receiver>,
    owned: Arc<Mutex<bool>>,
    shutdown: CancellationToken,
    changes: Arc<Notify>,
    task: JoinHandle<()>,
}

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn start(max_attempts: u32) -> Harness {
    let log = MemoryLog::new();
    let store = Arc::new(FakeStore::default());
    let receiver = Arc::new(Receiver::default());
    let owned = Arc::new(Mutex::new(true));
    let dispatcher = Dispatcher::new(
        Ports {
            store: store.clone(),
            processors: FakeOwnership(owned.clone()),
            log: log.clone(),
            deliverer: receiver.clone(),
            clock: Arc::new(SystemClock),
        },
        DispatchOptions {
            retry: RetryPolicy {
                max_attempts,
                base: Duration::from_millis(100),
                cap: Duration::from_secs(1),
            },
            refresh: Duration::from_millis(200),
            poll: Duration::from_millis(50),
            ownership_check: Duration::from_millis(100),
            batch: 3,
            owner: "replica-a".into(),
        },
    );
    let changes = dispatcher.changes();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(dispatcher.run(shutdown.clone()));
    Harness {
        log,
        store,
        receiver,
        owned,
        shutdown,
        changes,
        task,
    }
}

impl Harness {
    async fn subscribe(&self, types: &[&str]) -> Uuid {
        let id = Uuid::new_v4();
        self.store
            .create(&NewWebhook {
                id,
                url: "http://receiver.test/hook".into(),
                types: types.iter().map(|t| t.to_string()).collect(),
                scope: crate::scope::Scope::All,
                secret: SECRET.into(),
                position: self.log.head().await.expect("head"),
                at: Utc::now(),
            })
            .await
            .expect("stored");
        self.changes.notify_one();
        id
    }

    /// Lets the dispatcher run for `ms` of (paused, auto-advancing) time.
    async fn settle(&self, ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("the dispatcher ends");
    }
}

#[test]
fn given_failures_when_the_delay_is_computed_then_it_doubles_up_to_the_cap() {
    let retry = RetryPolicy {
        max_attempts: 5,
        base: Duration::from_secs(1),
        cap: Duration::from_secs(10),
    };
    let delays: Vec<u64> = (1..=6).map(|n| retry.delay(n).as_secs()).collect();
    assert_eq!(delays, vec![1, 2, 4, 8, 10, 10]);
    assert_eq!(retry.delay(u32::MAX), Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn given_a_receiver_failing_at_first_when_events_arrive_then_each_matching_one_is_delivered_in_order(
) {
    let h = start(5);
    let id = h.subscribe(&["turn.*"]).await;
    h.receiver.failures.lock().expect("lock").extend([500, 503]);
    for t in [
        "turn.started",
        "session.opened",
        "turn.completed",
        "turn.started",
        "turn.started",
    ] {
        h.log.append(t);
    }
    h.settle(2_000).await;
    // The first event twice more (two failures), then each once, in log order.
    assert_eq!(h.receiver.positions(), vec![1, 1, 1, 3, 4, 5]);
    h.store.row(id, |row| {
        assert_eq!(row.subscription.position, LogPosition(5));
        assert_eq!(row.last_error, None, "a success clears the failure");
    });
    // Every delivery is signed for its id, time and body.
    for d in h.receiver.received.lock().expect("lock").iter() {
        let ts = d.timestamp.to_string();
        assert_eq!(
            signature::verify(SECRET, &d.id, &ts, &d.signature, &d.body, d.timestamp),
            Ok(())
        );
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn given_events_that_do_not_match_when_read_then_the_cursor_skips_them_without_deliveries() {
    let h = start(3);
    let id = h.subscribe(&["project_manager.task.created"]).await;
    for _ in 0..7 {
        h.log.append("turn.started");
    }
    h.settle(1_000).await;
    assert!(h.receiver.positions().is_empty());
    assert_eq!(h.store.row(id, |r| r.subscription.position), LogPosition(7));
    assert_eq!(
        *h.store.reported.lock().expect("lock"),
        Some(LogPosition(7))
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn given_a_receiver_that_keeps_failing_when_retries_run_out_then_it_pauses_and_a_resume_continues_from_the_failed_event(
) {
    let h = start(3);
    let id = h.subscribe(&["*"]).await;
    *h.receiver.down.lock().expect("lock") = true;
    h.log.append("turn.started");
    h.log.append("turn.completed");
    h.settle(5_000).await;
    assert_eq!(
        h.receiver.positions(),
        vec![1, 1, 1],
        "three attempts, then no more"
    );
    h.store.row(id, |row| {
        assert_eq!(row.state, WebhookState::Paused);
        let failure = row.last_error.clone().expect("the failure is kept");
        assert_eq!(
            (failure.position.as_str(), failure.attempts, failure.status),
            ("1", 3, Some(500))
        );
        assert_eq!(failure.event_type, "turn.started");
        assert_eq!(row.subscription.position, LogPosition::START);
    });
    // Fixed and resumed: delivery continues with the failed event.
    *h.receiver.down.lock().expect("lock") = false;
    h.store.resume(id, None, Utc::now()).await.expect("resumed");
    h.changes.notify_one();
    h.settle(1_000).await;
    assert_eq!(h.receiver.positions(), vec![1, 1, 1, 1, 2]);
    // Resumed from an earlier position: delivered again from there.
    h.store
        .resume(id, Some(LogPosition(2)), Utc::now())
        .await
        .expect("resumed");
    h.changes.notify_one();
    h.settle(1_000).await;
    assert_eq!(h.receiver.positions(), vec![1, 1, 1, 1, 2, 2]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn given_a_failing_delivery_when_the_loop_starts_again_then_it_goes_on_counting_its_attempts()
{
    let h = start(4);
    let id = h.subscribe(&["*"]).await;
    *h.receiver.down.lock().expect("lock") = true;
    h.log.append("turn.started");
    // Two attempts, then another owner takes over (this replica loses and regains it).
    tokio::time::sleep(Duration::from_millis(150)).await;
    *h.owned.lock().expect("lock") = false;
    h.settle(500).await;
    let before = h.receiver.positions().len();
    assert!(
        (1..4).contains(&before),
        "{before} attempts before the handover"
    );
    *h.owned.lock().expect("lock") = true;
    h.settle(5_000).await;
    // Four attempts in all, not four more.
    assert_eq!(h.receiver.positions(), vec![1; 4]);
    assert_eq!(h.store.row(id, |r| r.state), WebhookState::Paused);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn given_the_database_away_when_a_delivery_succeeded_then_its_cursor_is_written_later_without_delivering_again(
) {
    let h = start(3);
    let id = h.subscribe(&["*"]).await;
    *h.store.away.lock().expect("lock") = 5;
    h.log.append("turn.started");
    h.log.append("turn.completed");
    h.settle(15_000).await;
    // Each event once: the cursor write is retried, not the delivery.
    assert_eq!(h.receiver.positions(), vec![1, 2]);
    assert_eq!(
        *h.store.away.lock().expect("lock"),
        0,
        "the writes did fail"
    );
    assert_eq!(h.store.row(id, |r| r.subscription.position), LogPosition(2));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn given_another_owner_when_events_arrive_then_this_replica_delivers_nothing_until_it_owns_them(
) {
    let h = start(3);
    *h.owned.lock().expect("lock") = false;
    h.subscribe(&["*"]).await;
    h.log.append("turn.started");
    h.settle(1_000).await;
    assert!(h.receiver.positions().is_empty());
    *h.owned.lock().expect("lock") = true;
    h.settle(1_000).await;
    assert_eq!(h.receiver.positions(), vec![1]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn given_a_deleted_subscription_when_events_arrive_then_nothing_more_is_delivered() {
    let h = start(3);
    let id = h.subscribe(&["*"]).await;
    h.log.append("turn.started");
    h.settle(500).await;
    assert!(h.store.delete(id).await.expect("deleted"));
    h.changes.notify_one();
    h.settle(500).await;
    h.log.append("turn.completed");
    h.settle(1_000).await;
    assert_eq!(h.receiver.positions(), vec![1]);
    h.stop().await;
}
