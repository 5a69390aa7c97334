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
use pm_domain::time;

use super::apply::ApplyError;
use super::event::apply_event;
use super::processors::DbProcessorStore;
use super::schema::{create_statements, drop_statements, view_statements};
use super::READ_MODEL;
use crate::log::DbLogReader;
use crate::{in_tx, on_db, Database};

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
    on_db!(db, d, pool, {
        sqlx::query("INSERT INTO processors (name) VALUES ($1) ON CONFLICT (name) DO NOTHING")
            .bind(READ_MODEL)
            .execute(pool)
            .await?;
        let g: i32 =
            sqlx::query_scalar(&d.sql("SELECT generation FROM processors WHERE name = $1"))
                .bind(READ_MODEL)
                .fetch_one(pool)
                .await?;
        Ok(i64::from(g))
    })
}

/// Creates the current generation's tables and views when missing (start-up).
///
/// # Errors
/// A failed statement.
pub async fn ensure_schema(db: &Database) -> Result<(), sqlx::Error> {
    generation(db).await?;
    let result: Result<(), sqlx::Error> = in_tx!(db, d, tx, {
        // Replicas starting together take turns (view DDL does not like company).
        let g: i32 = sqlx::query_scalar(
            &d.sql("SELECT generation FROM processors WHERE name = $1 FOR UPDATE"),
        )
        .bind(READ_MODEL)
        .fetch_one(&mut *tx)
        .await?;
        let g = i64::from(g);
        for statement in create_statements(d, g) {
            sqlx::query(&statement).execute(&mut *tx).await?;
        }
        for statement in view_statements(g) {
            sqlx::query(&statement).execute(&mut *tx).await?;
        }
        Ok(())
    });
    result
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
    let claimed = on_db!(db, d, pool, {
        sqlx::query(&d.sql(
            "UPDATE processors SET rebuild_status = 'running', rebuild_detail = 'replaying', rebuild_heartbeat = $2::timestamptz \
             WHERE name = $1 AND (rebuild_status IS NULL OR rebuild_status <> 'running' OR rebuild_heartbeat < $3::timestamptz)",
        ))
        .bind(READ_MODEL)
        .bind(time::format(&now))
        .bind(time::format(&stale))
        .execute(pool)
        .await
        .map(|r| r.rows_affected())
    })?;
    if claimed == 1 {
        Ok(())
    } else {
        Err(RebuildError::AlreadyRunning(READ_MODEL.to_string()))
    }
}

async fn heartbeat(db: &Database, events: u64) -> Result<(), sqlx::Error> {
    on_db!(db, d, pool, {
        sqlx::query(&d.sql("UPDATE processors SET rebuild_heartbeat = $2::timestamptz, rebuild_detail = $3 WHERE name = $1"))
            .bind(READ_MODEL)
            .bind(time::format(&Utc::now()))
            .bind(format!("replayed {events} events"))
            .execute(pool)
            .await
            .map(|_| ())
    })
}

async fn run(db: &Database, log: &DbLogReader) -> Result<RebuildReport, RebuildError> {
    let old = generation(db).await?;
    let new = old + 1;
    let prepared: Result<(), sqlx::Error> = in_tx!(db, d, tx, {
        for statement in drop_statements(new)
            .into_iter()
            .chain(create_statements(d, new))
        {
            sqlx::query(&statement).execute(&mut *tx).await?;
        }
        Ok(())
    });
    prepared?;
    let mut report = RebuildReport {
        generation: new,
        events: 0,
        skipped: 0,
        cursor: LogPosition::START,
    };
    let outcome = replay_and_swap(db, log, old, &mut report).await;
    let cleanup = if outcome.is_ok() { old } else { new };
    let dropped: Result<(), sqlx::Error> = in_tx!(db, _d, tx, {
        for statement in drop_statements(cleanup) {
            sqlx::query(&statement).execute(&mut *tx).await?;
        }
        Ok(())
    });
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
    let swapped: Result<(), RebuildError> = in_tx!(db, d, tx, {
        let (generation, _, _): (i32, i64, i64) = sqlx::query_as(&d.sql(
            "SELECT generation, cursor_txid, cursor_seq FROM processors WHERE name = $1 FOR UPDATE",
        ))
        .bind(READ_MODEL)
        .fetch_one(&mut *tx)
        .await?;
        if i64::from(generation) != old {
            return Err(RebuildError::Raced);
        }
        loop {
            let events = log.read_after(report.cursor, &all, BATCH).await?;
            let Some(last) = events.last() else { break };
            let last = last.position;
            for event in &events {
                match apply_event(&mut *tx, d, new, event).await {
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
        sqlx::query(&d.sql("UPDATE processors SET generation = $2, cursor_txid = $3, cursor_seq = $4 WHERE name = $1"))
            .bind(READ_MODEL)
            .bind(new as i32)
            .bind(report.cursor.txid)
            .bind(report.cursor.seq)
            .execute(&mut *tx)
            .await?;
        for statement in view_statements(new) {
            sqlx::query(&statement).execute(&mut *tx).await?;
        }
        Ok(())
    });
    swapped
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
        let applied: Result<usize, ApplyError> = in_tx!(db, d, tx, {
            for (index, event) in slice.iter().enumerate() {
                apply_event(&mut *tx, d, g, event)
                    .await
                    .map_err(|e| e.at(index))?;
            }
            Ok(slice.len())
        });
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
