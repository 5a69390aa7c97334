//! The global log reader. Reading the log is reading rows after a position in position
//! order, up to the position where no later commit can still appear behind: on SQLite
//! (one writer) the newest row, on PostgreSQL (appends commit concurrently) the
//! [horizon] worked out from the appends in progress. No transaction that does not append
//! can hold readers back.

mod horizon;

use pm_application::log::{EventFilter, Json, LogPosition, LogReader, LoggedEvent, LoggedMetadata};
use pm_application::trace::TraceContext;
use pm_application::AppError;
use tokio::sync::watch;

use std::sync::Arc;
use std::time::Duration;

use horizon::{Horizon, Sighting};

use crate::db::{Arg, Args, DbRow};
use crate::keys::sealing::{self, Place, Unreadable};
use crate::keys::KeyStore;
use crate::owners::scope_clause;
use crate::processor::store::store_error;
use crate::sql::Dialect;
use crate::Database;

/// Reads the global log of a [`Database`], its personal texts opened (`null` and
/// `"forgotten": true` where a key was destroyed).
#[derive(Clone)]
pub struct DbLogReader {
    db: Database,
    keys: Arc<KeyStore>,
    doorbell: watch::Receiver<u64>,
    /// Shared by the clones: one process's readers move one horizon.
    horizon: Arc<Horizon>,
}

impl DbLogReader {
    /// A reader of `db` opening personal texts with `keys`, woken by `doorbell`.
    pub fn new(db: Database, keys: Arc<KeyStore>, doorbell: watch::Receiver<u64>) -> Self {
        Self {
            db,
            keys,
            doorbell,
            horizon: Arc::default(),
        }
    }

    /// The trace context recorded with the first event of aggregate `aggregate_id` of
    /// `aggregate_type` (what started it, e.g. a turn's first rune: the trace of the fact
    /// that caused the turn); `None` when there is no such event or it recorded none. One
    /// primary-key read of the metadata alone (nothing to open).
    ///
    /// # Errors
    /// [`AppError::Unavailable`] when the store cannot be read.
    pub async fn opening_trace(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Option<TraceContext>, AppError> {
        let sql = "SELECT metadata FROM events \
                   WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence = 1";
        let args = Args::new().text(aggregate_type).text(aggregate_id);
        let Some(row) = self
            .db
            .fetch_optional(sql, args)
            .await
            .map_err(store_error)?
        else {
            return Ok(None);
        };
        let metadata = Json::from_text(row.string("metadata").map_err(|e| corrupt("row", e))?)
            .map_err(|e| corrupt("metadata", e))?;
        Ok(LoggedMetadata::new(&metadata).trace())
    }

    /// The events of aggregate `aggregate_id` of `aggregate_type` (a stream) of the types
    /// `types`, up to sequence `through`, in order, opened: only what the caller reads (a
    /// tool call's `tool.progress` chunks, say, are neither read nor decrypted).
    ///
    /// # Errors
    /// [`AppError::Unavailable`] when the store cannot be read.
    pub async fn stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        types: &[&str],
        through: i64,
    ) -> Result<Vec<LoggedEvent>, AppError> {
        let wanted: Vec<String> = (0..types.len()).map(|i| format!("${}", i + 4)).collect();
        let sql = format!(
            "SELECT {COLUMNS} FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence <= $3 \
             AND event_type IN ({}) ORDER BY sequence",
            wanted.join(", ")
        );
        let args = types.iter().fold(
            Args::new()
                .text(aggregate_type)
                .text(aggregate_id)
                .int(through),
            |args, t| args.text(*t),
        );
        let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
        let events = rows.iter().map(logged).collect::<Result<Vec<_>, _>>()?;
        self.opened(events).await
    }

    /// The position readers may read up to now: the newest row on SQLite; on PostgreSQL
    /// the [horizon], moved by one statement.
    async fn readable(&self) -> Result<LogPosition, AppError> {
        if self.db.dialect() != Dialect::Postgres {
            return self.committed().await;
        }
        let sql = format!("{SIGHTING} SELECT * FROM sighting");
        let row = self
            .db
            .fetch_optional(&sql, Args::new().int(self.horizon.through()))
            .await
            .map_err(store_error)?
            .ok_or_else(|| corrupt("sighting", "no row"))?;
        self.settle(&row).map(|(horizon, _)| LogPosition(horizon))
    }

    /// Takes in the sighting of `row` (its `h_` columns): the position readers may now
    /// read up to and, when the statement's snapshot showed no gap (`h_whole`), the newest
    /// position it saw.
    fn settle(&self, row: &DbRow) -> Result<(i64, Option<i64>), AppError> {
        let column = |e: sqlx::Error| corrupt("sighting", e);
        let floors = row.string("h_floors").map_err(column)?;
        let seen = Sighting {
            through: row.int("h_through").map_err(column)?,
            floors: floors
                .split(',')
                .filter(|f| !f.is_empty())
                .map(|f| f.parse().map_err(|e| corrupt("floor", e)))
                .collect::<Result<_, _>>()?,
        };
        let whole = row.bool("h_whole").map_err(column)?;
        Ok((self.horizon.settle(&seen), whole.then_some(seen.through)))
    }

    /// Reads on PostgreSQL: one statement takes the next sighting and reads up to the
    /// horizon known before it (the rule needs the read's snapshot to follow the sightings
    /// that made it final) — or up to the newest position, when its snapshot shows every
    /// position past that horizon ([`SIGHTING`]'s `h_whole`). When the sighting moved the
    /// horizon past the read's bound and the read was not full, a second statement reads on
    /// to it at once: what is readable is never left for the next call.
    async fn read_pg(
        &self,
        after: LogPosition,
        filter: &EventFilter,
        limit: u32,
    ) -> Result<Vec<LoggedEvent>, AppError> {
        let mut events = Vec::new();
        let mut from = after;
        for attempt in 0..2 {
            let through = LogPosition(self.horizon.through());
            if attempt > 0 && through <= from {
                break;
            }
            let room = limit.saturating_sub(u32::try_from(events.len()).unwrap_or(u32::MAX));
            let args = Args::new().int(through.0);
            let (clause, args) = read_clause(args, from, Some(BOUND), filter, room);
            let sql = format!(
                "{SIGHTING} SELECT sighting.*, e.* FROM sighting LEFT JOIN LATERAL \
                 (SELECT {COLUMNS} FROM events{clause}) e ON true ORDER BY e.global_position"
            );
            let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
            let first = rows.first().ok_or_else(|| corrupt("sighting", "no row"))?;
            let (moved_to, gap_free) = self.settle(first)?;
            let path = SIGHTINGS[usize::from(gap_free.is_none())];
            metrics::counter!("pm_log_sightings_total", "horizon" => path).increment(1);
            let moved_to = LogPosition(moved_to);
            let bound = gap_free.map_or(through, LogPosition);
            for row in &rows {
                if row.opt_int("global_position").is_ok_and(|p| p.is_some()) {
                    events.push(logged(row)?);
                }
            }
            let full = events.len() >= limit as usize;
            if full || moved_to <= bound.max(from) {
                break;
            }
            // Everything up to `bound` that passes the filter was read.
            from = bound.max(from);
        }
        self.opened(events).await
    }

    /// `events` with their sealed texts opened.
    async fn opened(&self, mut events: Vec<LoggedEvent>) -> Result<Vec<LoggedEvent>, AppError> {
        for event in &mut events {
            if !sealing::may_be_sealed(&event.event_type, event.payload.text()) {
                continue;
            }
            let place = Place {
                event_type: &event.event_type,
                aggregate_type: &event.aggregate_type,
                aggregate_id: &event.aggregate_id,
                sequence: event.sequence,
                conversation_id: event.conversation_id,
            };
            let opened = self
                .keys
                .open_text(&place, event.payload.text(), Unreadable::Null)
                .await
                .map_err(open_error)?;
            if let Some(text) = opened {
                event.payload = Json::from_text(text).map_err(|e| corrupt("payload", e))?;
            }
        }
        Ok(events)
    }

    /// The newest committed position.
    async fn committed(&self) -> Result<LogPosition, AppError> {
        // An index-only read of the newest position: constant time at any log size.
        let head = self
            .number("SELECT max(global_position) AS n FROM events")
            .await?;
        Ok(LogPosition(head.unwrap_or(0)))
    }

    /// The one number (column `n`) of `sql`'s row, if any and not `NULL`.
    async fn number(&self, sql: &str) -> Result<Option<i64>, AppError> {
        let row = self
            .db
            .fetch_optional(sql, Args::new())
            .await
            .map_err(store_error)?;
        Ok(row
            .map(|r| r.opt_int("n"))
            .transpose()
            .map_err(|e| corrupt("row", e))?
            .flatten())
    }
}

/// The common table expressions of one [`Sighting`], as the one-row `sighting`, given the
/// horizon known before the statement (`$1`): its newest position (`h_through`); whether
/// its snapshot shows every position from the horizon up to it (`h_whole`: then all of
/// them are final already, and this statement may read them) — counted only over a short
/// stretch; and otherwise, read from `pg_locks` after the snapshot, the floors named by
/// this database's appends in progress (`h_floors`: the low 31 bits of each, the second
/// key of a class `0x706d6c62` lock of migration `0017_log_horizon.sql`). The lock table
/// is read only when a position is missing: reading it holds every backend's lock table
/// for a moment.
const SIGHTING: &str = "WITH newest AS MATERIALIZED (\
    SELECT COALESCE((SELECT max(global_position) FROM events), 0) AS p), \
  seen AS MATERIALIZED (SELECT p AS h_through, p - $1 <= 4096 AND (SELECT count(*) FROM events \
    WHERE global_position > $1 AND global_position <= p) = p - $1 AS h_whole FROM newest), \
  sighting AS MATERIALIZED (SELECT h_through, h_whole, CASE WHEN h_whole THEN '' ELSE \
    array_to_string(ARRAY(SELECT objid::text FROM pg_locks \
      WHERE locktype = 'advisory' AND granted AND classid = 1886219362 AND objsubid = 2 \
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())), \
      ',') END AS h_floors FROM seen)";

/// How a read's sighting learned how far it may read (`pm_log_sightings_total`): its
/// snapshot showed no gap, or it read the floors from the lock table.
pub const SIGHTINGS: &[&str] = &["gap_free", "lock_table"];

/// The last position a read of [`SIGHTING`]'s statement reads: the newest when its
/// snapshot shows every position up to it, else the horizon known before it (`$1`).
const BOUND: &str = "(CASE WHEN sighting.h_whole THEN sighting.h_through ELSE $1 END)";

/// How long the oldest append in progress has been running, in microseconds: readers
/// cannot pass what it appends until it ends.
const HELD_BACK: &str =
    "SELECT (extract(epoch FROM clock_timestamp() - min(a.xact_start)) * 1000000)::bigint AS n \
    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
    WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 1886219362 AND l.objsubid = 2 \
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())";

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

/// What keys that cannot be read mean to a reader: the store away, or a damaged key row.
pub(crate) fn open_error(e: crate::keys::OpenError) -> AppError {
    match e {
        crate::keys::OpenError::Key(crate::keys::KeyError::Store(e)) => store_error(e),
        crate::keys::OpenError::Key(other) => AppError::Internal(other.to_string()),
        crate::keys::OpenError::Payload(e) => corrupt("payload", e),
    }
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> AppError {
    AppError::Internal(format!("corrupt {what} in the event log: {e}"))
}

/// The `WHERE … ORDER BY … LIMIT` of a read after `after` (up to `through`, when given)
/// through `filter`, its arguments pushed after those of `args`.
fn read_clause(
    mut args: Args,
    after: LogPosition,
    through: Option<&str>,
    filter: &EventFilter,
    limit: u32,
) -> (String, Args) {
    let seq = args.push(Arg::Int(Some(after.0)));
    let mut sql = format!(" WHERE global_position > {seq}");
    if let Some(through) = through {
        sql.push_str(&format!(" AND global_position <= {through}"));
    }
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
        if self.db.dialect() == Dialect::Postgres {
            return self.read_pg(after, filter, limit).await;
        }
        // SQLite's single writer: row order is commit order, every row may be read.
        let (clause, args) = read_clause(Args::new(), after, None, filter, limit);
        let sql = format!("SELECT {COLUMNS} FROM events{clause}");
        let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
        let events = rows.iter().map(logged).collect::<Result<Vec<_>, _>>()?;
        self.opened(events).await
    }

    async fn event_at(&self, position: LogPosition) -> Result<Option<LoggedEvent>, AppError> {
        let sql = format!("SELECT {COLUMNS} FROM events WHERE global_position = $1");
        let row = self
            .db
            .fetch_optional(&sql, Args::new().int(position.0))
            .await
            .map_err(store_error)?;
        let Some(event) = row.as_ref().map(logged).transpose()? else {
            return Ok(None);
        };
        Ok(self.opened(vec![event]).await?.pop())
    }

    async fn head(&self) -> Result<LogPosition, AppError> {
        self.readable().await
    }

    async fn end(&self) -> Result<LogPosition, AppError> {
        self.committed().await
    }

    async fn held_back(&self) -> Result<Option<Duration>, AppError> {
        if self.db.dialect() != Dialect::Postgres {
            // SQLite's single writer: an append holds the database for one statement.
            return Ok(None);
        }
        let held_us = self.number(HELD_BACK).await?;
        Ok(held_us.map(|us| Duration::from_micros(us.max(0) as u64)))
    }

    fn doorbell(&self) -> watch::Receiver<u64> {
        self.doorbell.clone()
    }
}
