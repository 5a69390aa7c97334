//! The `read_model` projection: applies a batch of the log to the read tables of the
//! current generation and moves its cursor, in one transaction (exactly-once effect).
//! The batch path ([`super::batch`]) applies the whole batch with multi-row statements;
//! when it fails for a reason that is not transient the batch is
//! [`BatchError::Rejected`], and the processor runtime bisects it through this same path
//! ([`pm_application::processor::isolate`]) to park the poison event.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::processor::{BatchError, BatchHandler};

use super::batch::apply_batch;
use super::error::ApplyError;
use super::READ_MODEL;
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
        let run = async {
            let mut tx = self.db.begin().await?;
            let generation = cursor::lock(&mut tx, READ_MODEL, from).await?;
            apply_batch(&mut tx, generation, events).await?;
            cursor::advance(&mut tx, READ_MODEL, last).await?;
            self.injected_failure()?;
            tx.commit().await?;
            Ok::<_, ApplyError>(last)
        };
        run.await.map_err(ApplyError::into_batch)
    }

    async fn park(
        &self,
        from: LogPosition,
        event: &LoggedEvent,
        reason: &str,
    ) -> Result<LogPosition, BatchError> {
        cursor::park_and_advance(&self.db, READ_MODEL, from, event, reason)
            .await
            .map_err(|e| ApplyError::from(e).into_batch())
    }
}
