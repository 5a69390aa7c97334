//! Processor rows: cursor compare-and-set, the lease, parked events, and status listing.

use std::time::Duration;

use chrono::Utc;
use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::processor::ProcessorStore;
use pm_application::AppError;
use pm_domain::time;
use serde::Serialize;

use super::query::rows::RowExt;
use crate::sql::Dialect;
use crate::{on_db, Database};

/// Why a processor row could not be locked at the expected cursor.
#[derive(Debug)]
pub(crate) enum LockError {
    Sql(sqlx::Error),
    Moved,
}

impl From<sqlx::Error> for LockError {
    fn from(e: sqlx::Error) -> Self {
        Self::Sql(e)
    }
}

/// Operations on the processor row inside a transaction.
pub(crate) trait ProcessorRow {
    /// Locks the row of `name` (creating it at the start of the log if missing), checks its
    /// cursor is `expected`, and returns its generation.
    async fn lock_at(self, d: Dialect, name: &str, expected: LogPosition)
        -> Result<i64, LockError>;
    /// Moves the cursor to `to`.
    async fn advance_to(self, d: Dialect, name: &str, to: LogPosition) -> Result<(), sqlx::Error>;
    /// Records a parked event.
    async fn record_parked(
        self,
        d: Dialect,
        name: &str,
        event: &LoggedEvent,
        reason: &str,
    ) -> Result<(), sqlx::Error>;
}

macro_rules! impl_processor_row {
    ($conn:ty) => {
        impl<'c> ProcessorRow for &'c mut $conn {
            async fn lock_at(self, d: Dialect, name: &str, expected: LogPosition) -> Result<i64, LockError> {
                let select = d.sql("SELECT generation, cursor_txid, cursor_seq FROM processors WHERE name = $1 FOR UPDATE");
                let row: Option<(i32, i64, i64)> = sqlx::query_as(&select).bind(name).fetch_optional(&mut *self).await?;
                let (generation, txid, seq) = match row {
                    Some(row) => row,
                    None => {
                        sqlx::query("INSERT INTO processors (name) VALUES ($1) ON CONFLICT (name) DO NOTHING")
                            .bind(name)
                            .execute(&mut *self)
                            .await?;
                        sqlx::query_as(&select).bind(name).fetch_one(&mut *self).await?
                    }
                };
                if (LogPosition { txid, seq }) != expected {
                    return Err(LockError::Moved);
                }
                Ok(i64::from(generation))
            }

            async fn advance_to(self, d: Dialect, name: &str, to: LogPosition) -> Result<(), sqlx::Error> {
                sqlx::query(&d.sql(
                    "UPDATE processors SET cursor_txid = $2, cursor_seq = $3, updated_at = $4::timestamptz WHERE name = $1",
                ))
                .bind(name)
                .bind(to.txid)
                .bind(to.seq)
                .bind(time::format(&Utc::now()))
                .execute(&mut *self)
                .await?;
                Ok(())
            }

            async fn record_parked(self, d: Dialect, name: &str, event: &LoggedEvent, reason: &str) -> Result<(), sqlx::Error> {
                sqlx::query(&d.sql(
                    "INSERT INTO parked_events (processor, position_txid, position_seq, aggregate_type, aggregate_id, event_type, error, parked_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::timestamptz) ON CONFLICT DO NOTHING",
                ))
                .bind(name)
                .bind(event.position.txid)
                .bind(event.position.seq)
                .bind(&event.aggregate_type)
                .bind(&event.aggregate_id)
                .bind(&event.event_type)
                .bind(reason)
                .bind(time::format(&Utc::now()))
                .execute(&mut *self)
                .await?;
                Ok(())
            }
        }
    };
}

impl_processor_row!(sqlx::PgConnection);
impl_processor_row!(sqlx::SqliteConnection);

pub(crate) async fn lock<R: ProcessorRow>(
    row: R,
    d: Dialect,
    name: &str,
    expected: LogPosition,
) -> Result<i64, LockError> {
    row.lock_at(d, name, expected).await
}

pub(crate) async fn advance<R: ProcessorRow>(
    row: R,
    d: Dialect,
    name: &str,
    to: LogPosition,
) -> Result<(), sqlx::Error> {
    row.advance_to(d, name, to).await
}

pub(crate) async fn park<R: ProcessorRow>(
    row: R,
    d: Dialect,
    name: &str,
    event: &LoggedEvent,
    reason: &str,
) -> Result<(), sqlx::Error> {
    row.record_parked(d, name, event, reason).await
}

/// A processor's stored state, as `GET /v1/admin/processors` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ProcessorRecord {
    /// The processor's name.
    pub name: String,
    /// Its cursor (a log position token).
    pub position: String,
    /// The read-table generation it writes (projections).
    pub generation: i64,
    /// The replica holding its lease.
    pub lease_owner: Option<String>,
    /// When the lease expires.
    pub lease_expires_at: Option<String>,
    /// The last rebuild's state (`running`, `done`, `failed`).
    pub rebuild_status: Option<String>,
    /// Details of the last rebuild.
    pub rebuild_detail: Option<String>,
    /// Events it parked.
    pub parked: i64,
}

/// [`ProcessorStore`] over a [`Database`], plus status queries.
#[derive(Debug, Clone)]
pub struct DbProcessorStore {
    db: Database,
}

impl DbProcessorStore {
    /// The store in `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// Every processor's stored state.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn list(&self) -> Result<Vec<ProcessorRecord>, AppError> {
        let sql = "SELECT p.name, p.cursor_txid, p.cursor_seq, p.generation::bigint AS generation, p.lease_owner, p.lease_expires_at, \
                   p.rebuild_status, p.rebuild_detail, \
                   (SELECT count(*) FROM parked_events e WHERE e.processor = p.name) AS parked \
                   FROM processors p ORDER BY p.name";
        on_db!(&self.db, d, pool, {
            let rows = sqlx::query(&d.sql(sql)).fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    Ok(ProcessorRecord {
                        name: r.string("name")?,
                        position: LogPosition {
                            txid: r.int("cursor_txid")?,
                            seq: r.int("cursor_seq")?,
                        }
                        .to_string(),
                        generation: r.int("generation")?,
                        lease_owner: r.opt_string("lease_owner")?,
                        lease_expires_at: r.datetime("lease_expires_at")?.map(|t| time::format(&t)),
                        rebuild_status: r.opt_string("rebuild_status")?,
                        rebuild_detail: r.opt_string("rebuild_detail")?,
                        parked: r.int("parked")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
        })
        .map_err(unavailable)
    }

    /// Parked events of `processor` (newest first, at most 500).
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn parked(&self, processor: &str) -> Result<Vec<serde_json::Value>, AppError> {
        let sql = "SELECT position_txid, position_seq, aggregate_type, aggregate_id, event_type, error, parked_at \
                   FROM parked_events WHERE processor = $1 ORDER BY position_txid DESC, position_seq DESC LIMIT 500";
        on_db!(&self.db, d, pool, {
            let rows = sqlx::query(&d.sql(sql)).bind(processor).fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    Ok(serde_json::json!({
                        "position": LogPosition { txid: r.int("position_txid")?, seq: r.int("position_seq")? }.to_string(),
                        "aggregate_type": r.text("aggregate_type")?,
                        "aggregate_id": r.text("aggregate_id")?,
                        "event_type": r.text("event_type")?,
                        "error": r.text("error")?,
                        "parked_at": r.time("parked_at")?,
                    }))
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
        })
        .map_err(unavailable)
    }

    /// Records a rebuild's state on the processor row.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn set_rebuild_status(
        &self,
        name: &str,
        status: &str,
        detail: &str,
    ) -> Result<(), AppError> {
        on_db!(&self.db, d, pool, {
            sqlx::query("INSERT INTO processors (name) VALUES ($1) ON CONFLICT (name) DO NOTHING")
                .bind(name)
                .execute(pool)
                .await?;
            sqlx::query(&d.sql(
                "UPDATE processors SET rebuild_status = $2, rebuild_detail = $3 WHERE name = $1",
            ))
            .bind(name)
            .bind(status)
            .bind(detail)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })
        .map_err(unavailable)?;
        Ok(())
    }
}

pub(crate) fn unavailable(e: sqlx::Error) -> AppError {
    AppError::Unavailable(e.to_string())
}

impl ProcessorStore for DbProcessorStore {
    async fn acquire_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, AppError> {
        let now = Utc::now();
        let until = now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::seconds(10));
        let taken = on_db!(&self.db, d, pool, {
            sqlx::query("INSERT INTO processors (name) VALUES ($1) ON CONFLICT (name) DO NOTHING")
                .bind(name)
                .execute(pool)
                .await?;
            sqlx::query(&d.sql(
                "UPDATE processors SET lease_owner = $2, lease_expires_at = $3::timestamptz \
                 WHERE name = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at < $4::timestamptz)",
            ))
            .bind(name)
            .bind(owner)
            .bind(time::format(&until))
            .bind(time::format(&now))
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })
        .map_err(unavailable)?;
        Ok(taken == 1)
    }

    async fn release_lease(&self, name: &str, owner: &str) -> Result<(), AppError> {
        on_db!(&self.db, d, pool, {
            sqlx::query(&d.sql(
                "UPDATE processors SET lease_owner = NULL, lease_expires_at = NULL WHERE name = $1 AND lease_owner = $2",
            ))
            .bind(name)
            .bind(owner)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })
        .map_err(unavailable)?;
        Ok(())
    }

    async fn cursor(&self, name: &str) -> Result<LogPosition, AppError> {
        let row: Option<(i64, i64)> = on_db!(&self.db, d, pool, {
            sqlx::query_as(&d.sql("SELECT cursor_txid, cursor_seq FROM processors WHERE name = $1"))
                .bind(name)
                .fetch_optional(pool)
                .await
        })
        .map_err(unavailable)?;
        Ok(row.map_or(LogPosition::START, |(txid, seq)| LogPosition { txid, seq }))
    }
}
