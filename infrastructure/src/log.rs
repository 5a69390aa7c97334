//! The global log reader. Positions are handed out in commit order (on PostgreSQL every
//! append takes one lock until it commits, see migration `0003_log_order.sql`; SQLite has
//! one writer), so reading the log is reading rows after a position in position order:
//! no later row can ever appear behind a position already returned, and no transaction
//! that does not append can hold readers back.

use pm_application::log::{EventFilter, Json, LogPosition, LogReader, LoggedEvent};
use pm_application::AppError;
use tokio::sync::watch;

use std::time::Duration;

use crate::db::{Arg, Args, DbRow};
use crate::owners::scope_clause;
use crate::processor::store::store_error;
use crate::sql::Dialect;
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

/// How long the transaction holding the append lock (migration `0003_log_order.sql`,
/// key `0x706d6c6f67000001`) has been running, in microseconds.
const HELD_BACK: &str = "SELECT (extract(epoch FROM clock_timestamp() - a.xact_start) * 1000000)::bigint AS held_us \
    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
    WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 1886219375 AND l.objid = 1728053249 \
      AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())";

/// The columns of a logged event, with its conversation's organization (one primary-key
/// read of the log-derived `conversation_organizations` per event).
const COLUMNS: &str = "global_position, aggregate_type, aggregate_id, sequence, \
    event_type, event_version, payload, metadata, \
    conversation_id, \
    (SELECT o.organization FROM conversation_organizations o \
     WHERE o.conversation_id = events.conversation_id) AS organization";

fn logged(row: &DbRow) -> Result<LoggedEvent, AppError> {
    let decode = |e: sqlx::Error| corrupt("row", e);
    Ok(LoggedEvent {
        position: LogPosition(row.int("global_position").map_err(decode)?),
        aggregate_type: row.string("aggregate_type").map_err(decode)?,
        aggregate_id: row.string("aggregate_id").map_err(decode)?,
        sequence: row.int("sequence").map_err(decode)?,
        event_type: row.string("event_type").map_err(decode)?,
        event_version: row.string("event_version").map_err(decode)?,
        payload: Json::from_text(row.string("payload").map_err(decode)?)
            .map_err(|e| corrupt("payload", e))?,
        metadata: Json::from_text(row.string("metadata").map_err(decode)?)
            .map_err(|e| corrupt("metadata", e))?,
        conversation_id: row.opt_uuid("conversation_id").map_err(decode)?,
        organization: row.opt_str("organization").map_err(decode)?.map(Into::into),
    })
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> AppError {
    AppError::Internal(format!("corrupt {what} in the event log: {e}"))
}

/// The `WHERE … ORDER BY … LIMIT` of a read after `after` through `filter`, and its
/// arguments.
fn read_clause(after: LogPosition, filter: &EventFilter, limit: u32) -> (String, Args) {
    let mut args = Args::new();
    let seq = args.push(Arg::Int(Some(after.0)));
    let mut sql = format!(" WHERE global_position > {seq}");
    if !filter.types.is_empty() || !filter.type_prefixes.is_empty() {
        let mut any = vec![];
        for t in &filter.types {
            let p = args.push(Arg::Text(Some(t.clone())));
            any.push(format!("event_type = {p}"));
        }
        for prefix in &filter.type_prefixes {
            // `substr` takes an `integer` length on PostgreSQL: bound as one.
            let chars = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
            let len = args.push(Arg::Int32(Some(chars)));
            let p = args.push(Arg::Text(Some(prefix.clone())));
            any.push(format!("substr(event_type, 1, {len}) = {p}"));
        }
        sql.push_str(&format!(" AND ({})", any.join(" OR ")));
    }
    if let Some(conversation_id) = filter.conversation_id {
        let p = args.push(Arg::Uuid(Some(conversation_id)));
        sql.push_str(&format!(" AND conversation_id = {p}"));
    }
    if let Some(principal) = &filter.principal {
        // `->>` reads the json column on PostgreSQL and the text column on SQLite alike;
        // an event without `principal` gives NULL, which no principal equals.
        let p = args.push(Arg::Text(Some(principal.clone())));
        sql.push_str(&format!(" AND metadata->>'principal' = {p}"));
    }
    sql.push_str(&scope_clause(&mut args, "conversation_id", &filter.scope));
    let l = args.push(Arg::Int(Some(i64::from(limit))));
    sql.push_str(&format!(" ORDER BY global_position LIMIT {l}"));
    (sql, args)
}

impl LogReader for DbLogReader {
    async fn read_after(
        &self,
        after: LogPosition,
        filter: &EventFilter,
        limit: u32,
    ) -> Result<Vec<LoggedEvent>, AppError> {
        let (clause, args) = read_clause(after, filter, limit);
        let sql = format!("SELECT {COLUMNS} FROM events{clause}");
        let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
        rows.iter().map(logged).collect()
    }

    async fn head(&self) -> Result<LogPosition, AppError> {
        // An index-only read of the newest position: constant time at any log size.
        let row = self
            .db
            .fetch_optional(
                "SELECT max(global_position) AS head FROM events",
                Args::new(),
            )
            .await
            .map_err(store_error)?;
        let head = row
            .map(|r| r.opt_int("head"))
            .transpose()
            .map_err(|e| corrupt("row", e))?
            .flatten();
        Ok(LogPosition(head.unwrap_or(0)))
    }

    async fn held_back(&self) -> Result<Option<Duration>, AppError> {
        if self.db.dialect() != Dialect::Postgres {
            // SQLite's single writer: an append holds the database for one statement.
            return Ok(None);
        }
        let row = self
            .db
            .fetch_optional(HELD_BACK, Args::new())
            .await
            .map_err(store_error)?;
        let seconds = row
            .map(|r| r.opt_int("held_us"))
            .transpose()
            .map_err(|e| corrupt("row", e))?
            .flatten();
        Ok(seconds.map(|us| Duration::from_micros(us.max(0) as u64)))
    }

    fn doorbell(&self) -> watch::Receiver<u64> {
        self.doorbell.clone()
    }
}
