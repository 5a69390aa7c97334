//! The global log reader.
//!
//! PostgreSQL hands out `global_position` at insert and makes the row visible at commit,
//! so a reader that trusted the position alone would skip an event whose transaction
//! commits after a later-numbered one. The reader therefore orders by
//! `(transaction_id, global_position)` and only reads rows of transactions older than
//! every transaction still in progress (`pg_snapshot_xmin(pg_current_snapshot())`): no
//! row can ever appear behind a position it has returned. SQLite has one writer, so its
//! row order is commit order.

use pm_application::log::{EventFilter, LogPosition, LogReader, LoggedEvent};
use pm_application::AppError;
use sqlx::QueryBuilder;
use tokio::sync::watch;

use crate::sql::Dialect;
use crate::{on_db, Database};

/// Reads the global log of a [`Database`].
#[derive(Debug, Clone)]
pub struct DbLogReader {
    db: Database,
    doorbell: watch::Receiver<u64>,
}

impl DbLogReader {
    /// A reader of `db`, woken by `doorbell`.
    pub fn new(db: Database, doorbell: watch::Receiver<u64>) -> Self {
        Self { db, doorbell }
    }
}

/// The columns of a logged event, as text where the databases differ (casts are dropped
/// for SQLite, which stores text already; its rows carry transaction id 0).
const SELECT: &str =
    "SELECT {txid} AS txid, global_position, aggregate_type, aggregate_id, sequence, \
    event_type, event_version, payload::text AS payload, metadata::text AS metadata, \
    conversation_id::text AS conversation_id FROM events";

/// A logged event's row: txid, global position, aggregate type and id, sequence, event
/// type and version, payload, metadata, conversation id.
type Row = (
    String,
    i64,
    String,
    String,
    i64,
    String,
    String,
    String,
    String,
    Option<String>,
);

fn logged(row: Row) -> Result<LoggedEvent, AppError> {
    let (
        txid,
        seq,
        aggregate_type,
        aggregate_id,
        sequence,
        event_type,
        event_version,
        payload,
        metadata,
        conversation,
    ) = row;
    Ok(LoggedEvent {
        position: LogPosition {
            txid: txid.parse().map_err(|e| corrupt("transaction id", e))?,
            seq,
        },
        aggregate_type,
        aggregate_id,
        sequence,
        event_type,
        event_version,
        payload: serde_json::from_str(&payload).map_err(|e| corrupt("payload", e))?,
        metadata: serde_json::from_str(&metadata).map_err(|e| corrupt("metadata", e))?,
        conversation_id: conversation
            .map(|c| c.parse().map_err(|e| corrupt("conversation id", e)))
            .transpose()?,
    })
}

fn unavailable(e: sqlx::Error) -> AppError {
    AppError::Unavailable(e.to_string())
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> AppError {
    AppError::Internal(format!("corrupt {what} in the event log: {e}"))
}

impl LogReader for DbLogReader {
    async fn read_after(
        &self,
        after: LogPosition,
        filter: &EventFilter,
        limit: u32,
    ) -> Result<Vec<LoggedEvent>, AppError> {
        let rows: Vec<Row> = on_db!(&self.db, d, pool, {
            let txid = if d == Dialect::Postgres { "transaction_id::text" } else { "'0'" };
            let mut q = QueryBuilder::new(d.sql(&SELECT.replace("{txid}", txid)).into_owned());
            if d == Dialect::Postgres {
                // Commit-safe: only transactions older than every one still running.
                q.push(" WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot()) AND (transaction_id, global_position) > (")
                    .push_bind(after.txid.to_string())
                    .push("::xid8, ")
                    .push_bind(after.seq)
                    .push(")");
            } else {
                q.push(" WHERE global_position > ").push_bind(after.seq);
            }
            if !filter.types.is_empty() || !filter.type_prefixes.is_empty() {
                q.push(" AND (1 = 0");
                for t in &filter.types {
                    q.push(" OR event_type = ").push_bind(t.clone());
                }
                for p in &filter.type_prefixes {
                    q.push(" OR substr(event_type, 1, ")
                        .push_bind(i32::try_from(p.chars().count()).unwrap_or(i32::MAX))
                        .push(") = ")
                        .push_bind(p.clone());
                }
                q.push(")");
            }
            if let Some(conversation_id) = filter.conversation_id {
                q.push(" AND conversation_id = ")
                    .push_bind(conversation_id.to_string())
                    .push(d.cast("uuid"));
            }
            let order = if d == Dialect::Postgres { "transaction_id, global_position" } else { "global_position" };
            q.push(format!(" ORDER BY {order} LIMIT ")).push_bind(i64::from(limit));
            q.build_query_as().fetch_all(pool).await
        })
        .map_err(unavailable)?;
        rows.into_iter().map(logged).collect()
    }

    async fn head(&self) -> Result<LogPosition, AppError> {
        match &self.db {
            Database::Postgres(pool) => {
                let row: Option<(String, i64)> = sqlx::query_as(
                    "SELECT transaction_id::text, global_position FROM events \
                     WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot()) \
                     ORDER BY transaction_id DESC, global_position DESC LIMIT 1",
                )
                .fetch_optional(pool)
                .await
                .map_err(unavailable)?;
                match row {
                    None => Ok(LogPosition::START),
                    Some((txid, seq)) => Ok(LogPosition {
                        txid: txid.parse().map_err(|e| corrupt("transaction id", e))?,
                        seq,
                    }),
                }
            }
            Database::Sqlite(pool) => {
                let seq: Option<i64> =
                    sqlx::query_scalar("SELECT max(global_position) FROM events")
                        .fetch_one(pool)
                        .await
                        .map_err(unavailable)?;
                Ok(LogPosition {
                    txid: 0,
                    seq: seq.unwrap_or(0),
                })
            }
        }
    }

    fn doorbell(&self) -> watch::Receiver<u64> {
        self.doorbell.clone()
    }
}
