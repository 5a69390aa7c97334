//! A processor's events from the process's log tail ([`LogTail`]) instead of its own
//! reads of the store: the tail reads each stretch of the log once for every processor and
//! SSE stream of the process, so under load the store is read once per event, not once
//! per consumer.
//!
//! The tail's batches are contiguous and commit-safe (the tail reads them with the same
//! [`LogReader::read_after`]), so a processor whose cursor a batch continues takes its
//! events from it. Whenever the batches do not continue from the cursor — the processor
//! is behind (started late, slow, lagged past the broadcast's capacity) or the tail has
//! read further than any batch received — the processor reads the store itself, as
//! without a tail, until a batch continues from its cursor again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::broadcast::Receiver;

use crate::log::tail::{Batch, Fit, LogTail};
use crate::log::{EventFilter, LogPosition, LogReader, LoggedEvent};
use crate::AppError;

/// A subscription to the tail, with the batch not yet consumed.
pub(super) struct Feed {
    tail: LogTail,
    rx: Receiver<Arc<Batch>>,
    held: Option<Arc<Batch>>,
}

impl Feed {
    /// Subscribes to `tail` (batches from now on).
    pub(super) fn new(tail: LogTail) -> Self {
        let rx = tail.subscribe();
        Self {
            tail,
            rx,
            held: None,
        }
    }

    /// Up to `limit` events after `from`: from the tail's batches while they continue
    /// from it, otherwise from `log`.
    pub(super) async fn read<L: LogReader>(
        &mut self,
        from: LogPosition,
        limit: u32,
        log: &L,
    ) -> Result<Vec<LoggedEvent>, AppError> {
        let limit = limit.max(1) as usize;
        let mut out: Vec<LoggedEvent> = Vec::new();
        let mut at = from;
        loop {
            let batch = match self.held.take() {
                Some(batch) => batch,
                None => match self.rx.try_recv() {
                    Ok(batch) => batch,
                    Err(TryRecvError::Lagged(_)) => {
                        metrics::counter!("pm_processor_tail_lagged_total").increment(1);
                        continue;
                    }
                    Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                },
            };
            match batch.fit(at) {
                Fit::Seen => {}
                Fit::Gap => {
                    self.held = Some(batch);
                    break;
                }
                Fit::Deliver(first) => {
                    let events = &batch.events[first..];
                    let room = limit - out.len();
                    if events.len() > room {
                        out.extend(events[..room].iter().cloned());
                        self.held = Some(batch);
                        break;
                    }
                    out.extend(events.iter().cloned());
                    at = batch.last();
                    if out.len() == limit {
                        break;
                    }
                }
            }
        }
        if out.is_empty() && (self.held.is_some() || self.tail.position() > from) {
            // Behind the tail: the store has what no batch here continues with.
            return log
                .read_after(from, &EventFilter::default(), limit as u32)
                .await;
        }
        Ok(out)
    }

    /// Waits until a batch arrives (kept for [`Feed::read`]) or `wait` passes.
    pub(super) async fn wait(&mut self, wait: Duration) {
        if self.held.is_some() {
            return;
        }
        match tokio::time::timeout(wait, self.rx.recv()).await {
            Ok(Ok(batch)) => self.held = Some(batch),
            // Lagged: the next read finds the gap; closed: the tail is gone (shutdown).
            Ok(Err(RecvError::Lagged(_) | RecvError::Closed)) | Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn event(position: i64) -> LoggedEvent {
        LoggedEvent {
            position: LogPosition(position),
            aggregate_type: "note".into(),
            aggregate_id: position.to_string(),
            sequence: 1,
            event_type: "note.written".into(),
            event_version: "1.0".into(),
            payload: serde_json::json!({}),
            metadata: serde_json::json!({}),
            conversation_id: None,
        }
    }

    /// A store of events 1..=n that counts its reads.
    struct Store {
        n: i64,
        reads: Mutex<Vec<i64>>,
        bell: tokio::sync::watch::Sender<u64>,
    }

    impl Store {
        fn new(n: i64) -> Self {
            Self {
                n,
                reads: Mutex::new(Vec::new()),
                bell: tokio::sync::watch::channel(0).0,
            }
        }

        fn reads(&self) -> Vec<i64> {
            self.reads.lock().expect("lock").clone()
        }
    }

    impl LogReader for Store {
        async fn read_after(
            &self,
            after: LogPosition,
            _: &EventFilter,
            limit: u32,
        ) -> Result<Vec<LoggedEvent>, AppError> {
            self.reads.lock().expect("lock").push(after.0);
            Ok((after.0 + 1..=self.n)
                .take(limit as usize)
                .map(event)
                .collect())
        }

        async fn head(&self) -> Result<LogPosition, AppError> {
            Ok(LogPosition(self.n))
        }

        async fn held_back(&self) -> Result<Option<Duration>, AppError> {
            Ok(None)
        }

        fn doorbell(&self) -> tokio::sync::watch::Receiver<u64> {
            self.bell.subscribe()
        }
    }

    fn positions(events: &[LoggedEvent]) -> Vec<i64> {
        events.iter().map(|e| e.position.0).collect()
    }

    /// A tail whose reader is the store: its `run` broadcasts what the store holds.
    async fn tail_at(store: Arc<Store>) -> (LogTail, tokio_util::sync::CancellationToken) {
        let tail = LogTail::new();
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn(
            tail.clone()
                .run(StoreRef(store), Duration::from_millis(5), stop.clone()),
        );
        (tail, stop)
    }

    /// The store behind an `Arc` as a reader.
    struct StoreRef(Arc<Store>);

    impl LogReader for StoreRef {
        async fn read_after(
            &self,
            after: LogPosition,
            filter: &EventFilter,
            limit: u32,
        ) -> Result<Vec<LoggedEvent>, AppError> {
            self.0.read_after(after, filter, limit).await
        }
        async fn head(&self) -> Result<LogPosition, AppError> {
            self.0.head().await
        }
        async fn held_back(&self) -> Result<Option<Duration>, AppError> {
            Ok(None)
        }
        fn doorbell(&self) -> tokio::sync::watch::Receiver<u64> {
            self.0.doorbell()
        }
    }

    #[tokio::test]
    async fn given_batches_that_continue_the_cursor_when_read_then_the_store_is_not_read() {
        let store = Store::new(0);
        let tail = LogTail::new();
        let mut feed = Feed::new(tail.clone());
        // The tail's reader would send these; here they are sent by hand.
        let send = |after: i64, positions: &[i64]| {
            let batch = Batch::new(
                LogPosition(after),
                positions.iter().copied().map(event).collect(),
            );
            tail.tx_for_tests()
                .send(Arc::new(batch))
                .expect("a subscriber");
        };
        send(0, &[1, 2, 3]);
        send(3, &[4, 5]);
        assert_eq!(
            positions(&feed.read(LogPosition(0), 10, &store).await.expect("read")),
            vec![1, 2, 3, 4, 5]
        );
        send(5, &[6, 7, 8]);
        // A limit splits a batch; the rest comes with the next read.
        assert_eq!(
            positions(&feed.read(LogPosition(5), 2, &store).await.expect("read")),
            vec![6, 7]
        );
        assert_eq!(
            positions(&feed.read(LogPosition(7), 10, &store).await.expect("read")),
            vec![8]
        );
        assert!(feed
            .read(LogPosition(8), 10, &store)
            .await
            .expect("read")
            .is_empty());
        assert!(store.reads().is_empty(), "{:?}", store.reads());
    }

    #[tokio::test]
    async fn given_a_cursor_behind_the_tail_when_read_then_the_store_fills_the_gap_until_a_batch_continues(
    ) {
        let store = Arc::new(Store::new(12));
        let tail = LogTail::new();
        let mut feed = Feed::new(tail.clone());
        tail.tx_for_tests()
            .send(Arc::new(Batch::new(
                LogPosition(10),
                vec![event(11), event(12)],
            )))
            .expect("a subscriber");
        // At 0: the batch starts at 10 — a gap: the store is read (in pages of 4).
        let first = feed.read(LogPosition(0), 4, &*store).await.expect("read");
        assert_eq!(positions(&first), vec![1, 2, 3, 4]);
        let second = feed.read(LogPosition(4), 6, &*store).await.expect("read");
        assert_eq!(positions(&second), vec![5, 6, 7, 8, 9, 10]);
        // At 10 the held batch continues: no more store reads.
        let third = feed.read(LogPosition(10), 6, &*store).await.expect("read");
        assert_eq!(positions(&third), vec![11, 12]);
        assert_eq!(store.reads(), vec![0, 4]);
    }

    #[tokio::test]
    async fn given_a_quiet_tail_ahead_of_the_cursor_when_read_then_the_store_is_read() {
        // The tail started at the head (12) and has broadcast nothing since: a processor
        // at 5 must not wait for a batch that will not come.
        let store = Arc::new(Store::new(12));
        let (tail, stop) = tail_at(Arc::new(Store::new(12))).await;
        let mut feed = Feed::new(tail.clone());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tail.position() < LogPosition(12) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the tail never read the head"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let events = feed.read(LogPosition(5), 100, &*store).await.expect("read");
        assert_eq!(positions(&events), vec![6, 7, 8, 9, 10, 11, 12]);
        // Caught up with a quiet tail: nothing, without a read.
        let reads = store.reads().len();
        assert!(feed
            .read(LogPosition(12), 100, &*store)
            .await
            .expect("read")
            .is_empty());
        assert_eq!(store.reads().len(), reads);
        stop.cancel();
    }
}
