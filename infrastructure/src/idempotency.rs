//! The `Idempotency-Key` store: one row per (role, key) holding the request's hash and,
//! once the command has run, its answer. Rows older than 24 h count as absent.

use chrono::{Duration, Utc};
use pm_application::idempotency::{Claim, IdempotencyStore, StoredResponse, KEY_TTL_HOURS};
use pm_application::AppError;

use crate::Database;

/// [`IdempotencyStore`] over a [`Database`].
#[derive(Debug, Clone)]
pub struct DbIdempotencyStore {
    db: Database,
}

impl DbIdempotencyStore {
    /// A store in `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// Deletes keys older than the TTL; returns how many.
    ///
    /// # Errors
    /// [`AppError::Unavailable`] when the database cannot be reached.
    pub async fn purge_expired(&self) -> Result<u64, AppError> {
        let cutoff = Utc::now() - Duration::hours(KEY_TTL_HOURS);
        let done = match &self.db {
            Database::Postgres(pool) => {
                sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
                    .bind(cutoff)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
            }
            Database::Sqlite(pool) => {
                sqlx::query("DELETE FROM idempotency_keys WHERE created_at < ?")
                    .bind(pm_domain::time::format(&cutoff))
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
            }
        };
        done.map_err(unavailable)
    }
}

fn unavailable(e: sqlx::Error) -> AppError {
    AppError::Unavailable(e.to_string())
}

type Row = (
    String,
    Option<i32>,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl IdempotencyStore for DbIdempotencyStore {
    async fn claim(&self, role: &str, key: &str, request_hash: &str) -> Result<Claim, AppError> {
        let now = Utc::now();
        let cutoff = now - Duration::hours(KEY_TTL_HOURS);
        // Insert a pending claim, or take over an expired row; otherwise read the row.
        let existing: Option<Row> = match &self.db {
            Database::Postgres(pool) => {
                let claimed = sqlx::query(
                    "INSERT INTO idempotency_keys (role, key, request_hash, created_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (role, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, \
                       status = NULL, body = NULL, location = NULL, position = NULL, created_at = EXCLUDED.created_at \
                     WHERE idempotency_keys.created_at < $5",
                )
                .bind(role)
                .bind(key)
                .bind(request_hash)
                .bind(now)
                .bind(cutoff)
                .execute(pool)
                .await
                .map_err(unavailable)?
                .rows_affected();
                if claimed == 1 {
                    return Ok(Claim::Claimed);
                }
                sqlx::query_as(
                    "SELECT request_hash, status, body, location, position FROM idempotency_keys \
                     WHERE role = $1 AND key = $2",
                )
                .bind(role)
                .bind(key)
                .fetch_optional(pool)
                .await
                .map_err(unavailable)?
            }
            Database::Sqlite(pool) => {
                let claimed = sqlx::query(
                    "INSERT INTO idempotency_keys (role, key, request_hash, created_at) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (role, key) DO UPDATE SET request_hash = excluded.request_hash, \
                       status = NULL, body = NULL, location = NULL, position = NULL, created_at = excluded.created_at \
                     WHERE idempotency_keys.created_at < ?5",
                )
                .bind(role)
                .bind(key)
                .bind(request_hash)
                .bind(pm_domain::time::format(&now))
                .bind(pm_domain::time::format(&cutoff))
                .execute(pool)
                .await
                .map_err(unavailable)?
                .rows_affected();
                if claimed == 1 {
                    return Ok(Claim::Claimed);
                }
                sqlx::query_as(
                    "SELECT request_hash, status, body, location, position FROM idempotency_keys \
                     WHERE role = ? AND key = ?",
                )
                .bind(role)
                .bind(key)
                .fetch_optional(pool)
                .await
                .map_err(unavailable)?
            }
        };
        Ok(match existing {
            // Deleted between our insert and read (purge): treat as in flight; a retry claims it.
            None => Claim::InFlight,
            Some((hash, _, _, _, _)) if hash != request_hash => Claim::Mismatch,
            Some((_, Some(status), Some(body), location, position)) => {
                Claim::Done(StoredResponse {
                    status: u16::try_from(status).unwrap_or(500),
                    body,
                    location,
                    position,
                })
            }
            Some(_) => Claim::InFlight,
        })
    }

    async fn complete(
        &self,
        role: &str,
        key: &str,
        response: &StoredResponse,
    ) -> Result<(), AppError> {
        let sql = match &self.db {
            Database::Postgres(_) => {
                "UPDATE idempotency_keys SET status = $1, body = $2, location = $3, position = $4 WHERE role = $5 AND key = $6"
            }
            Database::Sqlite(_) => {
                "UPDATE idempotency_keys SET status = ?1, body = ?2, location = ?3, position = ?4 WHERE role = ?5 AND key = ?6"
            }
        };
        macro_rules! run {
            ($pool:expr) => {
                sqlx::query(sql)
                    .bind(i32::from(response.status))
                    .bind(&response.body)
                    .bind(&response.location)
                    .bind(&response.position)
                    .bind(role)
                    .bind(key)
                    .execute($pool)
                    .await
                    .map_err(unavailable)?
                    .rows_affected()
            };
        }
        match &self.db {
            Database::Postgres(pool) => run!(pool),
            Database::Sqlite(pool) => run!(pool),
        };
        Ok(())
    }

    async fn release(&self, role: &str, key: &str) -> Result<(), AppError> {
        match &self.db {
            Database::Postgres(pool) => {
                sqlx::query(
                    "DELETE FROM idempotency_keys WHERE role = $1 AND key = $2 AND status IS NULL",
                )
                .bind(role)
                .bind(key)
                .execute(pool)
                .await
                .map_err(unavailable)?;
            }
            Database::Sqlite(pool) => {
                sqlx::query(
                    "DELETE FROM idempotency_keys WHERE role = ? AND key = ? AND status IS NULL",
                )
                .bind(role)
                .bind(key)
                .execute(pool)
                .await
                .map_err(unavailable)?;
            }
        }
        Ok(())
    }
}
