//! Appending a `forgotten` fact: in one transaction with the erasure it records
//! ([`crate::forgetting::erase`]), never through group commit — the key must be destroyed
//! by the transaction that makes the fact durable, and a forgetting is rare.

use pm_application::bus::AppendFailure;
use pm_application::idempotency::IdempotencyKey;
use pm_application::log::LogPosition;
use uuid::Uuid;

use super::NewEvent;
use crate::keys::{KeyError, KeyStore, Scope};
use crate::Database;

fn key_failure(e: KeyError) -> AppendFailure {
    match e {
        KeyError::Store(e) => super::failure_of(&e),
        other => AppendFailure::Other(format!("cannot forget: {other}")),
    }
}

/// Erases every party in `forgotten`, appends `rows` (and completes `key`) in the same
/// transaction; once it committed, this replica drops their keys from memory.
///
/// # Errors
/// [`AppendFailure`]; nothing is written or erased then.
pub(super) async fn append(
    db: &Database,
    keys: &KeyStore,
    rows: &[NewEvent],
    key: Option<&IdempotencyKey>,
    forgotten: &[(Scope, Uuid)],
) -> Result<Vec<LogPosition>, AppendFailure> {
    let classify = |e: sqlx::Error| super::failure_of(&e);
    let mut tx = db.begin().await.map_err(classify)?;
    for (scope, id) in forgotten {
        crate::forgetting::erase(&mut tx, keys, *scope, *id)
            .await
            .map_err(key_failure)?;
    }
    let mut written = super::within::insert(&mut tx, rows)
        .await
        .map_err(classify)?;
    if let (Some(key), Some(last)) = (key, written.iter().map(|(_, p)| p.0).max()) {
        super::command::record_key(&mut tx, key, last).await?;
    }
    tx.commit().await.map_err(classify)?;
    for (scope, id) in forgotten {
        keys.forgotten(*scope, *id);
    }
    written.sort_by_key(|(sequence, _)| *sequence);
    Ok(written.into_iter().map(|(_, p)| p).collect())
}
