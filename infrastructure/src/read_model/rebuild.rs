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
use super::facts::apply_event;
use super::schema::{create_statements, drop_statements, view_statements};
use super::READ_MODEL;
use crate::db::{Args, Tx};
use crate::log::DbLogReader;
use crate::processor::DbProcessorStore;
use crate::Database;

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
            ApplyError::Poison(_, reason) => Self::Store(AppError::Internal(reason)),
            ApplyError::Batch(e) => Self::Store(AppError::Internal(e.to_string())),
        }
    }
}

/// What a finished rebuild did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuildReport {
    /// The generation now serving.
    pub generation: i64,
    /// Events replayed.
    pub events: u64,
    /// Events skipped because they cannot be applied (they are parked by the live
    /// projection too).
    pub skipped: u64,
    /// The cursor the projection continues from.
    pub cursor: LogPosition,
}

async fn generation(db: &Database) -> Result<i64, sqlx::Error> {
    db.execute(
        "INSERT INTO processors (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
        Args::new().text(READ_MODEL),
    )
    .await?;
    db.fetch_optional(
        "SELECT generation::bigint AS generation FROM processors WHERE name = $1",
        Args::new().text(READ_MODEL),
    )
    .await?
    .ok_or(sqlx::Error::RowNotFound)?
    .int("generation")
}

/// Runs DDL statements in order.
async fn run_all(
    tx: &mut Tx,
    statements: impl IntoIterator<Item = String>,
) -> Result<(), sqlx::Error> {
    for statement in statements {
        tx.execute(&statement, Args::new()).await?;
    }
    Ok(())
}

/// Locks the read model's processor row; returns its generation.
async fn lock_generation(tx: &mut Tx) -> Result<i64, sqlx::Error> {
    tx.fetch_optional(
        "SELECT generation::bigint AS generation FROM processors WHERE name = $1 FOR UPDATE",
        Args::new().text(READ_MODEL),
    )
    .await?
    .ok_or(sqlx::Error::RowNotFound)?
    .int("generation")
}

/// Creates the current generation's tables and views when missing (start-up).
///
/// # Errors
/// A failed statement.
pub async fn ensure_schema(db: &Database) -> Result<(), sqlx::Error> {
    generation(db).await?;
    // Replicas starting together take turns (view DDL does not like company).
    let mut tx = db.begin().await?;
    let g = lock_generation(&mut tx).await?;
    let d = tx.dialect();
    run_all(
        &mut tx,
        create_statements(d, g)
            .into_iter()
            .chain(view_statements(g)),
    )
    .await?;
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
    let result = run(db, log).await;
    let (status, detail) = match &result {
        Ok(r) => (
            "done",
            format!(
                "generation {} from {} events ({} skipped)",
                r.generation, r.events, r.skipped
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
            "UPDATE processors SET rebuild_status = 'running', rebuild_detail = 'replaying', rebuild_heartbeat = $2::timestamptz \
             WHERE name = $1 AND (rebuild_status IS NULL OR rebuild_status <> 'running' OR rebuild_heartbeat < $3::timestamptz)",
            Args::new().text(READ_MODEL).time(&now).time(&stale),
        )
        .await?;
    if claimed == 1 {
        Ok(())
    } else {
        Err(RebuildError::AlreadyRunning(READ_MODEL.to_string()))
    }
}

async fn heartbeat(db: &Database, events: u64) -> Result<(), sqlx::Error> {
    db.execute(
        "UPDATE processors SET rebuild_heartbeat = $2::timestamptz, rebuild_detail = $3 WHERE name = $1",
        Args::new()
            .text(READ_MODEL)
            .time(&Utc::now())
            .text(format!("replayed {events} events")),
    )
    .await?;
    Ok(())
}

async fn run(db: &Database, log: &DbLogReader) -> Result<RebuildReport, RebuildError> {
    let old = generation(db).await?;
    let new = old + 1;
    let mut tx = db.begin().await?;
    let d = tx.dialect();
    run_all(
        &mut tx,
        drop_statements(new)
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
        run_all(&mut tx, drop_statements(cleanup)).await?;
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
    let all = EventFilter::default();
    // Replay while the old generation serves.
    loop {
        let events = log.read_after(report.cursor, &all, BATCH).await?;
        let Some(last) = events.last() else { break };
        let last = last.position;
        apply_batch(db, report.generation, &events, report).await?;
        report.cursor = last;
        heartbeat(db, report.events).await?;
        if events.len() < BATCH as usize {
            break;
        }
    }
    // Swap: hold the processor row so the live projection waits, catch up, point views.
    let new = report.generation;
    let mut tx = db.begin().await?;
    if lock_generation(&mut tx).await? != old {
        return Err(RebuildError::Raced);
    }
    loop {
        let events = log.read_after(report.cursor, &all, BATCH).await?;
        let Some(last) = events.last() else { break };
        let last = last.position;
        for event in &events {
            match apply_event(&mut tx, new, event).await {
                Ok(()) => report.events += 1,
                Err(ApplyError::Poison(_, reason)) => {
                    report.skipped += 1;
                    tracing::warn!(position = %event.position, %reason, "rebuild skips an event it cannot apply");
                }
                Err(e) => return Err(e.into()),
            }
        }
        report.cursor = last;
    }
    tx.execute(
        "UPDATE processors SET generation = $2, cursor_seq = $3 WHERE name = $1",
        Args::new().text(READ_MODEL).int(new).int(report.cursor.0),
    )
    .await?;
    run_all(&mut tx, view_statements(new)).await?;
    tx.commit().await?;
    Ok(())
}

/// Applies a batch to generation `g` in one transaction; an event that cannot be applied
/// is skipped (the batch is retried without it).
async fn apply_batch(
    db: &Database,
    g: i64,
    events: &[LoggedEvent],
    report: &mut RebuildReport,
) -> Result<(), RebuildError> {
    let mut start = 0;
    while start < events.len() {
        let slice = &events[start..];
        let applied = async {
            let mut tx = db.begin().await?;
            for (index, event) in slice.iter().enumerate() {
                apply_event(&mut tx, g, event)
                    .await
                    .map_err(|e| e.at(index))?;
            }
            tx.commit().await?;
            Ok::<_, ApplyError>(slice.len())
        }
        .await;
        match applied {
            Ok(n) => {
                report.events += n as u64;
                start = events.len();
            }
            Err(ApplyError::Poison(index, reason)) => {
                // Apply what came before the poison event, then skip it.
                if index > 0 {
                    Box::pin(apply_batch(db, g, &slice[..index], report)).await?;
                }
                tracing::warn!(position = %slice[index].position, %reason, "rebuild skips an event it cannot apply");
                report.skipped += 1;
                start += index + 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
