//! An in-memory log for the use cases' tests: events in position order, a doorbell that
//! rings on every append, filters applied as the stores apply them, and a record of the
//! positions reads started from (so a test can tell the store was, or was not, read).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::{EventFilter, LogPosition, LogReader, LoggedEvent};
use crate::AppError;

/// The log (cheap to clone; clones share it).
#[derive(Clone)]
pub(crate) struct MemoryLog {
    events: Arc<Mutex<Vec<LoggedEvent>>>,
    bell: Arc<watch::Sender<u64>>,
    reads: Arc<Mutex<Vec<i64>>>,
}

impl MemoryLog {
    /// An empty log.
    pub(crate) fn new() -> Self {
        Self {
            events: Arc::default(),
            bell: Arc::new(watch::channel(0).0),
            reads: Arc::default(),
        }
    }

    /// Appends `event` (its position must follow the last) and rings the doorbell.
    pub(crate) fn push(&self, event: LoggedEvent) {
        self.events.lock().expect("lock").push(event);
        self.bell.send_modify(|n| *n += 1);
    }

    /// Appends an event of `event_type` at the next position; returns it.
    pub(crate) fn append(&self, event_type: &str) -> i64 {
        let position = self.events.lock().expect("lock").len() as i64 + 1;
        self.push(event(position, event_type));
        position
    }

    /// The positions `read_after` was called with, in order.
    pub(crate) fn reads(&self) -> Vec<i64> {
        self.reads.lock().expect("lock").clone()
    }
}

/// A logged event at `position` of type `event_type` (payload `{"n": position}`).
pub(crate) fn event(position: i64, event_type: &str) -> LoggedEvent {
    LoggedEvent {
        position: LogPosition(position),
        aggregate_type: "note".into(),
        aggregate_id: format!("n{position}"),
        sequence: 1,
        event_type: event_type.into(),
        event_version: "1.0".into(),
        payload: serde_json::json!({"n": position}).into(),
        metadata: serde_json::json!({}).into(),
        conversation_id: None,
        organization: None,
    }
}

impl LogReader for MemoryLog {
    async fn read_after(
        &self,
        after: LogPosition,
        filter: &EventFilter,
        limit: u32,
    ) -> Result<Vec<LoggedEvent>, AppError> {
        self.reads.lock().expect("lock").push(after.0);
        let events = self.events.lock().expect("lock");
        Ok(events
            .iter()
            .filter(|e| e.position > after && filter.matches(e))
            .take(limit as usize)
            .cloned()
            .collect())
    }

    async fn head(&self) -> Result<LogPosition, AppError> {
        let events = self.events.lock().expect("lock");
        Ok(events.last().map_or(LogPosition::START, |e| e.position))
    }

    async fn event_at(&self, position: LogPosition) -> Result<Option<LoggedEvent>, AppError> {
        let events = self.events.lock().expect("lock");
        Ok(events.iter().find(|e| e.position == position).cloned())
    }

    async fn end(&self) -> Result<LogPosition, AppError> {
        self.head().await
    }

    async fn held_back(&self) -> Result<Option<Duration>, AppError> {
        Ok(None)
    }

    fn doorbell(&self) -> watch::Receiver<u64> {
        self.bell.subscribe()
    }
}
