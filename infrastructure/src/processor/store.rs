//! [`DbProcessorStore`]: processors' leases and cursors (the application's
//! [`ProcessorStore`] port), rebuild status, and what operators see of them.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use pm_application::log::LogPosition;
use pm_application::processor::ProcessorStore;
use pm_application::views::{ParkedEvent, ProcessorRecord};
use pm_application::AppError;

use super::ownership::{lock_key, Claim, Ownership};
use crate::db::{is_transient, Args, DbRow};
use crate::sql::Dialect;
use crate::Database;

/// Connection trouble is `Unavailable` (retry later); anything else is a bug.
pub(crate) fn store_error(e: sqlx::Error) -> AppError {
    if is_transient(&e) {
        AppError::Unavailable(e.to_string())
    } else {
        AppError::Internal(e.to_string())
    }
}

fn position(row: &DbRow, column: &str) -> Result<LogPosition, sqlx::Error> {
    Ok(LogPosition(row.int(column)?))
}

/// [`ProcessorStore`] over a [`Database`], plus status queries. Clones share this
/// replica's [`Ownership`], so every runner of the replica owns through one connection.
#[derive(Debug, Clone)]
pub struct DbProcessorStore {
    db: Database,
    ownership: Arc<Ownership>,
}

impl DbProcessorStore {
    /// The store in `db`.
    pub fn new(db: Database) -> Self {
        let ownership = Arc::new(Ownership::new(&db));
        Self { db, ownership }
    }

    /// Who owns each processor now, by lock key (PostgreSQL: the `application_name` of
    /// the session holding its advisory lock — a live session by construction).
    async fn live_owners(&self) -> Result<HashMap<i64, String>, sqlx::Error> {
        if self.db.dialect() != Dialect::Postgres {
            return Ok(HashMap::new());
        }
        let rows = self
            .db
            .fetch_all(
                "SELECT ((l.classid::bigint << 32) | l.objid::bigint) AS key, a.application_name AS owner \
                 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
                 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
                   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                Args::new(),
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.int("key")?, r.string("owner")?)))
            .collect()
    }

    async fn ensure_row(&self, name: &str) -> Result<(), sqlx::Error> {
        self.db
            .execute(
                "INSERT INTO processors (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
                Args::new().text(name),
            )
            .await?;
        Ok(())
    }

    /// Every processor's stored state.
    ///
    /// # Errors
    /// [`AppError::Unavailable`] when the store cannot be read.
    pub async fn list(&self) -> Result<Vec<ProcessorRecord>, AppError> {
        let sql = "SELECT p.name, p.cursor_seq, p.generation, p.lease_owner, \
                   p.rebuild_status, p.rebuild_detail, \
                   (SELECT count(*) FROM parked_events e WHERE e.processor = p.name) AS parked \
                   FROM processors p ORDER BY p.name";
        let rows = self
            .db
            .fetch_all(sql, Args::new())
            .await
            .map_err(store_error)?;
        let live = self.live_owners().await.map_err(store_error)?;
        let postgres = self.db.dialect() == Dialect::Postgres;
        rows.iter()
            .map(|r| {
                let name = r.string("name")?;
                // PostgreSQL knows who holds the lock; SQLite's owner is the process
                // holding the file, which recorded itself when it took it.
                let owner = if postgres {
                    live.get(&lock_key(&name)).cloned()
                } else {
                    r.opt_string("lease_owner")?
                };
                Ok(ProcessorRecord {
                    name,
                    position: position(r, "cursor_seq")?.to_string(),
                    generation: r.int("generation")?,
                    lease_owner: owner,
                    rebuild_status: r.opt_string("rebuild_status")?,
                    rebuild_detail: r.opt_string("rebuild_detail")?,
                    parked: r.int("parked")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(store_error)
    }

    /// Parked events of `processor` (newest first, at most 500).
    ///
    /// # Errors
    /// [`AppError::Unavailable`] when the store cannot be read.
    pub async fn parked(&self, processor: &str) -> Result<Vec<ParkedEvent>, AppError> {
        let sql =
            "SELECT position_seq, aggregate_type, aggregate_id, event_type, error, parked_at \
                   FROM parked_events WHERE processor = $1 ORDER BY position_seq DESC LIMIT 500";
        let rows = self
            .db
            .fetch_all(sql, Args::new().text(processor))
            .await
            .map_err(store_error)?;
        rows.iter()
            .map(|r| {
                Ok(ParkedEvent {
                    position: position(r, "position_seq")?.to_string(),
                    aggregate_type: r.string("aggregate_type")?,
                    aggregate_id: r.string("aggregate_id")?,
                    event_type: r.string("event_type")?,
                    error: r.string("error")?,
                    parked_at: r.time("parked_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(store_error)
    }

    /// Records a rebuild's state on the processor row.
    ///
    /// # Errors
    /// [`AppError::Unavailable`] when the store cannot be written.
    pub async fn set_rebuild_status(
        &self,
        name: &str,
        status: &str,
        detail: &str,
    ) -> Result<(), AppError> {
        self.ensure_row(name).await.map_err(store_error)?;
        self.db
            .execute(
                "UPDATE processors SET rebuild_status = $2, rebuild_detail = $3 WHERE name = $1",
                Args::new().text(name).text(status).text(detail),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }
}

impl ProcessorStore for DbProcessorStore {
    async fn claim(&self, name: &str, owner: &str) -> Result<bool, AppError> {
        let claim = self.ownership.claim(name, owner).await?;
        if claim == Claim::Taken {
            // For operators (and SQLite's owner listing): who took it, and when.
            self.ensure_row(name).await.map_err(store_error)?;
            self.db
                .execute(
                    "UPDATE processors SET lease_owner = $2, lease_expires_at = NULL, updated_at = $3 WHERE name = $1",
                    Args::new().text(name).text(owner).time(&Utc::now()),
                )
                .await
                .map_err(store_error)?;
        }
        Ok(claim.owned())
    }

    async fn release(&self, name: &str, owner: &str) -> Result<(), AppError> {
        self.ownership.release(name).await?;
        self.db
            .execute(
                "UPDATE processors SET lease_owner = NULL WHERE name = $1 AND lease_owner = $2",
                Args::new().text(name).text(owner),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn cursor(&self, name: &str) -> Result<LogPosition, AppError> {
        let row = self
            .db
            .fetch_optional(
                "SELECT cursor_seq FROM processors WHERE name = $1",
                Args::new().text(name),
            )
            .await
            .map_err(store_error)?;
        row.map_or(Ok(LogPosition::START), |r| {
            position(&r, "cursor_seq").map_err(store_error)
        })
    }
}
