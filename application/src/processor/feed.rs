//! A processor's events from the process's log tail ([`LogTail`]) instead of its own
//! reads of the store: the tail reads each stretch of the log once for every processor and
//! SSE stream of the process, so under load the store is read once per event, not once
//! per consumer.
//!
//! The tail's batches are contiguous and commit-safe (the tail reads them with the same
//! [`LogReader::read_after`]), so a processor whose cursor a batch continues takes its
//! events from it. Whenever the batches do not continue from the cursor — the processor
//! is behind (started late, slow, lagged past the broadcast's capacity) or the tail has
//! read further than any batch received, or its last read of the store filled a page — the
//! processor reads the store itself, as without a tail, until a batch continues from its
//! cursor again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::broadcast::Receiver;

use crate::log::tail::{Batch, Fit, LogTail};
use crate::log::{EventFilter, LogPosition, LogReader, LoggedEvent};
use crate::AppError;

/// How long a caught-up feed trusts a quiet tail before reading the store once anyway: a
/// tail that stopped (its reads failing, its task gone) costs latency, never progress.
const TRUST: Duration = Duration::from_secs(1);

/// A subscription to the tail, with the batch not yet consumed.
pub(super) struct Feed {
    tail: LogTail,
    rx: Receiver<Arc<Batch>>,
    held: Option<Arc<Batch>>,
    /// When the store was last read (or a batch last delivered).
    checked: tokio::time::Instant,
    /// Whether the last read of the store filled its page: there is more to read there,
    /// whatever the tail says (a tail that stopped does not move its position).
    store_full: bool,
}

impl Feed {
    /// Subscribes to `tail` (batches from now on).
    pub(super) fn new(tail: LogTail) -> Self {
        let rx = tail.subscribe();
        Self {
            tail,
            rx,
            held: None,
            checked: tokio::time::Instant::now(),
            store_full: false,
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
        let behind = self.held.is_some() || self.store_full || self.tail.position() > from;
        if out.is_empty() && (behind || self.checked.elapsed() >= TRUST) {
            // Behind the tail (or the tail has been quiet a while): the store has what no
            // batch here continues with.
            self.checked = tokio::time::Instant::now();
            let events = log
                .read_after(from, &EventFilter::default(), limit as u32)
                .await?;
            self.store_full = events.len() >= limit;
            return Ok(events);
        }
        self.store_full = false;
        if !out.is_empty() {
            self.checked = tokio::time::Instant::now();
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
    use super::*;
    use crate::log::memory::{event, MemoryLog};

    const NOTE: &str = "note.written";

    fn log_of(n: i64) -> MemoryLog {
        let log = MemoryLog::new();
        for position in 1..=n {
            log.push(event(position, NOTE));
        }
        log
    }

    fn batch(after: i64, positions: &[i64]) -> Arc<Batch> {
        let events = positions.iter().map(|p| event(*p, NOTE)).collect();
        Arc::new(Batch::new(LogPosition(after), events))
    }

    fn positions(events: &[LoggedEvent]) -> Vec<i64> {
        events.iter().map(|e| e.position.0).collect()
    }

    #[tokio::test]
    async fn given_batches_that_continue_the_cursor_when_read_then_the_store_is_not_read() {
        let store = log_of(0);
        let tail = LogTail::new();
        let mut feed = Feed::new(tail.clone());
        let send = |b| {
            tail.tx_for_tests()
                .send(b)
                .map(|_| ())
                .expect("a subscriber")
        };
        send(batch(0, &[1, 2, 3]));
        send(batch(3, &[4, 5]));
        let read = feed.read(LogPosition(0), 10, &store).await.expect("read");
        assert_eq!(positions(&read), vec![1, 2, 3, 4, 5]);
        send(batch(5, &[6, 7, 8]));
        // A limit splits a batch; the rest comes with the next read.
        let read = feed.read(LogPosition(5), 2, &store).await.expect("read");
        assert_eq!(positions(&read), vec![6, 7]);
        let read = feed.read(LogPosition(7), 10, &store).await.expect("read");
        assert_eq!(positions(&read), vec![8]);
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
        let store = log_of(12);
        let tail = LogTail::new();
        let mut feed = Feed::new(tail.clone());
        tail.tx_for_tests()
            .send(batch(10, &[11, 12]))
            .expect("a subscriber");
        // At 0: the batch starts at 10 — a gap: the store is read (in pages of 4).
        let first = feed.read(LogPosition(0), 4, &store).await.expect("read");
        assert_eq!(positions(&first), vec![1, 2, 3, 4]);
        let second = feed.read(LogPosition(4), 6, &store).await.expect("read");
        assert_eq!(positions(&second), vec![5, 6, 7, 8, 9, 10]);
        // At 10 the held batch continues: no more store reads.
        let third = feed.read(LogPosition(10), 6, &store).await.expect("read");
        assert_eq!(positions(&third), vec![11, 12]);
        assert_eq!(store.reads(), vec![0, 4]);
    }

    #[tokio::test(start_paused = true)]
    async fn given_a_tail_that_stopped_when_idle_then_the_store_is_read_once_a_second() {
        // A tail that never runs: its position stays at 0, no batch ever comes.
        let store = log_of(3);
        let mut feed = Feed::new(LogTail::new());
        assert!(feed
            .read(LogPosition(0), 10, &store)
            .await
            .expect("read")
            .is_empty());
        assert!(store.reads().is_empty(), "trusted at first");
        tokio::time::advance(TRUST).await;
        let events = feed.read(LogPosition(0), 10, &store).await.expect("read");
        assert_eq!(positions(&events), vec![1, 2, 3]);
        assert!(feed
            .read(LogPosition(3), 10, &store)
            .await
            .expect("read")
            .is_empty());
        assert_eq!(store.reads(), vec![0], "and trusted again for a second");
    }

    #[tokio::test(start_paused = true)]
    async fn given_a_tail_that_stopped_and_a_backlog_when_read_then_the_store_is_read_page_after_page(
    ) {
        let store = log_of(7);
        let mut feed = Feed::new(LogTail::new());
        tokio::time::advance(TRUST).await;
        // Full pages: the next one at once, not a second later.
        let mut at = LogPosition(0);
        let mut pages = Vec::new();
        loop {
            let events = feed.read(at, 3, &store).await.expect("read");
            let Some(last) = events.last() else { break };
            at = last.position;
            pages.push(positions(&events));
        }
        assert_eq!(pages, vec![vec![1, 2, 3], vec![4, 5, 6], vec![7]]);
        // The short page ended it: trusted again.
        assert_eq!(store.reads(), vec![0, 3, 6]);
    }

    #[tokio::test]
    async fn given_a_quiet_tail_ahead_of_the_cursor_when_read_then_the_store_is_read() {
        // The tail started at the head (12) and has broadcast nothing since: a processor
        // at 5 must not wait for a batch that will not come.
        let store = log_of(12);
        let tail = LogTail::new();
        let stop = tokio_util::sync::CancellationToken::new();
        let mut feed = Feed::new(tail.clone());
        tokio::spawn(
            tail.clone()
                .run(log_of(12), Duration::from_millis(5), stop.clone()),
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tail.position() < LogPosition(12) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the tail never read the head"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let events = feed.read(LogPosition(5), 100, &store).await.expect("read");
        assert_eq!(positions(&events), vec![6, 7, 8, 9, 10, 11, 12]);
        // Caught up with a quiet tail: nothing, without a read.
        assert!(feed
            .read(LogPosition(12), 100, &store)
            .await
            .expect("read")
            .is_empty());
        assert_eq!(store.reads(), vec![5]);
        stop.cancel();
    }
}
