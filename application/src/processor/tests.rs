//! The processor runner against in-memory fakes of its ports: the log, the cursor and
//! lease store, and a handler whose failures the tests choose.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use super::*;
use crate::log::memory::{self, MemoryLog};

/// A logged event at position `seq` (also the isolation tests' events).
pub(super) fn event(seq: i64) -> LoggedEvent {
    memory::event(seq, "note.written")
}

/// The log: events 1..=n, a doorbell.
fn log_of(n: i64) -> MemoryLog {
    let log = MemoryLog::new();
    for seq in 1..=n {
        log.push(event(seq));
    }
    log
}

/// What the handler does with the next batch.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Next {
    Transient,
    MoveCursorTo(i64),
}

/// The stored cursor, the lease, what was applied and parked, and scripted failures.
#[derive(Default)]
struct World {
    cursor: LogPosition,
    lease: bool,
    applied: Vec<i64>,
    parked: Vec<i64>,
    poison: HashSet<i64>,
    /// Whether the handler rejects a batch holding poison without naming the event.
    anonymous: bool,
    script: VecDeque<Next>,
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<World>>);

impl Shared {
    fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        f(&mut self.0.lock().expect("lock"))
    }
}

impl ProcessorStore for Shared {
    async fn claim(&self, _: &str, _: &str) -> Result<bool, AppError> {
        Ok(self.with(|w| w.lease))
    }
    async fn release(&self, _: &str, _: &str) -> Result<(), AppError> {
        Ok(())
    }
    async fn cursor(&self, _: &str) -> Result<LogPosition, AppError> {
        Ok(self.with(|w| w.cursor))
    }
}

impl BatchHandler for Shared {
    fn name(&self) -> &str {
        "test"
    }

    async fn apply(
        &self,
        from: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        self.with(|w| {
            match w.script.pop_front() {
                Some(Next::Transient) => return Err(BatchError::Transient("database away".into())),
                Some(Next::MoveCursorTo(seq)) => w.cursor = LogPosition(seq),
                None => {}
            }
            if w.cursor != from {
                return Err(BatchError::CursorMoved);
            }
            let culprit = events.iter().position(|e| w.poison.contains(&e.position.0));
            if culprit.is_some() && w.anonymous {
                return Err(BatchError::Rejected("a statement failed".into()));
            }
            if let Some(index) = culprit {
                return Err(BatchError::Poison {
                    index,
                    reason: "unreadable".into(),
                });
            }
            w.applied.extend(events.iter().map(|e| e.position.0));
            let last = events.last().map_or(from, |e| e.position);
            w.cursor = last;
            Ok(last)
        })
    }

    async fn park(
        &self,
        from: LogPosition,
        event: &LoggedEvent,
        _: &str,
    ) -> Result<LogPosition, BatchError> {
        self.with(|w| {
            if w.cursor != from {
                return Err(BatchError::CursorMoved);
            }
            w.parked.push(event.position.0);
            w.cursor = event.position;
            Ok(event.position)
        })
    }
}

fn options() -> RunnerOptions {
    RunnerOptions {
        batch_size: 3,
        poll_interval: Duration::from_millis(50),
        ownership_check: Duration::from_millis(250),
        owner: "me".into(),
        linger: Duration::ZERO,
    }
}

/// Runs the runner until `done` holds (time is paused: waits cost nothing), then stops it.
async fn run_until(
    shared: &Shared,
    log: &MemoryLog,
    done: impl Fn(&World) -> bool,
) -> ProcessorStatus {
    let (runner, status) = ProcessorRunner::new(
        Arc::new(shared.clone()),
        shared.clone(),
        log.clone(),
        options(),
    );
    let stop = CancellationToken::new();
    let task = tokio::spawn(runner.run(stop.clone()));
    for _ in 0..10_000 {
        if shared.with(|w| done(w)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let last = status.borrow().clone();
    stop.cancel();
    task.await.expect("runner ends");
    last
}

#[tokio::test(start_paused = true)]
async fn given_the_lease_when_events_arrive_then_each_is_applied_once_in_order() {
    let shared = Shared::default();
    shared.with(|w| w.lease = true);
    let log = log_of(7);
    let status = run_until(&shared, &log, |w| w.applied.len() == 7).await;
    assert_eq!(
        shared.with(|w| w.applied.clone()),
        (1..=7).collect::<Vec<_>>()
    );
    assert!(status.leader);
    assert_eq!(status.cursor, LogPosition(7));
}

#[tokio::test(start_paused = true)]
async fn given_no_lease_then_nothing_is_applied_until_it_is_granted() {
    let shared = Shared::default();
    let log = log_of(4);
    let (runner, status) = ProcessorRunner::new(
        Arc::new(shared.clone()),
        shared.clone(),
        log.clone(),
        options(),
    );
    let stop = CancellationToken::new();
    let task = tokio::spawn(runner.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        shared.with(|w| w.applied.is_empty()),
        "a replica without the lease applied events"
    );
    assert!(!status.borrow().leader);
    shared.with(|w| w.lease = true);
    for _ in 0..1000 {
        if shared.with(|w| w.applied.len() == 4) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(shared.with(|w| w.applied.clone()), vec![1, 2, 3, 4]);
    stop.cancel();
    task.await.expect("runner ends");
}

#[tokio::test(start_paused = true)]
async fn given_the_lease_lost_then_applying_stops_and_resumes_from_the_stored_cursor() {
    let shared = Shared::default();
    shared.with(|w| w.lease = true);
    let log = log_of(3);
    let (runner, _status) = ProcessorRunner::new(
        Arc::new(shared.clone()),
        shared.clone(),
        log.clone(),
        options(),
    );
    let stop = CancellationToken::new();
    let task = tokio::spawn(runner.run(stop.clone()));
    while shared.with(|w| w.applied.len() < 3) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Another replica takes over and applies 4 and 5 meanwhile.
    shared.with(|w| w.lease = false);
    tokio::time::sleep(Duration::from_secs(2)).await;
    log.push(event(4));
    log.push(event(5));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        shared.with(|w| w.applied.len()),
        3,
        "applied without the lease"
    );
    shared.with(|w| {
        w.applied.extend([4, 5]);
        w.cursor = LogPosition(5);
    });
    log.push(event(6));
    shared.with(|w| w.lease = true);
    while shared.with(|w| w.applied.len() < 6) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(shared.with(|w| w.applied.clone()), vec![1, 2, 3, 4, 5, 6]);
    stop.cancel();
    task.await.expect("runner ends");
}

#[tokio::test(start_paused = true)]
async fn given_the_cursor_moved_under_the_runner_then_it_reloads_and_applies_nothing_twice() {
    let shared = Shared::default();
    shared.with(|w| {
        w.lease = true;
        // Before the first batch applies, another owner has already applied 1 and 2.
        w.script.push_back(Next::MoveCursorTo(2));
    });
    let log = log_of(5);
    run_until(&shared, &log, |w| w.cursor.0 == 5).await;
    assert_eq!(shared.with(|w| w.applied.clone()), vec![3, 4, 5]);
}

#[tokio::test(start_paused = true)]
async fn given_a_poison_event_then_it_is_parked_and_the_others_are_applied() {
    let shared = Shared::default();
    shared.with(|w| {
        w.lease = true;
        w.poison.insert(2);
    });
    let log = log_of(5);
    let status = run_until(&shared, &log, |w| w.cursor.0 == 5).await;
    assert_eq!(shared.with(|w| w.applied.clone()), vec![1, 3, 4, 5]);
    assert_eq!(shared.with(|w| w.parked.clone()), vec![2]);
    assert_eq!(status.parked, 1);
}

#[tokio::test(start_paused = true)]
async fn given_a_rejected_batch_then_it_is_bisected_and_only_the_poison_events_parked() {
    let shared = Shared::default();
    shared.with(|w| {
        w.lease = true;
        w.anonymous = true;
        w.poison.extend([2, 5]);
    });
    let log = log_of(7);
    let status = run_until(&shared, &log, |w| w.cursor.0 == 7).await;
    assert_eq!(shared.with(|w| w.applied.clone()), vec![1, 3, 4, 6, 7]);
    assert_eq!(shared.with(|w| w.parked.clone()), vec![2, 5]);
    assert_eq!(status.parked, 2);
}

#[tokio::test(start_paused = true)]
async fn given_transient_failures_then_the_batch_is_retried_until_it_applies() {
    let shared = Shared::default();
    shared.with(|w| {
        w.lease = true;
        w.script
            .extend([Next::Transient, Next::Transient, Next::Transient]);
    });
    let log = log_of(2);
    let status = run_until(&shared, &log, |w| w.applied.len() == 2).await;
    assert_eq!(shared.with(|w| w.applied.clone()), vec![1, 2]);
    assert_eq!(
        status.last_error, None,
        "the error clears once a batch applies"
    );
}
