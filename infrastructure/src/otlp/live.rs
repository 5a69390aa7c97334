//! The spans of what happens now (a request's), queued as they end and exported in
//! batches by one task: a span waits at most [`EVERY`], a batch holds at most [`BATCH`],
//! and a full queue drops the span (`pm_otlp_spans_dropped_total`) rather than slow
//! the request that made it.

use std::sync::Arc;
use std::time::Duration;

use pm_application::trace::genai::{SpanRecord, SpanSink};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Otlp;

/// Spans the queue holds at most.
const QUEUE: usize = 4096;
/// Spans one export sends at most.
const BATCH: usize = 512;
/// How long a span waits for others to share its export.
const EVERY: Duration = Duration::from_secs(1);

/// The queue's sending end: cheap to clone, never blocks.
#[derive(Debug, Clone)]
pub struct LiveSpans {
    queue: mpsc::Sender<SpanRecord>,
}

impl LiveSpans {
    /// The queue and its exporting task, which sends what is queued when `stop` is
    /// cancelled and then ends.
    pub fn start(otlp: Arc<Otlp>, stop: CancellationToken) -> (Self, JoinHandle<()>) {
        let (queue, spans) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(otlp, spans, stop));
        (Self { queue }, task)
    }
}

impl SpanSink for LiveSpans {
    /// Queues a finished span (dropped when the queue is full).
    fn finished(&self, span: SpanRecord) {
        if self.queue.try_send(span).is_err() {
            metrics::counter!("pm_otlp_spans_dropped_total").increment(1);
        }
    }
}

/// Sends batches until `stop` is cancelled (or every sender is gone) and the queue is
/// empty. A collector away is logged once, until an export succeeds again.
async fn run(otlp: Arc<Otlp>, mut spans: mpsc::Receiver<SpanRecord>, stop: CancellationToken) {
    let mut failing = false;
    loop {
        let mut batch = Vec::with_capacity(BATCH);
        let closed = tokio::select! {
            received = spans.recv_many(&mut batch, BATCH) => received == 0,
            () = stop.cancelled() => false,
        };
        // A span waits up to EVERY for others to share its export (not once stopping).
        if !stop.is_cancelled() && !closed && batch.len() < BATCH {
            tokio::select! {
                () = tokio::time::sleep(EVERY) => {}
                () = stop.cancelled() => {}
            }
        }
        while batch.len() < BATCH {
            match spans.try_recv() {
                Ok(span) => batch.push(span),
                Err(_) => break,
            }
        }
        match otlp.export(batch).await {
            Ok(()) => failing = false,
            Err(e) if !failing => {
                tracing::warn!(error = %e, "spans were not exported (logged once until an export succeeds)");
                failing = true;
            }
            Err(_) => {}
        }
        if (closed || stop.is_cancelled()) && spans.is_empty() {
            return;
        }
    }
}
