//! The `Idempotency-Key` store: one row per (role, key) holding the request's hash and,
//! once the command has run, its answer. Rows older than 24 h count as absent.

use chrono::{Duration, Utc};
use pm_application::idempotency::{Claim, IdempotencyStore, StoredResponse, KEY_TTL_HOURS};
use pm_application::AppError;

use pm_domain::time;

use crate::{on_db, Database};

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
        let cutoff = time::format(&(Utc::now() - Duration::hours(KEY_TTL_HOURS)));
        on_db!(&self.db, d, pool, {
            sqlx::query(&d.sql("DELETE FROM idempotency_keys WHERE created_at < $1::timestamptz"))
                .bind(&cutoff)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })
        .map_err(unavailable)
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

/// Inserts a pending claim, or takes over a row older than the TTL.
const CLAIM: &str = "INSERT INTO idempotency_keys (role, key, request_hash, created_at) \
     VALUES ($1, $2, $3, $4::timestamptz) \
     ON CONFLICT (role, key) DO UPDATE SET request_hash = excluded.request_hash, \
       status = NULL, body = NULL, location = NULL, position = NULL, created_at = excluded.created_at \
     WHERE idempotency_keys.created_at < $5::timestamptz";

impl IdempotencyStore for DbIdempotencyStore {
    async fn claim(&self, role: &str, key: &str, request_hash: &str) -> Result<Claim, AppError> {
        let now = Utc::now();
        let cutoff = now - Duration::hours(KEY_TTL_HOURS);
        // Claim the key, or read the row that holds it.
        let existing: Option<Row> = on_db!(&self.db, d, pool, {
            let claimed = sqlx::query(&d.sql(CLAIM))
                .bind(role)
                .bind(key)
                .bind(request_hash)
                .bind(time::format(&now))
                .bind(time::format(&cutoff))
                .execute(pool)
                .await?
                .rows_affected();
            if claimed == 1 {
                return Ok(None);
            }
            sqlx::query_as(
                "SELECT request_hash, status, body, location, position FROM idempotency_keys \
                 WHERE role = $1 AND key = $2",
            )
            .bind(role)
            .bind(key)
            .fetch_optional(pool)
            .await
            // A row deleted between our insert and read (purge) answers as in flight; a
            // retry claims it.
            .map(|row| {
                Some(row.unwrap_or_else(|| (request_hash.to_string(), None, None, None, None)))
            })
        })
        .map_err(unavailable)?;
        Ok(match existing {
            None => Claim::Claimed,
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
        on_db!(&self.db, _d, pool, {
            sqlx::query(
                "UPDATE idempotency_keys SET status = $1, body = $2, location = $3, position = $4 \
                 WHERE role = $5 AND key = $6",
            )
            .bind(i32::from(response.status))
            .bind(&response.body)
            .bind(&response.location)
            .bind(&response.position)
            .bind(role)
            .bind(key)
            .execute(pool)
            .await
            .map(|_| ())
        })
        .map_err(unavailable)
    }

    async fn release(&self, role: &str, key: &str) -> Result<(), AppError> {
        on_db!(&self.db, _d, pool, {
            sqlx::query(
                "DELETE FROM idempotency_keys WHERE role = $1 AND key = $2 AND status IS NULL",
            )
            .bind(role)
            .bind(key)
            .execute(pool)
            .await
            .map(|_| ())
        })
        .map_err(unavailable)
    }
}
