//! The doorbell: tells readers of the log (event streams, processors) that new events may
//! be readable. Only a hint — readers always read from their cursor and also poll — so a
//! lost ring delays, never loses.
//!
//! - Appends by this replica ring at once (in-process).
//! - On PostgreSQL, other replicas hear about them through `LISTEN pm_events`. The
//!   `NOTIFY` is sent by this task, outside the append's transaction and at most once per
//!   5 ms burst: a transaction that notifies takes a cluster-wide lock at commit, which
//!   would serialize every writer if the appends notified themselves.

use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::Database;

const CHANNEL: &str = "pm_events";

fn ring(readers: &watch::Sender<u64>) {
    readers.send_modify(|n| *n = n.wrapping_add(1));
}

/// Forwards local appends (`local`) to `readers`, and on PostgreSQL relays them to other
/// replicas and theirs to `readers`, until `shutdown`.
pub fn spawn(
    db: Database,
    mut local: watch::Receiver<u64>,
    readers: watch::Sender<u64>,
    shutdown: CancellationToken,
) {
    let pool = match &db {
        Database::Postgres(pool) => Some(pool.clone()),
        Database::Sqlite(_) => None,
    };
    let relay = readers.clone();
    let token = shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                changed = local.changed() => if changed.is_err() { break },
            }
            ring(&relay);
            if let Some(pool) = &pool {
                tokio::time::sleep(Duration::from_millis(5)).await;
                local.borrow_and_update();
                if let Err(e) = sqlx::query("SELECT pg_notify($1, '')")
                    .bind(CHANNEL)
                    .execute(pool)
                    .await
                {
                    tracing::debug!(error = %e, "could not notify other replicas");
                }
            }
        }
    });
    let Database::Postgres(pool) = db else { return };
    tokio::spawn(async move {
        while !shutdown.is_cancelled() {
            let mut listener = match PgListener::connect_with(&pool).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::debug!(error = %e, "doorbell listener cannot connect; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            if let Err(e) = listener.listen(CHANNEL).await {
                tracing::debug!(error = %e, "doorbell listener cannot LISTEN; retrying");
                continue;
            }
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    message = listener.try_recv() => match message {
                        // A notification, or (None) a reconnect after which rings may have been missed.
                        Ok(_) => ring(&readers),
                        Err(e) => {
                            tracing::debug!(error = %e, "doorbell listener lost its connection");
                            ring(&readers);
                            break;
                        }
                    },
                }
            }
        }
    });
}
