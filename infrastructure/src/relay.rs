//! The JetStream relay (DELIVERY.md): a processor on the processor runtime that publishes
//! every fact and rune, in log order, to `<prefix>.<event type>` in a JetStream stream —
//! the body the event's CloudEvent JSON as the SSE stream sends it, `Nats-Msg-Id` its
//! CloudEvent id — and moves its cursor only once JetStream acknowledged the whole batch.
//!
//! Exactly once into the stream: a batch is published again after a crash or a lost
//! ack (at least once), and JetStream drops a message whose `Nats-Msg-Id` it stored within
//! the stream's duplicate window, which is far longer than a redelivery can be late. One
//! replica relays at a time (the runtime's ownership), so the stream's order is the log's.
//! NATS away: the batch fails as transient, the runner retries, the cursor (and the lag
//! `GET /v1/admin/processors` shows) waits; commands never depend on it.
//!
//! The stream is there before the first event ([`NatsRelay::keep_stream`]): every replica
//! creates it at start-up, and again whenever its connection to NATS comes back (a NATS
//! that lost its store lost the stream too), so a consumer started first finds it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream;
use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::processor::{BatchError, BatchHandler};
use pm_application::views::CloudEvent;
use tokio_util::sync::CancellationToken;

use crate::processor::cursor;
use crate::Database;

/// The relay's processor name.
pub const NATS_RELAY: &str = "nats_relay";

/// How long JetStream remembers a `Nats-Msg-Id` (a redelivery after a crash or a NATS
/// restart comes within the runner's retries, seconds to minutes).
const DUPLICATE_WINDOW: Duration = Duration::from_secs(3600);

/// How often [`NatsRelay::keep_stream`] looks at the connection (a cheap read of its state).
const KEEP_EVERY: Duration = Duration::from_millis(250);

/// Where to relay.
#[derive(Debug, Clone)]
pub struct RelaySettings {
    /// The stream (`PM_NATS_STREAM`, default `PROJECT_MANAGER`).
    pub stream: String,
    /// The subjects' prefix (`PM_NATS_SUBJECT_PREFIX`, default `pm`).
    pub prefix: String,
}

/// The relay as a [`BatchHandler`].
pub struct NatsRelay {
    db: Database,
    js: jetstream::Context,
    settings: RelaySettings,
    /// Whether the stream is known to exist: cleared when a publish fails or the
    /// connection comes back, so the stream is made again if NATS lost it.
    stream_ready: AtomicBool,
}

impl NatsRelay {
    /// A relay over `nats`, its cursor in `db`.
    pub fn new(db: Database, nats: async_nats::Client, settings: RelaySettings) -> Arc<Self> {
        Arc::new(Self {
            db,
            js: jetstream::new(nats),
            settings,
            stream_ready: AtomicBool::new(false),
        })
    }

    /// Creates the stream unless it is known to exist.
    async fn ensure_stream(&self) -> Result<(), BatchError> {
        if self.stream_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let config = jetstream::stream::Config {
            name: self.settings.stream.clone(),
            subjects: vec![format!("{}.>", self.settings.prefix)],
            duplicate_window: DUPLICATE_WINDOW,
            storage: jetstream::stream::StorageType::File,
            ..Default::default()
        };
        self.js
            .get_or_create_stream(config)
            .await
            .map_err(|e| BatchError::Transient(format!("stream: {e}")))?;
        self.stream_ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Keeps the stream there until `shutdown` (DELIVERY.md: created at start-up): makes it
    /// as soon as NATS is reachable, and again each time the connection comes back. Runs on
    /// every replica, relaying or not (creating an existing stream with the same settings
    /// changes nothing).
    pub async fn keep_stream(self: Arc<Self>, shutdown: CancellationToken) {
        let client = self.js.client();
        let statistics = client.statistics();
        // Connections made so far (the client counts every connect and reconnect): a new
        // one may be to a NATS that never had the stream, or lost it.
        let mut connects = 0;
        let mut warned = false;
        loop {
            let made = statistics.connects.load(Ordering::Relaxed);
            if made != connects {
                connects = made;
                self.stream_ready.store(false, Ordering::Release);
            }
            let connected = client.connection_state() == State::Connected;
            if connected && !self.stream_ready.load(Ordering::Acquire) {
                match self.ensure_stream().await {
                    Ok(()) => {
                        tracing::info!(stream = %self.settings.stream, "JetStream stream ready");
                        warned = false;
                    }
                    Err(e) if !warned => {
                        tracing::warn!(stream = %self.settings.stream, error = %e, "JetStream stream not created yet; retrying");
                        warned = true;
                    }
                    Err(_) => {}
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(KEEP_EVERY) => {}
            }
        }
    }

    /// Publishes `events` and waits for every ack.
    async fn publish(&self, events: &[LoggedEvent]) -> Result<(), BatchError> {
        let transient = |e: &dyn std::fmt::Display| BatchError::Transient(format!("publish: {e}"));
        let mut acks = Vec::with_capacity(events.len());
        for event in events {
            // The CloudEvent once: its id names the message, its JSON is the body (as
            // `log::tail::render` writes it for the SSE streams).
            let cloud = CloudEvent::from(event);
            let body = serde_json::to_vec(&cloud).map_err(|e| transient(&e))?;
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", cloud.id.as_str());
            // The trace of what caused it, as W3C headers (a consumer continues it).
            if let Some(traceparent) = &cloud.traceparent {
                headers.insert("traceparent", traceparent.as_str());
            }
            if let Some(tracestate) = &cloud.tracestate {
                headers.insert("tracestate", tracestate.as_str());
            }
            let subject = format!("{}.{}", self.settings.prefix, event.event_type);
            let ack = self
                .js
                .publish_with_headers(subject, headers, body.into())
                .await
                .map_err(|e| transient(&e))?;
            acks.push(ack);
        }
        for ack in acks {
            ack.await.map_err(|e| transient(&e))?;
        }
        Ok(())
    }

    /// Moves the cursor from `from` to `to` (compare-and-set, one statement).
    async fn advance(&self, from: LogPosition, to: LogPosition) -> Result<LogPosition, BatchError> {
        cursor::compare_and_set(&self.db, NATS_RELAY, from, to).await?;
        Ok(to)
    }
}

impl BatchHandler for NatsRelay {
    fn name(&self) -> &str {
        NATS_RELAY
    }

    async fn apply(
        &self,
        from: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        let Some(last) = events.last() else {
            return Ok(from);
        };
        self.ensure_stream().await?;
        if let Err(e) = self.publish(events).await {
            // NATS may have lost the stream: made again before the next try.
            self.stream_ready.store(false, Ordering::Release);
            return Err(e);
        }
        let moved = self.advance(from, last.position).await?;
        metrics::counter!("pm_relay_published_total").increment(events.len() as u64);
        Ok(moved)
    }

    async fn park(
        &self,
        from: LogPosition,
        event: &LoggedEvent,
        reason: &str,
    ) -> Result<LogPosition, BatchError> {
        Ok(cursor::park_and_advance(&self.db, NATS_RELAY, from, event, reason).await?)
    }
}
