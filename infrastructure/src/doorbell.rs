//! The doorbell: tells readers of the log (event streams, processors) that new events may
//! be readable. Only a hint — readers always read from their cursor and also poll — so a
//! lost ring delays, never loses.
//!
//! - Appends by this replica ring at once (in-process).
//! - On PostgreSQL, other replicas hear about them through `LISTEN pm_events`. The
//!   `NOTIFY` is sent by this task, outside the append's transaction and at most once per
//!   5 ms burst: a transaction that notifies takes a cluster-wide lock at commit, which
//!   would serialize every writer if the appends notified themselves.
//! - The same listener hears forgettings (`LISTEN pm_forgotten`, notified by the
//!   transaction that forgets: [`crate::forgetting`]) and drops the forgotten key from this
//!   replica's memory; after a reconnect, when one may have been missed, it drops them all.
//!   SQLite has no `NOTIFY`: a standby process in front of the same file counts the
//!   destroyed keys instead ([`crate::forgetting::watch_tombstones`]).

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::keys::KeyStore;
use crate::Database;

const CHANNEL: &str = "pm_events";

fn ring(readers: &watch::Sender<u64>) {
    readers.send_modify(|n| *n = n.wrapping_add(1));
}

/// Forwards local appends (`local`) to `readers`, and on PostgreSQL relays them to other
/// replicas and theirs to `readers` — and tells `keys` of other replicas' forgettings —
/// until `shutdown`.
pub fn spawn(
    db: Database,
    keys: Arc<KeyStore>,
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
    let pool = match db {
        Database::Postgres(pool) => pool,
        sqlite @ Database::Sqlite(_) => {
            tokio::spawn(crate::forgetting::watch_tombstones(sqlite, keys, shutdown));
            return;
        }
    };
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
            if let Err(e) = listener
                .listen_all([CHANNEL, crate::forgetting::CHANNEL])
                .await
            {
                tracing::debug!(error = %e, "doorbell listener cannot LISTEN; retrying");
                continue;
            }
            // Forgettings notified while nobody listened were missed.
            keys.forget_cached();
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    message = listener.try_recv() => match message {
                        Ok(Some(n)) if n.channel() == crate::forgetting::CHANNEL => {
                            match crate::forgetting::heard(n.payload()) {
                                Some((scope, id)) => keys.forgotten(scope, id),
                                None => keys.forget_cached(),
                            }
                        }
                        Ok(Some(_)) => ring(&readers),
                        // A reconnect, after which rings and forgettings may have been missed.
                        Ok(None) => {
                            keys.forget_cached();
                            ring(&readers);
                        }
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
