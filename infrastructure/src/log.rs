//! The global log reader. Reading the log is reading rows after a position in position
//! order, up to the position where no later commit can still appear behind: on SQLite
//! (one writer) the newest row, on PostgreSQL (appends commit concurrently) the
//! [horizon] worked out from the appends in progress. No transaction that does not append
//! can hold readers back.

mod horizon;

use pm_application::log::{EventFilter, Json, LogPosition, LogReader, LoggedEvent};
use pm_application::AppError;
use tokio::sync::watch;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use horizon::{Ask, Horizon, Sighting};

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
    /// Shared by the clones: one process's readers move one horizon.
    horizon: Arc<Mutex<Horizon>>,
}

impl DbLogReader {
    /// A reader of `db`, woken by `doorbell`.
    pub fn new(db: Database, doorbell: watch::Receiver<u64>) -> Self {
        Self {
            db,
            doorbell,
            horizon: Arc::default(),
        }
    }

    /// The position readers may read up to now: the newest row on SQLite; on PostgreSQL
    /// the [horizon], moved by one statement.
    async fn readable(&self) -> Result<LogPosition, AppError> {
        if self.db.dialect() != Dialect::Postgres {
            return self.committed().await;
        }
        let ask = self.lock().ask();
        let sql = format!("{SIGHTING} SELECT * FROM sighting");
        let row = self
            .db
            .fetch_optional(&sql, Args::new().text(asked(&ask)))
            .await
            .map_err(store_error)?
            .ok_or_else(|| corrupt("sighting", "no row"))?;
        self.settle(&ask, &row).map(LogPosition)
    }

    /// Takes in the sighting of `row` (its `h_` columns), checked for `ask`.
    fn settle(&self, ask: &Ask, row: &DbRow) -> Result<i64, AppError> {
        let ids = |column: &str| -> Result<Vec<i64>, AppError> {
            let text = row.string(column).map_err(|e| corrupt("sighting", e))?;
            text.split(',')
                .filter(|id| !id.is_empty())
                .map(|id| id.parse().map_err(|e| corrupt("transaction id", e)))
                .collect()
        };
        let seen = Sighting {
            through: row.int("h_through").map_err(|e| corrupt("sighting", e))?,
            blockers: ids("h_blockers")?,
        };
        let running = ids("h_running")?;
        Ok(self.lock().settle(ask, &running, seen))
    }

    /// Reads on PostgreSQL: one statement both reads up to the horizon known before it
    /// (the rule needs the read's snapshot to follow the checks that made it final) and
    /// takes the next sighting. When that sighting moved the horizon past the read's bound
    /// and the read was not full, a second statement reads on to it at once: what is
    /// readable is never left for the next call.
    async fn read_pg(
        &self,
        after: LogPosition,
        filter: &EventFilter,
        limit: u32,
    ) -> Result<Vec<LoggedEvent>, AppError> {
        let mut events = Vec::new();
        let mut from = after;
        for attempt in 0..2 {
            let (ask, through) = {
                let horizon = self.lock();
                (horizon.ask(), LogPosition(horizon.through()))
            };
            if attempt > 0 && through <= from {
                break;
            }
            let room = limit.saturating_sub(u32::try_from(events.len()).unwrap_or(u32::MAX));
            let mut args = Args::new();
            args.push(Arg::Text(Some(asked(&ask))));
            let (clause, args) = read_clause(args, from, Some(through), filter, room);
            let sql = format!(
                "{SIGHTING} SELECT sighting.*, e.* FROM sighting LEFT JOIN LATERAL \
                 (SELECT {COLUMNS} FROM events{clause}) e ON true ORDER BY e.global_position"
            );
            let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
            let first = rows.first().ok_or_else(|| corrupt("sighting", "no row"))?;
            let moved_to = LogPosition(self.settle(&ask, first)?);
            for row in &rows {
                if row.opt_int("global_position").is_ok_and(|p| p.is_some()) {
                    events.push(logged(row)?);
                }
            }
            let full = events.len() >= limit as usize;
            if full || moved_to <= through.max(from) {
                break;
            }
            // Everything up to `through` that passes the filter was read.
            from = through.max(from);
        }
        Ok(events)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Horizon> {
        self.horizon.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The newest committed position.
    async fn committed(&self) -> Result<LogPosition, AppError> {
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
}

/// The common table expressions of one [`Sighting`], as the one-row `sighting`: its
/// newest position (`h_through`), the appends holding the log's lock after its snapshot
/// was taken (`h_blockers`), and which of the appends `$1` asked about still hold it
/// (`h_running`). `appending`: the transaction ids (32-bit, as `pg_locks` shows them;
/// unique among running transactions) of this database's holders of the lock (migration
/// `0017_log_horizon.sql`, key `0x706d6c6f67000001`) that have an id, from one read of
/// `pg_locks` joined to itself by transaction. A holder without an id has drawn no
/// position yet.
const SIGHTING: &str = "WITH locks AS MATERIALIZED (\
    SELECT virtualtransaction, locktype, transactionid FROM pg_locks \
    WHERE granted AND ((locktype = 'advisory' AND classid = 1886219375 AND objid = 1728053249 \
        AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) \
      OR (locktype = 'transactionid' AND mode = 'ExclusiveLock'))), \
  appending AS MATERIALIZED (SELECT t.transactionid::text::bigint AS xid FROM locks a JOIN locks t \
    ON t.virtualtransaction = a.virtualtransaction \
    WHERE a.locktype = 'advisory' AND t.locktype = 'transactionid'), \
  sighting AS MATERIALIZED (SELECT \
    COALESCE((SELECT max(global_position) FROM events), 0) AS h_through, \
    array_to_string(ARRAY(SELECT xid FROM appending), ',') AS h_blockers, \
    array_to_string(ARRAY(SELECT x FROM unnest($1::text::bigint[]) x \
      WHERE x IN (SELECT xid FROM appending)), ',') AS h_running)";

/// `ask`'s blockers as a PostgreSQL array literal.
fn asked(ask: &Ask) -> String {
    let ids: Vec<String> = ask.blockers.iter().map(i64::to_string).collect();
    format!("{{{}}}", ids.join(","))
}

/// How long the oldest transaction holding the append lock has been running, in
/// microseconds: readers cannot pass what it appends until it ends.
const HELD_BACK: &str = "SELECT (extract(epoch FROM clock_timestamp() - min(a.xact_start)) * 1000000)::bigint AS held_us \
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

/// The `WHERE … ORDER BY … LIMIT` of a read after `after` (up to `through`, when given)
/// through `filter`, its arguments pushed after those of `args`.
fn read_clause(
    mut args: Args,
    after: LogPosition,
    through: Option<LogPosition>,
    filter: &EventFilter,
    limit: u32,
) -> (String, Args) {
    let seq = args.push(Arg::Int(Some(after.0)));
    let mut sql = format!(" WHERE global_position > {seq}");
    if let Some(through) = through {
        let end = args.push(Arg::Int(Some(through.0)));
        sql.push_str(&format!(" AND global_position <= {end}"));
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
        rows.iter().map(logged).collect()
    }

    async fn event_at(&self, position: LogPosition) -> Result<Option<LoggedEvent>, AppError> {
        let sql = format!("SELECT {COLUMNS} FROM events WHERE global_position = $1");
        let row = self
            .db
            .fetch_optional(&sql, Args::new().int(position.0))
            .await
            .map_err(store_error)?;
        row.as_ref().map(logged).transpose()
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
