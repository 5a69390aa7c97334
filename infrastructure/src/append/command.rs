//! Appending one command's facts atomically, returning their log positions — and, when the
//! command has an `Idempotency-Key`, writing or completing the key's row in the same
//! statement (PostgreSQL) or transaction (SQLite), so a durable fact always has its key's
//! answer.

use pm_application::bus::AppendFailure;

use super::NewEvent;
use crate::db::Args;
use crate::Database;
use pm_application::idempotency::IdempotencyKey;
use pm_application::log::LogPosition;

/// Marks a claimed key done with the fact at `position` (`$1` role, `$2` key,
/// `$3` position) while `$4` holds its claim; a key not pending under that owner (taken
/// over, or not claimed at all) is left alone, and the caller writes nothing.
const COMPLETE_KEY: &str = "UPDATE idempotency_keys SET status = 201, position = $3 \
     WHERE role = $1 AND key = $2 AND status IS NULL AND owner = $4";

/// Writes an unclaimed key's row, done with the fact at `position` (`$1` role, `$2` key,
/// `$3` request hash, `$4` position, `$5` time); nothing when the key has a row.
const RECORD_KEY: &str = "INSERT INTO idempotency_keys (role, key, request_hash, created_at, claimed_at, status, position) \
     VALUES ($1, $2, $3, $5, $5, 201, $4) ON CONFLICT (role, key) DO NOTHING";

/// The rows and, with a key, its row: completed when claimed ($11) by $13, written
/// otherwise — a key that has a row already makes the `INSERT` violate
/// `idempotency_keys_pkey`, and the whole statement writes nothing. A claimed key is
/// locked first and the rows are written only while $13 still holds its claim (none are
/// returned otherwise: the claim was taken over).
const PG_APPEND: &str = "\
WITH held AS (
  SELECT 1 FROM idempotency_keys
  WHERE $11 AND role = $9 AND key = $10 AND status IS NULL AND owner = $13
  FOR UPDATE
), ins AS (
  INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id)
  SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]::json[], $7::text[]::json[], $8::uuid[])
  WHERE NOT $11 OR EXISTS (SELECT 1 FROM held)
  RETURNING sequence, global_position
), done AS (
  UPDATE idempotency_keys SET status = 201, position = (SELECT max(global_position) FROM ins)::text
  WHERE $11 AND role = $9 AND key = $10 AND status IS NULL AND owner = $13
), fresh AS (
  INSERT INTO idempotency_keys (role, key, request_hash, created_at, claimed_at, status, position)
  SELECT $9, $10, $12, now(), now(), 201, (SELECT max(global_position) FROM ins)::text
  WHERE $10::text IS NOT NULL AND NOT $11
)
SELECT sequence, global_position FROM ins";

/// Writes (unclaimed) or completes (claimed) `key`'s row with the fact at `last`, in the
/// transaction that appends the fact.
///
/// # Errors
/// [`AppendFailure::KeyTaken`] when an unclaimed key has a row already, or a claimed one is
/// no longer this request's replica's: the caller drops the transaction, which rolls the
/// facts back.
pub(super) async fn record_key(
    tx: &mut crate::db::Tx,
    key: &IdempotencyKey,
    last: i64,
) -> Result<(), AppendFailure> {
    let args = Args::new().text(key.role.as_str()).text(key.key.as_str());
    let (sql, args) = if key.claimed {
        (
            COMPLETE_KEY,
            args.text(last.to_string()).text(key.owner.as_str()),
        )
    } else {
        let args = args
            .text(key.request_hash.as_str())
            .text(last.to_string())
            .time(&chrono::Utc::now());
        (RECORD_KEY, args)
    };
    let recorded = tx
        .execute(sql, args)
        .await
        .map_err(|e| super::failure_of(&e))?;
    // Unclaimed: the key has a row already. Claimed: another replica took the claim over.
    if recorded == 0 {
        return Err(AppendFailure::KeyTaken);
    }
    Ok(())
}

/// Appends `rows` atomically and returns their positions in row order; completes `key`
/// with the last one. On PostgreSQL single-fact commands go through
/// [group commit](super::group_commit) instead.
///
/// # Errors
/// [`AppendFailure`]; nothing is written then.
pub(super) async fn append(
    db: &Database,
    rows: &[NewEvent],
    key: Option<&IdempotencyKey>,
) -> Result<Vec<LogPosition>, AppendFailure> {
    let classify = |e: sqlx::Error| super::failure_of(&e);
    let mut returned: Vec<(i64, LogPosition)> = match db {
        Database::Postgres(pool) => {
            let fetched: Vec<(i64, i64)> = super::bind_rows(sqlx::query_as(PG_APPEND), rows.iter())
                .bind(key.map(|k| k.role.as_str()))
                .bind(key.map(|k| k.key.as_str()))
                .bind(key.is_some_and(|k| k.claimed))
                .bind(key.map(|k| k.request_hash.as_str()))
                .bind(key.map(|k| k.owner.as_str()))
                .fetch_all(pool)
                .await
                .map_err(classify)?;
            if fetched.is_empty() && key.is_some_and(|k| k.claimed) {
                // The key's claim is no longer this replica's: nothing was written.
                return Err(AppendFailure::KeyTaken);
            }
            fetched
                .into_iter()
                .map(|(sequence, seq)| (sequence, LogPosition(seq)))
                .collect()
        }
        Database::Sqlite(_) => {
            // `BEGIN IMMEDIATE`: the one writer's lock from the start.
            let mut tx = db.begin().await.map_err(classify)?;
            let written = super::within::insert(&mut tx, rows)
                .await
                .map_err(classify)?;
            let last = written.iter().map(|(_, p)| p.0).max();
            if let (Some(key), Some(last)) = (key, last) {
                record_key(&mut tx, key, last).await?;
            }
            tx.commit().await.map_err(classify)?;
            written
        }
    };
    returned.sort_by_key(|(sequence, _)| *sequence);
    if returned.len() != rows.len() {
        return Err(AppendFailure::Other(format!(
            "appended {} of {} events",
            returned.len(),
            rows.len()
        )));
    }
    Ok(returned.into_iter().map(|(_, p)| p).collect())
}

/// Appends a party's first fact with its key ([`crate::keys::FreshKey`]) in one
/// transaction: the key first, and the fact only if the key was stored.
///
/// # Errors
/// [`AppendFailure::Conflict`] when the party has a key already or the sequence is taken
/// (nothing is written); otherwise [`AppendFailure`].
pub(super) async fn append_first(
    db: &Database,
    row: &NewEvent,
    key: Option<&IdempotencyKey>,
    fresh: &crate::keys::FreshKey,
) -> Result<LogPosition, AppendFailure> {
    let classify = |e: sqlx::Error| super::failure_of(&e);
    let mut tx = db.begin().await.map_err(classify)?;
    let stored = tx
        .execute(
            "INSERT INTO pm_keys (scope, id, material, wrapped, created_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (scope, id) DO NOTHING",
            Args::new()
                .text(fresh.scope.as_str())
                .uuid(fresh.id)
                .bytes(fresh.material.clone())
                .bool(fresh.wrapped)
                .time(&chrono::Utc::now()),
        )
        .await
        .map_err(classify)?;
    if stored == 0 {
        return Err(AppendFailure::Conflict);
    }
    let written = super::within::insert(&mut tx, std::slice::from_ref(row))
        .await
        .map_err(classify)?;
    let position = written
        .first()
        .map(|(_, p)| *p)
        .ok_or_else(|| AppendFailure::Other("appended no event".into()))?;
    if let Some(key) = key {
        record_key(&mut tx, key, position.0).await?;
    }
    tx.commit().await.map_err(classify)?;
    Ok(position)
}
