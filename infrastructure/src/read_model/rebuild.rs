//! Read-model schema start-up and blue-green rebuilds.
//!
//! A rebuild replays the whole log into the tables of generation N+1 while generation N
//! keeps serving, then — in one transaction holding the processor row's lock, so the live
//! projection waits — applies the last events, points the views and the processor at N+1,
//! and commits; N's tables are dropped afterwards. It never trusts cqrs-es's
//! `QueryReplay::replay_all` (which reports success after a database error): every batch
//! is a checked transaction and any failure marks the rebuild `failed` and leaves N serving.

use chrono::Utc;
use pm_application::log::{EventFilter, LogPosition, LogReader, LoggedEvent};
use pm_application::AppError;

use super::error::ApplyError;
use super::schema::{create_statements, drop_statements, view_statements};
use super::skipping::{apply_skipping, Applied};
use super::READ_MODEL;
use crate::db::{Args, Tx};
use crate::log::DbLogReader;
use crate::processor::DbProcessorStore;
use crate::sql::{Dialect, Sql};
use crate::Database;

/// Events read from the log at once while replaying; applied in one transaction.
const PAGE: u32 = 5000;

/// The events the read model projects: the facts (`project_manager.*`).
const FACTS: &str = "project_manager.*";

/// Events read at once during the swap.
const BATCH: u32 = 1000;

/// A rebuild that could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    /// No projection has this name.
    #[error("no projection is named {0:?}")]
    UnknownProjection(String),
    /// Another rebuild of this projection is running.
    #[error("a rebuild of {0} is already running")]
    AlreadyRunning(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] AppError),
    /// A statement failed.
    #[error("database error: {0}")]
    Sql(#[from] sqlx::Error),
    /// Someone else swapped generations meanwhile.
    #[error("the projection changed generation during the rebuild")]
    Raced,
}

impl From<ApplyError> for RebuildError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Sql(e) => Self::Sql(e),
            ApplyError::Rejected(reason) => Self::Store(AppError::Internal(reason)),
            ApplyError::Batch(e) => Self::Store(AppError::Internal(e.to_string())),
        }
    }
}

/// What a finished rebuild did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuildReport {
    /// The generation now serving.
    pub generation: i64,
    /// Facts applied (the sagas' runes in the log are passed over).
    pub events: u64,
    /// Events skipped because they cannot be applied (they are parked by the live
    /// projection too).
    pub skipped: u64,
    /// The cursor the projection continues from.
    pub cursor: LogPosition,
}

impl RebuildReport {
    fn add(&mut self, applied: Applied) {
        self.events += applied.events;
        self.skipped += applied.skipped;
    }
}

async fn generation(db: &Database) -> Result<i64, sqlx::Error> {
    db.execute(
        "INSERT INTO processors (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
        Args::new().text(READ_MODEL),
    )
    .await?;
    db.fetch_optional(
        "SELECT generation FROM processors WHERE name = $1",
        Args::new().text(READ_MODEL),
    )
    .await?
    .ok_or(sqlx::Error::RowNotFound)?
    .int("generation")
}

/// Runs DDL statements in order.
pub(super) async fn run_all(
    tx: &mut Tx,
    statements: impl IntoIterator<Item = String>,
) -> Result<(), sqlx::Error> {
    for statement in statements {
        tx.execute(&statement, Args::new()).await?;
    }
    Ok(())
}

/// Locks the read model's processor row; returns its generation. Starts, rebuilds' swaps
/// and `analyst-role` hold it while they change the views, so they take turns.
pub(crate) async fn lock_generation(tx: &mut Tx) -> Result<i64, sqlx::Error> {
    const LOCKED: Sql = Sql {
        pg: "SELECT generation FROM processors WHERE name = $1 FOR UPDATE",
        sqlite: "SELECT generation FROM processors WHERE name = $1",
    };
    tx.fetch_optional(LOCKED.of(tx.dialect()), Args::new().text(READ_MODEL))
        .await?
        .ok_or(sqlx::Error::RowNotFound)?
        .int("generation")
}

/// Creates the current generation's tables and views when missing (start-up), upgrades
/// them when an earlier version made them ([`super::upgrade`]), and protects them for
/// analyst roles ([`crate::analysts::protect`]: the views are made anew here, and would
/// otherwise lose the analysts' grants and read with their owner's rights).
///
/// # Errors
/// A failed statement.
pub async fn ensure_schema(db: &Database) -> Result<(), sqlx::Error> {
    generation(db).await?;
    // Replicas starting together take turns (view DDL does not like company).
    let mut tx = db.begin().await?;
    let g = lock_generation(&mut tx).await?;
    let g = super::upgrade::upgrade(&mut tx, g).await?;
    let d = tx.dialect();
    run_all(
        &mut tx,
        create_statements(d, g)
            .into_iter()
            .chain(view_statements(g)),
    )
    .await?;
    crate::analysts::protect(&mut tx, g).await?;
    tx.commit().await
}

/// Rebuilds projection `name` from the start of the log, without downtime: [`start`]
/// then [`finish`].
///
/// # Errors
/// [`RebuildError`]; the serving generation is untouched then.
pub async fn rebuild(
    db: &Database,
    log: &DbLogReader,
    name: &str,
) -> Result<RebuildReport, RebuildError> {
    start(db, name).await?;
    finish(db, log).await
}

/// Checks the projection exists and claims its rebuild (marks it `running`).
///
/// # Errors
/// [`RebuildError::UnknownProjection`], [`RebuildError::AlreadyRunning`], or the store.
pub async fn start(db: &Database, name: &str) -> Result<(), RebuildError> {
    if name != READ_MODEL {
        return Err(RebuildError::UnknownProjection(name.to_string()));
    }
    claim(db).await
}

/// Runs a claimed rebuild to its end and records the outcome on the processor row.
///
/// # Errors
/// [`RebuildError`]; the serving generation is untouched then.
pub async fn finish(db: &Database, log: &DbLogReader) -> Result<RebuildReport, RebuildError> {
    let store = DbProcessorStore::new(db.clone());
    let started = std::time::Instant::now();
    let result = run(db, log).await;
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let (status, detail) = match &result {
        Ok(r) => (
            "done",
            format!(
                "generation {}: {} facts ({} skipped) up to log position {} in {secs:.1} s, \
                 {:.0} facts/s, {:.0} log events/s",
                r.generation,
                r.events,
                r.skipped,
                r.cursor,
                r.events as f64 / secs,
                r.cursor.0 as f64 / secs
            ),
        ),
        Err(e) => ("failed", e.to_string()),
    };
    if let Err(e) = store.set_rebuild_status(READ_MODEL, status, &detail).await {
        tracing::warn!(error = %e, "could not record the rebuild's outcome");
    }
    result
}

/// Marks the rebuild running, unless one is (a `running` rebuild whose heartbeat is older
/// than 10 minutes died and may be taken over).
async fn claim(db: &Database) -> Result<(), RebuildError> {
    generation(db).await?;
    let now = Utc::now();
    let stale = now - chrono::Duration::minutes(10);
    let claimed = db
        .execute(
            "UPDATE processors SET rebuild_status = 'running', rebuild_detail = 'replaying', rebuild_heartbeat = $2 \
             WHERE name = $1 AND (rebuild_status IS NULL OR rebuild_status <> 'running' OR rebuild_heartbeat < $3)",
            Args::new().text(READ_MODEL).time(&now).time(&stale),
        )
        .await?;
    if claimed == 1 {
        Ok(())
    } else {
        Err(RebuildError::AlreadyRunning(READ_MODEL.to_string()))
    }
}

async fn heartbeat(db: &Database, detail: &str) -> Result<(), sqlx::Error> {
    db.execute(
        "UPDATE processors SET rebuild_heartbeat = $2, rebuild_detail = $3 WHERE name = $1",
        Args::new().text(READ_MODEL).time(&Utc::now()).text(detail),
    )
    .await?;
    Ok(())
}

/// A rebuild's progress: events replayed, their rate and the time left to the head of
/// the log as it was at the start (shown in `GET /v1/admin/processors` as the rebuild's
/// detail, and logged every few seconds — the CLI's `rebuild` prints it).
struct Progress {
    started: std::time::Instant,
    logged: std::time::Instant,
    head: LogPosition,
}

impl Progress {
    fn new(head: LogPosition) -> Self {
        let now = std::time::Instant::now();
        Self {
            started: now,
            logged: now,
            head,
        }
    }

    fn line(&mut self, report: &RebuildReport) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = report.cursor.0 as f64 / secs;
        let left = self.head.distance_from(report.cursor).max(0) as f64;
        let line = format!(
            "replayed {} facts, {:.0} facts/s, at log position {} of {} ({:.0} log events/s), \
             about {:.0} s left",
            report.events,
            report.events as f64 / secs,
            report.cursor,
            self.head,
            rate,
            if rate > 0.0 { left / rate } else { 0.0 }
        );
        if self.logged.elapsed() >= std::time::Duration::from_secs(2) {
            self.logged = std::time::Instant::now();
            tracing::info!(generation = report.generation, "rebuild: {line}");
        }
        line
    }

    fn done(&self, report: &RebuildReport) {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        tracing::info!(
            generation = report.generation,
            facts = report.events,
            skipped = report.skipped,
            "rebuild replayed the log to position {} at {:.0} facts/s ({:.0} log events/s); swapping",
            report.cursor,
            report.events as f64 / secs,
            report.cursor.0 as f64 / secs
        );
    }
}

/// Applies a page in one transaction through the live projection's multi-row path,
/// skipping what cannot be applied.
async fn apply_page(db: &Database, g: i64, events: &[LoggedEvent]) -> Result<Applied, ApplyError> {
    let mut tx = db.begin().await?;
    let applied = apply_skipping(&mut tx, g, events).await?;
    tx.commit().await?;
    Ok(applied)
}

async fn run(db: &Database, log: &DbLogReader) -> Result<RebuildReport, RebuildError> {
    let old = generation(db).await?;
    let new = old + 1;
    let mut tx = db.begin().await?;
    let d = tx.dialect();
    run_all(
        &mut tx,
        drop_statements(d, new)
            .into_iter()
            .chain(create_statements(d, new)),
    )
    .await?;
    tx.commit().await?;
    let mut report = RebuildReport {
        generation: new,
        events: 0,
        skipped: 0,
        cursor: LogPosition::START,
    };
    let outcome = replay_and_swap(db, log, old, &mut report).await;
    let cleanup = if outcome.is_ok() { old } else { new };
    let dropped = async {
        let mut tx = db.begin().await?;
        let d = tx.dialect();
        run_all(&mut tx, drop_statements(d, cleanup)).await?;
        tx.commit().await
    }
    .await;
    if let Err(e) = dropped {
        tracing::warn!(error = %e, generation = cleanup, "could not drop the tables of an unused generation");
    }
    outcome.map(|()| report)
}

async fn replay_and_swap(
    db: &Database,
    log: &DbLogReader,
    old: i64,
    report: &mut RebuildReport,
) -> Result<(), RebuildError> {
    let mut progress = Progress::new(log.head().await?);
    // Replay while the old generation serves: pages of the facts (the sagas' runes are
    // not the read model's) as multi-row batches, skipping what cannot be applied. On
    // PostgreSQL the next page is read while one is applied.
    let facts = EventFilter::default().with_types(FACTS);
    // Reading ahead takes a second connection while the page's transaction holds one; a
    // SQLite pool is small and has one writer, so there the two run one after the other.
    let read_ahead = db.dialect() == Dialect::Postgres;
    let mut page = log.read_after(report.cursor, &facts, PAGE).await?;
    while let Some(last) = page.last().map(|e| e.position) {
        let more = page.len() == PAGE as usize;
        let read_next = async {
            if more {
                log.read_after(last, &facts, PAGE).await
            } else {
                Ok(Vec::new())
            }
        };
        let apply = apply_page(db, report.generation, &page);
        let (applied, next) = if read_ahead {
            tokio::join!(apply, read_next)
        } else {
            (apply.await, read_next.await)
        };
        // A database that went away fails the rebuild; poison events were skipped.
        report.add(applied?);
        report.cursor = last;
        heartbeat(db, &progress.line(report)).await?;
        page = next?;
    }
    progress.done(report);
    // Swap: hold the processor row so the live projection waits, catch up, point views.
    let new = report.generation;
    let mut tx = db.begin().await?;
    if lock_generation(&mut tx).await? != old {
        return Err(RebuildError::Raced);
    }
    loop {
        let events = log.read_after(report.cursor, &facts, BATCH).await?;
        let Some(last) = events.last() else { break };
        let last = last.position;
        report.add(apply_skipping(&mut tx, new, &events).await?);
        report.cursor = last;
    }
    tx.execute(
        "UPDATE processors SET generation = $2, cursor_seq = $3 WHERE name = $1",
        Args::new().text(READ_MODEL).int(new).int(report.cursor.0),
    )
    .await?;
    run_all(&mut tx, view_statements(new)).await?;
    // The new tables and views, protected for analyst roles before anyone can see them.
    crate::analysts::protect(&mut tx, new).await?;
    tx.commit().await?;
    Ok(())
}
