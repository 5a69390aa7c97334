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

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::processor::{BatchError, BatchHandler};
use pm_application::views::CloudEvent;
use tokio::sync::OnceCell;

use crate::processor::cursor::{self, CursorError};
use crate::Database;

/// The relay's processor name.
pub const NATS_RELAY: &str = "nats_relay";

/// How long JetStream remembers a `Nats-Msg-Id` (a redelivery after a crash or a NATS
/// restart comes within the runner's retries, seconds to minutes).
const DUPLICATE_WINDOW: Duration = Duration::from_secs(3600);

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
    /// Set once the stream is known to exist (created at the first batch: NATS may be
    /// away when the service starts).
    stream: OnceCell<()>,
}

impl NatsRelay {
    /// A relay over `nats`, its cursor in `db`.
    pub fn new(db: Database, nats: async_nats::Client, settings: RelaySettings) -> Arc<Self> {
        Arc::new(Self {
            db,
            js: jetstream::new(nats),
            settings,
            stream: OnceCell::new(),
        })
    }

    async fn ensure_stream(&self) -> Result<(), BatchError> {
        self.stream
            .get_or_try_init(|| async {
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
                    .map(|_| ())
                    .map_err(|e| BatchError::Transient(format!("stream: {e}")))
            })
            .await
            .copied()
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
        match cursor::compare_and_set(&self.db, NATS_RELAY, from, to).await {
            Ok(()) => Ok(to),
            Err(CursorError::Moved) => Err(BatchError::CursorMoved),
            Err(CursorError::Sql(e)) => Err(BatchError::Transient(e.to_string())),
        }
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
        self.publish(events).await?;
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
        cursor::park_and_advance(&self.db, NATS_RELAY, from, event, reason)
            .await
            .map_err(|e| match e {
                CursorError::Moved => BatchError::CursorMoved,
                CursorError::Sql(e) => BatchError::Transient(e.to_string()),
            })
    }
}
