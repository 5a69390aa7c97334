//! The `read_model` projection: applies a batch of the log to the read tables of the
//! current generation and moves its cursor, in one transaction (exactly-once effect).
//! The fast path ([`super::batch`]) applies the whole batch with multi-row statements;
//! when it fails for a reason that is not transient, the batch is replayed event by event
//! ([`super::facts`]) so the runtime learns which event is poison.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::processor::{BatchError, BatchHandler};

use super::batch::apply_batch;
use super::error::ApplyError;
use super::facts::apply_event;
use super::READ_MODEL;
use crate::db::{is_transient, Tx};
use crate::processor::cursor;
use crate::Database;

/// The projection maintaining the read tables.
#[derive(Debug, Clone)]
pub struct ReadModelProjection {
    db: Database,
    fail_before_commit: Option<Arc<AtomicBool>>,
}

impl ReadModelProjection {
    /// The projection over `db`.
    pub fn new(db: Database) -> Self {
        Self {
            db,
            fail_before_commit: None,
        }
    }

    /// Test hook: while the flag is set, every batch fails after applying its events and
    /// before committing (as if the process died there).
    pub fn with_failure_switch(mut self, switch: Arc<AtomicBool>) -> Self {
        self.fail_before_commit = Some(switch);
        self
    }

    fn injected_failure(&self) -> Result<(), ApplyError> {
        if self
            .fail_before_commit
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst))
        {
            return Err(ApplyError::Batch(BatchError::Transient(
                "injected failure before commit".into(),
            )));
        }
        Ok(())
    }

    /// Runs `body` between locking the processor row at `from` and moving the cursor to
    /// `to`, in one transaction.
    async fn in_cursor_tx<F>(
        &self,
        from: LogPosition,
        to: LogPosition,
        body: F,
    ) -> Result<LogPosition, ApplyError>
    where
        F: for<'t> AsyncFnOnce(&'t mut Tx, i64) -> Result<(), ApplyError>,
    {
        let mut tx = self.db.begin().await?;
        let generation = cursor::lock(&mut tx, READ_MODEL, from).await?;
        body(&mut tx, generation).await?;
        cursor::advance(&mut tx, READ_MODEL, to).await?;
        self.injected_failure()?;
        tx.commit().await?;
        Ok(to)
    }

    /// The whole batch in a few multi-row statements.
    async fn apply_fast(
        &self,
        from: LogPosition,
        last: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, ApplyError> {
        self.in_cursor_tx(from, last, async |tx, g| apply_batch(tx, g, events).await)
            .await
    }

    /// Event by event, so a failure names the poison event's index.
    async fn apply_slow(
        &self,
        from: LogPosition,
        last: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        self.in_cursor_tx(from, last, async |tx, g| {
            for (index, event) in events.iter().enumerate() {
                apply_event(tx, g, event).await.map_err(|e| e.at(index))?;
            }
            Ok(())
        })
        .await
        .map_err(ApplyError::into_batch)
    }
}

impl BatchHandler for ReadModelProjection {
    fn name(&self) -> &str {
        READ_MODEL
    }

    async fn apply(
        &self,
        from: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        let Some(last) = events.last().map(|e| e.position) else {
            return Ok(from);
        };
        match self.apply_fast(from, last, events).await {
            Ok(next) => Ok(next),
            Err(ApplyError::Sql(e)) if !is_transient(&e) => {
                tracing::debug!(error = %e, "batch failed; replaying it event by event");
                self.apply_slow(from, last, events).await
            }
            Err(ApplyError::Poison(_, reason)) => {
                tracing::debug!(%reason, "batch has an unreadable event; replaying it event by event");
                self.apply_slow(from, last, events).await
            }
            Err(e) => Err(e.into_batch()),
        }
    }

    async fn park(
        &self,
        from: LogPosition,
        event: &LoggedEvent,
        reason: &str,
    ) -> Result<LogPosition, BatchError> {
        let run = async {
            let mut tx = self.db.begin().await?;
            cursor::lock(&mut tx, READ_MODEL, from).await?;
            cursor::park(&mut tx, READ_MODEL, event, reason).await?;
            cursor::advance(&mut tx, READ_MODEL, event.position).await?;
            tx.commit().await?;
            Ok::<_, ApplyError>(event.position)
        };
        run.await.map_err(ApplyError::into_batch)
    }
}
