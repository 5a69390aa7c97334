//! Appending one command's facts atomically, returning their log positions — and, when the
//! command has an `Idempotency-Key`, writing or completing the key's row in the same
//! statement (PostgreSQL) or transaction (SQLite), so a durable fact always has its key's
//! answer.

use pm_application::idempotency::IdempotencyKey;
use pm_application::log::LogPosition;
use sqlx::QueryBuilder;

use super::{AppendError, NewEvent};
use crate::Database;

/// Marks a claimed key done with the fact at `position` (`$1` role, `$2` key,
/// `$3` position); a key that is not pending (or not claimed at all) is left alone.
const COMPLETE_KEY: &str = "UPDATE idempotency_keys SET status = 201, position = $3 \
     WHERE role = $1 AND key = $2 AND status IS NULL";

/// Writes an unclaimed key's row, done with the fact at `position` (`$1` role, `$2` key,
/// `$3` request hash, `$4` position); nothing when the key has a row (SQLite).
const RECORD_KEY: &str = "INSERT INTO idempotency_keys (role, key, request_hash, created_at, claimed_at, status, position) \
     VALUES ($1, $2, $3, $5, $5, 201, $4) ON CONFLICT (role, key) DO NOTHING";

/// The rows and, with a key, its row: completed when claimed ($11), written otherwise —
/// a key that has a row already makes the `INSERT` violate `idempotency_keys_pkey`, and
/// the whole statement writes nothing.
const PG_APPEND: &str = "\
WITH ins AS (
  INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id)
  SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]::json[], $7::text[]::json[], $8::uuid[])
  RETURNING sequence, global_position
), done AS (
  UPDATE idempotency_keys SET status = 201, position = (SELECT max(global_position) FROM ins)::text
  WHERE $11 AND role = $9 AND key = $10 AND status IS NULL
), fresh AS (
  INSERT INTO idempotency_keys (role, key, request_hash, created_at, claimed_at, status, position)
  SELECT $9, $10, $12, now(), now(), 201, (SELECT max(global_position) FROM ins)::text
  WHERE $10::text IS NOT NULL AND NOT $11
)
SELECT sequence, global_position FROM ins";

/// Appends `rows` atomically and returns their positions in row order; completes `key`
/// with the last one. On PostgreSQL single-fact commands go through
/// [group commit](super::group_commit) instead.
///
/// # Errors
/// [`AppendError`]; nothing is written then.
pub(super) async fn append(
    db: &Database,
    rows: &[NewEvent],
    key: Option<&IdempotencyKey>,
) -> Result<Vec<LogPosition>, AppendError> {
    let classify = |e: sqlx::Error| AppendError::of(&e);
    let mut returned: Vec<(i64, LogPosition)> = match db {
        Database::Postgres(pool) => {
            let fetched: Vec<(i64, i64)> = sqlx::query_as(PG_APPEND)
                .bind(rows.iter().map(|r| r.aggregate_type).collect::<Vec<_>>())
                .bind(
                    rows.iter()
                        .map(|r| r.aggregate_id.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(rows.iter().map(|r| r.sequence).collect::<Vec<_>>())
                .bind(
                    rows.iter()
                        .map(|r| r.event_type.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(
                    rows.iter()
                        .map(|r| r.event_version.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(rows.iter().map(|r| r.payload.as_str()).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.metadata.as_str()).collect::<Vec<_>>())
                .bind(rows.iter().map(|r| r.conversation_id).collect::<Vec<_>>())
                .bind(key.map(|k| k.role.as_str()))
                .bind(key.map(|k| k.key.as_str()))
                .bind(key.is_some_and(|k| k.claimed))
                .bind(key.map(|k| k.request_hash.as_str()))
                .fetch_all(pool)
                .await
                .map_err(classify)?;
            fetched
                .into_iter()
                .map(|(sequence, seq)| (sequence, LogPosition(seq)))
                .collect()
        }
        Database::Sqlite(pool) => {
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(classify)?;
            let mut builder = QueryBuilder::new(
                "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id) ",
            );
            builder.push_values(rows, |mut b, row| {
                b.push_bind(row.aggregate_type)
                    .push_bind(row.aggregate_id.as_str())
                    .push_bind(row.sequence)
                    .push_bind(row.event_type.as_str())
                    .push_bind(row.event_version.as_str())
                    .push_bind(row.payload.as_str())
                    .push_bind(row.metadata.as_str())
                    .push_bind(row.conversation_id.map(|c| c.to_string()));
            });
            builder.push(" RETURNING sequence, global_position");
            let fetched: Vec<(i64, i64)> = builder
                .build_query_as()
                .fetch_all(&mut *tx)
                .await
                .map_err(classify)?;
            let last = fetched.iter().map(|(_, p)| *p).max();
            if let (Some(key), Some(last)) = (key, last) {
                let query = if key.claimed {
                    sqlx::query(COMPLETE_KEY)
                        .bind(&key.role)
                        .bind(&key.key)
                        .bind(last.to_string())
                } else {
                    sqlx::query(RECORD_KEY)
                        .bind(&key.role)
                        .bind(&key.key)
                        .bind(&key.request_hash)
                        .bind(last.to_string())
                        .bind(pm_domain::time::format(&chrono::Utc::now()))
                };
                let written = query.execute(&mut *tx).await.map_err(classify)?;
                if !key.claimed && written.rows_affected() == 0 {
                    // Dropping the transaction rolls the facts back.
                    return Err(AppendError::KeyTaken);
                }
            }
            tx.commit().await.map_err(classify)?;
            fetched
                .into_iter()
                .map(|(sequence, seq)| (sequence, LogPosition(seq)))
                .collect()
        }
    };
    returned.sort_by_key(|(sequence, _)| *sequence);
    if returned.len() != rows.len() {
        return Err(AppendError::Other(format!(
            "appended {} of {} events",
            returned.len(),
            rows.len()
        )));
    }
    Ok(returned.into_iter().map(|(_, p)| p).collect())
}
