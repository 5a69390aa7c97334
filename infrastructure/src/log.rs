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
use serde_json::Value;
use sqlx::{Postgres, QueryBuilder, Sqlite};
use tokio::sync::watch;
use uuid::Uuid;

use crate::Database;

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

const COLUMNS: &str = "aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id";

type PgRow = (
    String,
    i64,
    String,
    String,
    i64,
    String,
    String,
    Value,
    Value,
    Option<Uuid>,
);
type SqliteRow = (
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
        match &self.db {
            Database::Postgres(pool) => {
                let mut q = QueryBuilder::<Postgres>::new(format!(
                    "SELECT transaction_id::text, global_position, {COLUMNS} FROM events \
                     WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot()) \
                     AND (transaction_id, global_position) > ("
                ));
                q.push_bind(after.txid.to_string())
                    .push("::xid8, ")
                    .push_bind(after.seq)
                    .push(")");
                push_filter_pg(&mut q, filter);
                q.push(" ORDER BY transaction_id, global_position LIMIT ")
                    .push_bind(i64::from(limit));
                let rows: Vec<PgRow> = q
                    .build_query_as()
                    .fetch_all(pool)
                    .await
                    .map_err(unavailable)?;
                rows.into_iter()
                    .map(
                        |(
                            txid,
                            seq,
                            aggregate_type,
                            aggregate_id,
                            sequence,
                            event_type,
                            event_version,
                            payload,
                            metadata,
                            conversation_id,
                        )| {
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
                                payload,
                                metadata,
                                conversation_id,
                            })
                        },
                    )
                    .collect()
            }
            Database::Sqlite(pool) => {
                let mut q = QueryBuilder::<Sqlite>::new(format!(
                    "SELECT global_position, {COLUMNS} FROM events WHERE global_position > "
                ));
                q.push_bind(after.seq);
                push_filter_sqlite(&mut q, filter);
                q.push(" ORDER BY global_position LIMIT ")
                    .push_bind(i64::from(limit));
                let rows: Vec<SqliteRow> = q
                    .build_query_as()
                    .fetch_all(pool)
                    .await
                    .map_err(unavailable)?;
                rows.into_iter()
                    .map(
                        |(
                            seq,
                            aggregate_type,
                            aggregate_id,
                            sequence,
                            event_type,
                            event_version,
                            payload,
                            metadata,
                            conversation_id,
                        )| {
                            Ok(LoggedEvent {
                                position: LogPosition { txid: 0, seq },
                                aggregate_type,
                                aggregate_id,
                                sequence,
                                event_type,
                                event_version,
                                payload: serde_json::from_str(&payload)
                                    .map_err(|e| corrupt("payload", e))?,
                                metadata: serde_json::from_str(&metadata)
                                    .map_err(|e| corrupt("metadata", e))?,
                                conversation_id: conversation_id
                                    .map(|c| c.parse().map_err(|e| corrupt("conversation id", e)))
                                    .transpose()?,
                            })
                        },
                    )
                    .collect()
            }
        }
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

fn push_filter_pg(q: &mut QueryBuilder<'_, Postgres>, filter: &EventFilter) {
    if !filter.types.is_empty() || !filter.type_prefixes.is_empty() {
        q.push(" AND (event_type = ANY(")
            .push_bind(filter.types.clone())
            .push(") OR event_type ^@ ANY(")
            .push_bind(filter.type_prefixes.clone())
            .push("))");
    }
    if let Some(conversation_id) = filter.conversation_id {
        q.push(" AND conversation_id = ").push_bind(conversation_id);
    }
}

fn push_filter_sqlite(q: &mut QueryBuilder<'_, Sqlite>, filter: &EventFilter) {
    if !filter.types.is_empty() || !filter.type_prefixes.is_empty() {
        q.push(" AND (0");
        for t in &filter.types {
            q.push(" OR event_type = ").push_bind(t.clone());
        }
        for p in &filter.type_prefixes {
            q.push(" OR substr(event_type, 1, ")
                .push_bind(p.chars().count() as i64)
                .push(") = ")
                .push_bind(p.clone());
        }
        q.push(")");
    }
    if let Some(conversation_id) = filter.conversation_id {
        q.push(" AND conversation_id = ")
            .push_bind(conversation_id.to_string());
    }
}
