//! The `read_model` projection: applies facts to the read tables of the current
//! generation and moves the processor's cursor, in one transaction.

use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::processor::{BatchError, BatchHandler};

use super::batch::{BatchExecutor, BatchFail};
use super::event::apply_event;
use super::processors::{self, LockError};
use super::READ_MODEL;
use crate::{in_tx, Database};

/// The projection maintaining the read tables.
#[derive(Debug, Clone)]
pub struct ReadModelProjection {
    db: Database,
    fail_before_commit: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
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
    pub fn with_failure_switch(
        mut self,
        switch: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        self.fail_before_commit = Some(switch);
        self
    }
}

/// Errors inside a projection transaction.
#[derive(Debug)]
pub(crate) enum ApplyError {
    Sql(sqlx::Error),
    Poison(usize, String),
    Batch(BatchError),
}

impl From<sqlx::Error> for ApplyError {
    fn from(e: sqlx::Error) -> Self {
        Self::Sql(e)
    }
}

impl From<LockError> for ApplyError {
    fn from(e: LockError) -> Self {
        match e {
            LockError::Sql(e) => Self::Sql(e),
            LockError::Moved => Self::Batch(BatchError::CursorMoved),
        }
    }
}

impl ApplyError {
    /// Names event `index` of a batch as the culprit of a failure that is not transient.
    pub(crate) fn at(self, index: usize) -> Self {
        match self {
            Self::Sql(e) if !is_transient(&e) => Self::Poison(index, e.to_string()),
            Self::Poison(_, reason) => Self::Poison(index, reason),
            other => other,
        }
    }

    fn into_batch(self) -> BatchError {
        match self {
            Self::Sql(e) => BatchError::Transient(e.to_string()),
            Self::Poison(index, reason) => BatchError::Poison { index, reason },
            Self::Batch(e) => e,
        }
    }
}

/// Whether a database error is worth retrying as it is (connection trouble, lock
/// contention, serialization failures) rather than a property of the event.
pub(crate) fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.to_string()).unwrap_or_default();
            if code.len() == 5 {
                // PostgreSQL SQLSTATE classes 08 (connection), 40 (rollback: serialization,
                // deadlock), 53 (resources), 57 (operator intervention).
                ["08", "40", "53", "57"]
                    .iter()
                    .any(|class| code.starts_with(class))
            } else {
                // SQLite result codes: BUSY (5) and LOCKED (6), extended codes included.
                code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        _ => false,
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
            in_tx!(&self.db, d, tx, {
                processors::lock(&mut *tx, d, READ_MODEL, from).await?;
                processors::park(&mut *tx, d, READ_MODEL, event, reason).await?;
                processors::advance(&mut *tx, d, READ_MODEL, event.position).await?;
                Ok::<_, ApplyError>(event.position)
            })
        };
        run.await.map_err(ApplyError::into_batch)
    }
}

impl ReadModelProjection {
    fn injected_failure(&self) -> Result<(), ApplyError> {
        if self
            .fail_before_commit
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
        {
            return Err(ApplyError::Batch(BatchError::Transient(
                "injected failure before commit".into(),
            )));
        }
        Ok(())
    }

    /// The whole batch in a few multi-row statements.
    async fn apply_fast(
        &self,
        from: LogPosition,
        last: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, ApplyError> {
        in_tx!(&self.db, d, tx, {
            let generation = processors::lock(&mut *tx, d, READ_MODEL, from).await?;
            (&mut *tx)
                .apply_batch(d, generation, events)
                .await
                .map_err(|e| match e {
                    BatchFail::Sql(e) => ApplyError::Sql(e),
                    BatchFail::Unreadable(reason) => ApplyError::Poison(0, reason),
                })?;
            processors::advance(&mut *tx, d, READ_MODEL, last).await?;
            self.injected_failure()?;
            Ok::<_, ApplyError>(last)
        })
    }

    /// Event by event, so a failure names the poison event's index.
    async fn apply_slow(
        &self,
        from: LogPosition,
        last: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        let run = async {
            in_tx!(&self.db, d, tx, {
                let generation = processors::lock(&mut *tx, d, READ_MODEL, from).await?;
                for (index, event) in events.iter().enumerate() {
                    apply_event(&mut *tx, d, generation, event)
                        .await
                        .map_err(|e| e.at(index))?;
                }
                processors::advance(&mut *tx, d, READ_MODEL, last).await?;
                self.injected_failure()?;
                Ok::<_, ApplyError>(last)
            })
        };
        run.await.map_err(ApplyError::into_batch)
    }
}
