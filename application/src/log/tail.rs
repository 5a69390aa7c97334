//! One reader of the log's tail per process. Every live SSE stream is fed from it: the
//! tail reads each new stretch of the log once (woken by the doorbell, or polling) and
//! broadcasts it as a [`Batch`]; each stream applies its own filter in memory. A stream
//! reads the store itself only while it is behind the tail (catching up from its
//! `Last-Event-ID`, or after a gap).
//!
//! The broadcast never waits for a subscriber: one that falls more than
//! [`CAPACITY`] batches behind loses its place ([`tokio::sync::broadcast`]'s `Lagged`)
//! and is ended by the stream with a clear last event, to resume with `Last-Event-ID`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{EventFilter, LogPosition, LogReader, LoggedEvent};
use crate::views::CloudEvent;

/// The CloudEvent JSON of `e`, as every stream sends it.
pub fn render(e: &LoggedEvent) -> Arc<str> {
    serde_json::to_string(&CloudEvent::from(e))
        .unwrap_or_default()
        .into()
}

/// Batches the broadcast keeps for subscribers that are behind. With [`PAGE`] it bounds
/// the memory the tail holds: at most 32 000 events (about 3 KiB each with their JSON),
/// typically far fewer — under load a batch is the few events of one commit group.
pub const CAPACITY: usize = 64;

/// Events the tail reads at once.
const PAGE: u32 = 500;

/// A stretch of the log: every event after `after`, in log order, up to the last one.
#[derive(Debug)]
pub struct Batch {
    /// The position the batch continues from (exclusive).
    pub after: LogPosition,
    /// The events, at least one.
    pub events: Vec<LoggedEvent>,
    /// Each event's CloudEvent JSON, rendered once for every stream — when the first
    /// stream delivers it ([`Batch::data`]): processors take the events alone, and a stream
    /// whose filter passes few events renders only those.
    data: Box<[OnceLock<Arc<str>>]>,
}

/// Where a batch stands with a subscriber at `cursor`.
#[derive(Debug, PartialEq)]
pub enum Fit {
    /// The subscriber has seen all of it.
    Seen,
    /// It starts after the subscriber's cursor: what lies between must be read from the
    /// store first.
    Gap,
    /// The events after the cursor: those from this index on.
    Deliver(usize),
}

impl Batch {
    /// A batch of `events` (at least one) after `after`.
    pub fn new(after: LogPosition, events: Vec<LoggedEvent>) -> Self {
        let data = events.iter().map(|_| OnceLock::new()).collect();
        Self {
            after,
            events,
            data,
        }
    }

    /// The CloudEvent JSON of event `i` of the batch (rendered at the first call, once for
    /// every stream); `None` past the batch's end.
    pub fn data(&self, i: usize) -> Option<&Arc<str>> {
        let event = self.events.get(i)?;
        Some(self.data.get(i)?.get_or_init(|| render(event)))
    }

    /// The position of its last event.
    pub fn last(&self) -> LogPosition {
        self.events.last().map_or(self.after, |e| e.position)
    }

    /// What a subscriber at `cursor` takes of it.
    pub fn fit(&self, cursor: LogPosition) -> Fit {
        if self.last() <= cursor {
            Fit::Seen
        } else if self.after > cursor {
            Fit::Gap
        } else {
            Fit::Deliver(self.events.partition_point(|e| e.position <= cursor))
        }
    }
}

/// The process's reader of the log's tail (cheap to clone).
#[derive(Debug, Clone)]
pub struct LogTail {
    tx: broadcast::Sender<Arc<Batch>>,
    /// How far the tail has read (or, with nobody subscribed, seen the head): a reader
    /// behind it that receives no batch reads the store itself.
    position: Arc<AtomicI64>,
}

impl Default for LogTail {
    fn default() -> Self {
        Self::new()
    }
}

impl LogTail {
    /// A tail without its reader yet: subscribe now, [`run`](LogTail::run) it later.
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(CAPACITY);
        Self {
            tx,
            position: Arc::new(AtomicI64::new(0)),
        }
    }

    /// How far the tail has read the log.
    pub fn position(&self) -> LogPosition {
        LogPosition(self.position.load(Ordering::Acquire))
    }

    /// Reads the log from its head on, broadcasting every new stretch, until `shutdown`.
    pub async fn run<L: LogReader>(self, log: L, poll: Duration, shutdown: CancellationToken) {
        let mut doorbell = log.doorbell();
        let mut cursor = loop {
            match log.head().await {
                Ok(head) => {
                    self.position.fetch_max(head.0, Ordering::AcqRel);
                    break head;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the log tail could not read the head; retrying")
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(poll) => {}
            }
        };
        let all = EventFilter::default();
        loop {
            doorbell.borrow_and_update();
            if self.tx.receiver_count() == 0 {
                // Nobody to deliver to: follow the head only (an index-only read). A first
                // subscriber catches up from the store, and the batches follow on from
                // here (one that does not fit its cursor sends it to the store again).
                match log.head().await {
                    Ok(head) => {
                        cursor = cursor.max(head);
                        self.position.fetch_max(cursor.0, Ordering::AcqRel);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the log tail could not read the head; retrying")
                    }
                }
            } else {
                match log.read_after(cursor, &all, PAGE).await {
                    Ok(events) if !events.is_empty() => {
                        let last = events.last().map_or(cursor, |e| e.position);
                        let after = std::mem::replace(&mut cursor, last);
                        metrics::counter!("pm_log_tail_events_total")
                            .increment(events.len() as u64);
                        // Sent before the position moves: a reader that sees the
                        // position has the batch waiting (or lagged past it).
                        // A subscriber that left meanwhile is not an error.
                        let _ = self.tx.send(Arc::new(Batch::new(after, events)));
                        self.position.fetch_max(last.0, Ordering::AcqRel);
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "the log tail could not read the log; retrying")
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = doorbell.changed() => {}
                _ = tokio::time::sleep(poll) => {}
            }
        }
    }

    /// Batches from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Batch>> {
        self.tx.subscribe()
    }

    /// The broadcast, for tests that play the tail's reader.
    #[cfg(test)]
    pub(crate) fn tx_for_tests(&self) -> &broadcast::Sender<Arc<Batch>> {
        &self.tx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(position: i64) -> LoggedEvent {
        LoggedEvent {
            position: LogPosition(position),
            aggregate_type: "message".into(),
            aggregate_id: position.to_string(),
            sequence: 1,
            event_type: "project_manager.message.added".into(),
            event_version: "1.0".into(),
            payload: serde_json::json!({}).into(),
            metadata: serde_json::json!({}).into(),
            conversation_id: None,
            organization: None,
        }
    }

    fn batch(after: i64, positions: &[i64]) -> Batch {
        let events: Vec<_> = positions.iter().copied().map(event).collect();
        Batch::new(LogPosition(after), events)
    }

    #[test]
    fn an_events_json_is_rendered_when_first_delivered_and_only_then() {
        let b = batch(10, &[12, 15, 19]);
        let rendered = |b: &Batch| b.data.iter().map(|d| d.get().is_some()).collect::<Vec<_>>();
        assert_eq!(rendered(&b), vec![false, false, false]);

        let first = b.data(1).expect("in the batch").clone();
        assert_eq!(first, render(&b.events[1]));
        assert_eq!(rendered(&b), vec![false, true, false]);
        // A second stream gets the same rendering, not a new one.
        assert!(Arc::ptr_eq(&first, b.data(1).expect("in the batch")));
        assert!(b.data(3).is_none());
    }

    #[test]
    fn a_subscriber_takes_only_what_follows_its_cursor() {
        let b = batch(10, &[12, 15, 19]);
        let positions = |f: Fit| match f {
            Fit::Deliver(from) => b.events[from..]
                .iter()
                .map(|e| e.position.value())
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        assert_eq!(positions(b.fit(LogPosition(10))), vec![12, 15, 19]);
        assert_eq!(positions(b.fit(LogPosition(12))), vec![15, 19]);
        assert_eq!(positions(b.fit(LogPosition(17))), vec![19]);
    }

    #[test]
    fn a_batch_seen_or_beyond_a_gap_is_not_delivered() {
        let b = batch(10, &[12, 15]);
        assert_eq!(b.fit(LogPosition(15)), Fit::Seen);
        assert_eq!(b.fit(LogPosition(20)), Fit::Seen);
        assert_eq!(b.fit(LogPosition(9)), Fit::Gap);
    }
}
