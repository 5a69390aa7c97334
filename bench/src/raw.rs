//! The raw limit: single-event `INSERT` transactions into an events-shaped table, from
//! `concurrency` connections, on the same PostgreSQL as the service and in the same run.
//! What the service's command rate is compared with.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgPool};

/// The scratch table; created and dropped by [`measure`].
const TABLE: &str = "pm_bench_raw";

/// One event's worth of JSON, about the size of a message fact and its metadata (the raw
/// queue's jobs carry it too: a turn's context is about a message).
pub const PAYLOAD: &str =
    r#"{"content":"hello from the benchmark","actor_id":"6c1f4a52-1d3e-4a5b-9f0e-3b1d2c4e5f60"}"#;
const METADATA: &str =
    r#"{"role":"ingress","correlation_id":"6c1f4a52-1d3e-4a5b-9f0e-3b1d2c4e5f60"}"#;

/// Inserts per second over `duration` with `concurrency` connections, each `INSERT` its
/// own transaction (autocommit), as the service's log is written.
///
/// # Errors
/// When PostgreSQL cannot be reached or the table cannot be made.
pub async fn measure(
    database_url: &str,
    concurrency: usize,
    duration: Duration,
) -> Result<f64, sqlx::Error> {
    let pool = pool(database_url, concurrency).await?;
    scratch(
        &pool,
        TABLE,
        "aggregate_type text NOT NULL, aggregate_id text NOT NULL, \
         sequence bigint NOT NULL, event_type text NOT NULL, event_version text NOT NULL, \
         payload json NOT NULL, metadata json NOT NULL, \
         global_position bigint GENERATED ALWAYS AS IDENTITY, \
         PRIMARY KEY (aggregate_type, aggregate_id, sequence)",
    )
    .await?;
    // Shared, not copied per statement: the loop costs what it did before it was shared.
    let sql: Arc<str> = format!(
        "INSERT INTO {TABLE} (aggregate_type, aggregate_id, sequence, event_type, \
         event_version, payload, metadata) VALUES ('message', $1, 1, \
         'project_manager.message.added', '1.0', $2::json, $3::json)"
    )
    .into();
    let insert = {
        let pool = pool.clone();
        move |_| {
            let (pool, sql) = (pool.clone(), sql.clone());
            async move {
                sqlx::query(&sql)
                    .bind(uuid::Uuid::new_v4().to_string())
                    .bind(PAYLOAD)
                    .bind(METADATA)
                    .execute(&pool)
                    .await
                    .map(drop)
            }
        }
    };
    let rate = per_second(concurrency, duration, insert).await;
    done(pool, TABLE).await?;
    rate
}

/// Table `table` with `columns`, empty (one left by an interrupted run is dropped first).
///
/// # Errors
/// When the statements fail.
pub async fn scratch(pool: &PgPool, table: &str, columns: &str) -> Result<(), sqlx::Error> {
    pool.execute(format!("DROP TABLE IF EXISTS {table}").as_str())
        .await?;
    pool.execute(format!("CREATE TABLE {table} ({columns})").as_str())
        .await?;
    Ok(())
}

/// Drops `table` (its rows are the measurement's only) and closes `pool`.
///
/// # Errors
/// When the table cannot be dropped.
pub async fn done(pool: PgPool, table: &str) -> Result<(), sqlx::Error> {
    pool.execute(format!("DROP TABLE IF EXISTS {table}").as_str())
        .await?;
    pool.close().await;
    Ok(())
}

/// `concurrency` connections, all open before the window starts, so that the window
/// times the statements and not the connecting.
///
/// # Errors
/// When PostgreSQL cannot be reached.
pub async fn pool(database_url: &str, concurrency: usize) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(u32::try_from(concurrency).unwrap_or(u32::MAX))
        .min_connections(u32::try_from(concurrency).unwrap_or(u32::MAX))
        .connect(database_url)
        .await
}

/// `step`s per second over `duration`, with `concurrency` tasks each running `step(its
/// index)` back to back. Every step finished is counted, the last ones after the window
/// too (at most `concurrency` of them: well below the spread), as the raw INSERT rate has
/// always been counted; the anchors stay comparable with each other and with older runs.
///
/// # Errors
/// The first step that failed (a rate over a failing loop would mean nothing).
pub async fn per_second<S, F>(
    concurrency: usize,
    duration: Duration,
    step: S,
) -> Result<f64, sqlx::Error>
where
    S: Fn(usize) -> F + Clone + Send + 'static,
    F: Future<Output = Result<(), sqlx::Error>> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|i| {
            let (step, done, stop) = (step.clone(), done.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    step(i).await?;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<(), sqlx::Error>(())
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    for worker in workers {
        match worker.await {
            Ok(result) => result?,
            Err(e) => return Err(sqlx::Error::Protocol(format!("a raw worker died: {e}"))),
        }
    }
    Ok(done.load(Ordering::Relaxed) as f64 / elapsed)
}
