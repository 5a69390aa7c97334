//! The `Idempotency-Key` store: one row per (role, key) holding the request's hash and,
//! once answered, the answer — for a command that wrote a fact, that fact's position. A
//! request's first run writes its key's row with its fact, in the append's own statement
//! (see [`crate::append`]), or records its answer after a command that wrote nothing; only a
//! key that already has a row is claimed here — the claim names the replica that holds
//! it — and read. Rows older than 24 h count as absent.
//!
//! This module only reads and writes rows: whether a pending claim is abandoned is the
//! application's decision (`pm_application::idempotency::decision`), and whether the
//! replica holding it is alive is [`crate::processor::liveness`]'s.

use std::sync::LazyLock;

use chrono::{Duration, Utc};
use pm_application::idempotency::{
    Claimed, IdempotencyKey, IdempotencyStore, KeyRow, KeyState, StoredAnswer, StoredResponse,
    KEY_TTL_HOURS,
};
use pm_application::log::LogPosition;
use pm_application::AppError;

use crate::db::{Args, DbRow};
use crate::processor::store::store_error;
use crate::sql::Dialect;
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
        self.db
            .execute(
                "DELETE FROM idempotency_keys WHERE created_at < $1",
                Args::new().time(&cutoff),
            )
            .await
            .map_err(store_error)
    }

    /// The stored row of a key.
    fn decode(row: &DbRow) -> Result<KeyRow, sqlx::Error> {
        let pending = || -> Result<KeyState, sqlx::Error> {
            Ok(KeyState::Pending {
                owner: row.opt_string("owner")?,
                claimed_at: row.opt_time("claimed_at")?,
            })
        };
        let status = row.opt_int("status")?;
        let body = row.opt_string("body")?;
        let state = match (status, body) {
            (Some(201), None) => match row
                .opt_string("position")?
                .and_then(|p| p.parse::<LogPosition>().ok())
            {
                Some(position) => KeyState::Done(StoredResponse::Appended(position)),
                None => pending()?,
            },
            (Some(status), Some(body)) => KeyState::Done(StoredResponse::Answer(StoredAnswer {
                status: u16::try_from(status).unwrap_or(500),
                body,
                location: row.opt_string("location")?,
            })),
            _ => pending()?,
        };
        Ok(KeyRow {
            request_hash: row.string("request_hash")?,
            state,
        })
    }
}

/// What a claim does on an existing row: takes it over only when it is older than the TTL.
const CLAIM_ON_CONFLICT: &str = "ON CONFLICT (role, key) DO UPDATE SET request_hash = excluded.request_hash, \
       status = NULL, body = NULL, location = NULL, position = NULL, created_at = excluded.created_at, \
       owner = excluded.owner, claimed_at = excluded.claimed_at \
     WHERE idempotency_keys.created_at < $6";

/// Inserts a pending claim, or takes over a row older than the TTL (SQLite).
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO idempotency_keys (role, key, request_hash, created_at, owner, claimed_at) \
         VALUES ($1, $2, $3, $4, $5, $4) {CLAIM_ON_CONFLICT}"
    )
});

/// [`CLAIM`] on PostgreSQL, committed without waiting for its WAL to be flushed
/// (`synchronous_commit = off` for this statement's transaction alone): a claim is a
/// mark, not an answer. It is still safe — the append that completes the key commits
/// later with a flush, and flushing a commit flushes all WAL written before it, the
/// claim's included; a claim lost to a crash before any append is the same as no claim
/// (the retry claims again and runs the command once). It saves one WAL flush per keyed
/// command.
static CLAIM_POSTGRES: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO idempotency_keys (role, key, request_hash, created_at, owner, claimed_at) \
         SELECT $1, $2, $3, $4, $5, $4 \
         FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit \
         {CLAIM_ON_CONFLICT}"
    )
});

/// Takes an abandoned pending claim over (compare-and-set on its owner).
const TAKE_OVER: &str = "UPDATE idempotency_keys SET owner = $3, claimed_at = $4 \
     WHERE role = $1 AND key = $2 AND status IS NULL AND (owner = $5 OR ($5 IS NULL AND owner IS NULL))";

impl IdempotencyStore for DbIdempotencyStore {
    async fn claim(&self, key: &IdempotencyKey, replica: &str) -> Result<Claimed, AppError> {
        let now = Utc::now();
        let cutoff = now - Duration::hours(KEY_TTL_HOURS);
        let args = Args::new()
            .text(&key.role)
            .text(&key.key)
            .text(&key.request_hash)
            .time(&now)
            .text(replica)
            .time(&cutoff);
        let claim = match self.db.dialect() {
            Dialect::Postgres => CLAIM_POSTGRES.as_str(),
            Dialect::Sqlite => CLAIM.as_str(),
        };
        if self.db.execute(claim, args).await.map_err(store_error)? == 1 {
            return Ok(Claimed::Now);
        }
        let row = self
            .db
            .fetch_optional(
                "SELECT request_hash, status, body, location, position, owner, claimed_at \
                 FROM idempotency_keys WHERE role = $1 AND key = $2",
                Args::new().text(&key.role).text(&key.key),
            )
            .await
            .map_err(store_error)?;
        match row {
            // A row purged between our insert and read.
            None => Ok(Claimed::Gone),
            Some(row) => Ok(Claimed::Found(Self::decode(&row).map_err(store_error)?)),
        }
    }

    async fn take_over(
        &self,
        key: &IdempotencyKey,
        from: Option<&str>,
        replica: &str,
    ) -> Result<bool, AppError> {
        let args = Args::new()
            .text(&key.role)
            .text(&key.key)
            .text(replica)
            .time(&Utc::now())
            .opt_text(from.map(str::to_string));
        let taken = self
            .db
            .execute(TAKE_OVER, args)
            .await
            .map_err(store_error)?;
        Ok(taken == 1)
    }

    async fn record(&self, key: &IdempotencyKey, answer: &StoredAnswer) -> Result<bool, AppError> {
        let written = self
            .db
            .execute(
                "INSERT INTO idempotency_keys (role, key, request_hash, created_at, claimed_at, status, body, location) \
                 VALUES ($1, $2, $3, $4, $4, $5, $6, $7) ON CONFLICT (role, key) DO NOTHING",
                Args::new()
                    .text(&key.role)
                    .text(&key.key)
                    .text(&key.request_hash)
                    .time(&Utc::now())
                    .int(i64::from(answer.status))
                    .text(&answer.body)
                    .opt_text(answer.location.clone()),
            )
            .await
            .map_err(store_error)?;
        Ok(written == 1)
    }

    async fn complete(&self, key: &IdempotencyKey, answer: &StoredAnswer) -> Result<(), AppError> {
        self.db
            .execute(
                "UPDATE idempotency_keys SET status = $1, body = $2, location = $3 \
                 WHERE role = $4 AND key = $5 AND status IS NULL",
                Args::new()
                    .int(i64::from(answer.status))
                    .text(&answer.body)
                    .opt_text(answer.location.clone())
                    .text(&key.role)
                    .text(&key.key),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn release(&self, key: &IdempotencyKey, replica: &str) -> Result<(), AppError> {
        self.db
            .execute(
                "DELETE FROM idempotency_keys WHERE role = $1 AND key = $2 AND status IS NULL AND owner = $3",
                Args::new().text(&key.role).text(&key.key).text(replica),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }
}
