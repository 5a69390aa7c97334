//! The workers' anchor: a raw `FOR UPDATE SKIP LOCKED` job queue on the same PostgreSQL,
//! from `concurrency` connections, in the same run. What the `workers` mix's turn
//! cycles/s is compared with, as the other mixes' commands/s are with raw INSERT.
//!
//! **One cycle** is one job claimed and completed, two transactions on one connection as
//! a worker's turn cycle is a claim and an answer:
//! 1. the claim, one autocommit `UPDATE`: the oldest pending row, chosen by `SELECT id …
//!    WHERE state = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`, becomes
//!    `leased` with the worker's name, a lease deadline and its lease counter bumped; the
//!    job's id, lease and payload come back (`RETURNING`);
//! 2. the completion, one autocommit `DELETE` of that row fenced by the lease it was
//!    claimed with (a completion that deletes nothing fails the measure).
//!
//! The jobs are inserted before the window (see [`backlog`]), so nothing produces during
//! it: the rate is the consumers' alone, as raw INSERT is the writers' alone. Expired
//! leases are not taken back (nothing expires within a window).

use std::sync::Arc;
use std::time::Duration;

use sqlx::Executor;

use crate::raw::{done, per_second, pool, scratch, PAYLOAD};

/// The scratch table; created and dropped by [`measure`].
const TABLE: &str = "pm_bench_queue";

/// Jobs inserted per second of the window: above any queue rate seen here (a cycle is two
/// commits; raw INSERT, one commit, has stayed under 16 000/s), so the queue does not run
/// dry. Should a faster PostgreSQL empty it, the measure fails saying so rather than
/// timing empty claims.
const JOBS_PER_S: f64 = 25_000.0;

/// The lease a claim takes, the workers' default `--lease-ms`.
const LEASE: &str = "30 seconds";

/// The jobs inserted before a window of `duration` with `concurrency` workers.
pub fn backlog(duration: Duration, concurrency: usize) -> i64 {
    let jobs = (duration.as_secs_f64() * JOBS_PER_S).ceil() as i64;
    jobs.saturating_add(i64::try_from(concurrency).unwrap_or(i64::MAX))
}

/// Cycles (a claim and a completion, see the module) per second over `duration` with
/// `concurrency` connections.
///
/// # Errors
/// When PostgreSQL cannot be reached, the table cannot be made, the queue runs dry or a
/// completion finds its lease gone.
pub async fn measure(
    database_url: &str,
    concurrency: usize,
    duration: Duration,
) -> Result<f64, sqlx::Error> {
    let pool = pool(database_url, concurrency).await?;
    let jobs = backlog(duration, concurrency);
    scratch(
        &pool,
        TABLE,
        "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, \
         state text NOT NULL DEFAULT 'pending', lease bigint NOT NULL DEFAULT 0, \
         worker text, leased_until timestamptz, payload json NOT NULL",
    )
    .await?;
    sqlx::query(&format!(
        "INSERT INTO {TABLE} (payload) SELECT $1::json FROM generate_series(1, $2)"
    ))
    .bind(PAYLOAD)
    .bind(jobs)
    .execute(&pool)
    .await?;
    // After the fill (one index build, not one insert per row); the claims find the oldest
    // pending job through it, as a queue's table is indexed.
    pool.execute(format!("CREATE INDEX ON {TABLE} (id) WHERE state = 'pending'").as_str())
        .await?;
    pool.execute(format!("ANALYZE {TABLE}").as_str()).await?;
    let claim: Arc<str> = format!(
        "UPDATE {TABLE} SET state = 'leased', lease = lease + 1, worker = $1, \
         leased_until = now() + interval '{LEASE}' \
         WHERE id = (SELECT id FROM {TABLE} WHERE state = 'pending' \
                     ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) \
         RETURNING id, lease, payload::text"
    )
    .into();
    let complete: Arc<str> = format!("DELETE FROM {TABLE} WHERE id = $1 AND lease = $2").into();
    let cycle = {
        let pool = pool.clone();
        move |i: usize| {
            let (pool, claim, complete) = (pool.clone(), claim.clone(), complete.clone());
            async move {
                let job: Option<(i64, i64, String)> = sqlx::query_as(&claim)
                    .bind(format!("bench-{i}"))
                    .fetch_optional(&pool)
                    .await?;
                let Some((id, lease, _payload)) = job else {
                    return Err(sqlx::Error::Protocol(format!(
                        "the raw queue ran dry: {jobs} jobs were not enough \
                         (raise JOBS_PER_S in bench/src/queue.rs)"
                    )));
                };
                let done = sqlx::query(&complete)
                    .bind(id)
                    .bind(lease)
                    .execute(&pool)
                    .await?;
                if done.rows_affected() == 1 {
                    Ok(())
                } else {
                    Err(sqlx::Error::Protocol(format!(
                        "raw queue job {id}: its lease {lease} was gone at completion"
                    )))
                }
            }
        }
    };
    let rate = per_second(concurrency, duration, cycle).await;
    done(pool, TABLE).await?;
    rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_outlasts_the_window_at_the_fill_rate() {
        assert_eq!(backlog(Duration::from_secs(10), 32), 250_032);
        assert_eq!(backlog(Duration::from_millis(100), 4), 2_504);
        assert_eq!(backlog(Duration::from_millis(1), 0), 25);
    }
}
