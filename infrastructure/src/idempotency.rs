//! The `Idempotency-Key` store: one row per (role, key) holding the request's hash and,
//! once answered, the answer — for a command that wrote a fact, that fact's position. A
//! request's first run writes its key's row with its fact, in the append's own statement
//! (see [`crate::store`]), or records its answer after a command that wrote nothing; only a
//! key that already has a row is claimed here — the claim names the replica that holds
//! it — and read. Rows older than 24 h count as absent.
//!
//! A pending claim is abandoned — and the next request with the key takes it over — when
//! its replica is gone (PostgreSQL: no session of the database has that replica's
//! `application_name`, which its processor-ownership connection carries; SQLite: no
//! process has the claiming process's id), when it is this replica's own but its request
//! has ended, or when it is older than [`CLAIM_TIMEOUT`].

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex};

use chrono::{Duration, Utc};
use pm_application::idempotency::{
    Claim, IdempotencyKey, IdempotencyStore, StoredResponse, CLAIM_TIMEOUT, KEY_TTL_HOURS,
};
use pm_application::log::LogPosition;
use pm_application::AppError;

use crate::db::{Args, DbRow};
use crate::processor::store::store_error;
use crate::sql::Dialect;
use crate::Database;

/// [`IdempotencyStore`] over a [`Database`], for one replica.
#[derive(Debug, Clone)]
pub struct DbIdempotencyStore {
    db: Database,
    owner: String,
    in_flight: Arc<Mutex<HashSet<(String, String)>>>,
}

impl DbIdempotencyStore {
    /// A store in `db` for the replica `owner`.
    pub fn new(db: Database, owner: impl Into<String>) -> Self {
        Self {
            db,
            owner: owner.into(),
            in_flight: Arc::default(),
        }
    }

    /// Deletes keys older than the TTL; returns how many.
    ///
    /// # Errors
    /// [`AppError::Unavailable`] when the database cannot be reached.
    pub async fn purge_expired(&self) -> Result<u64, AppError> {
        let cutoff = Utc::now() - Duration::hours(KEY_TTL_HOURS);
        self.db
            .execute(
                "DELETE FROM idempotency_keys WHERE created_at < $1::timestamptz",
                Args::new().time(&cutoff),
            )
            .await
            .map_err(store_error)
    }

    /// Marks the key in flight here; `false` when it already is.
    fn mark(&self, role: &str, key: &str) -> bool {
        self.in_flight
            .lock()
            .map(|mut set| set.insert((role.to_string(), key.to_string())))
            .unwrap_or(false)
    }

    fn leave(&self, role: &str, key: &str) {
        if let Ok(mut set) = self.in_flight.lock() {
            set.remove(&(role.to_string(), key.to_string()));
        }
    }

    /// Whether the replica `owner` is alive.
    async fn alive(&self, owner: &str) -> Result<bool, AppError> {
        match self.db.dialect() {
            Dialect::Postgres => {
                let row = self
                    .db
                    .fetch_optional(
                        "SELECT count(*) AS n FROM pg_stat_activity \
                         WHERE application_name = $1 AND datname = current_database()",
                        Args::new().text(owner),
                    )
                    .await
                    .map_err(store_error)?;
                Ok(row
                    .map(|r| r.int("n"))
                    .transpose()
                    .map_err(store_error)?
                    .unwrap_or(0)
                    > 0)
            }
            // One machine: the claiming process is alive when its process id is.
            Dialect::Sqlite => Ok(owner
                .split_once('-')
                .is_some_and(|(pid, _)| std::path::Path::new("/proc").join(pid).exists())),
        }
    }

    /// Whether a pending claim by `owner` at `claimed_at` is abandoned.
    async fn abandoned(
        &self,
        role: &str,
        key: &str,
        owner: Option<&str>,
        claimed_at: Option<chrono::DateTime<Utc>>,
    ) -> Result<bool, AppError> {
        let too_old = claimed_at.is_none_or(|at| {
            Utc::now() - at > Duration::from_std(CLAIM_TIMEOUT).unwrap_or(Duration::minutes(1))
        });
        Ok(match owner {
            _ if too_old => true,
            None => true,
            Some(o) if o == self.owner => {
                let set = self
                    .in_flight
                    .lock()
                    .map_err(|_| AppError::Internal("in-flight keys poisoned".into()))?;
                !set.contains(&(role.to_string(), key.to_string()))
            }
            Some(o) => !self.alive(o).await?,
        })
    }

    /// The stored row of a key: what it holds.
    fn decode(row: &DbRow, request_hash: &str) -> Result<Seen, sqlx::Error> {
        if row.string("request_hash")? != request_hash {
            return Ok(Seen::Mismatch);
        }
        let status = row.opt_int("status")?;
        let body = row.opt_string("body")?;
        Ok(match (status, body) {
            (Some(201), None) => match row
                .opt_string("position")?
                .and_then(|p| p.parse::<LogPosition>().ok())
            {
                Some(position) => Seen::Done(StoredResponse::Appended(position)),
                None => Seen::Pending(row.opt_string("owner")?, row.opt_time("claimed_at")?),
            },
            (Some(status), Some(body)) => Seen::Done(StoredResponse::Answer {
                status: u16::try_from(status).unwrap_or(500),
                body,
                location: row.opt_string("location")?,
            }),
            _ => Seen::Pending(row.opt_string("owner")?, row.opt_time("claimed_at")?),
        })
    }
}

/// What a claim found in a key's row.
enum Seen {
    Mismatch,
    Done(StoredResponse),
    Pending(Option<String>, Option<chrono::DateTime<Utc>>),
}

/// What a claim does on an existing row: takes it over only when it is older than the TTL.
const CLAIM_ON_CONFLICT: &str = "ON CONFLICT (role, key) DO UPDATE SET request_hash = excluded.request_hash, \
       status = NULL, body = NULL, location = NULL, position = NULL, created_at = excluded.created_at, \
       owner = excluded.owner, claimed_at = excluded.claimed_at \
     WHERE idempotency_keys.created_at < $6::timestamptz";

/// Inserts a pending claim, or takes over a row older than the TTL (SQLite).
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO idempotency_keys (role, key, request_hash, created_at, owner, claimed_at) \
         VALUES ($1, $2, $3, $4::timestamptz, $5, $4::timestamptz) {CLAIM_ON_CONFLICT}"
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
         SELECT $1, $2, $3, $4::timestamptz, $5, $4::timestamptz \
         FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit \
         {CLAIM_ON_CONFLICT}"
    )
});

/// Takes an abandoned pending claim over (compare-and-set on its owner).
const TAKE_OVER: &str = "UPDATE idempotency_keys SET owner = $3, claimed_at = $4::timestamptz \
     WHERE role = $1 AND key = $2 AND status IS NULL AND (owner = $5 OR ($5 IS NULL AND owner IS NULL))";

impl IdempotencyStore for DbIdempotencyStore {
    async fn claim(&self, role: &str, key: &str, request_hash: &str) -> Result<Claim, AppError> {
        for _ in 0..3 {
            let now = Utc::now();
            let cutoff = now - Duration::hours(KEY_TTL_HOURS);
            let args = Args::new()
                .text(role)
                .text(key)
                .text(request_hash)
                .time(&now)
                .text(self.owner.as_str())
                .time(&cutoff);
            let claim = match self.db.dialect() {
                Dialect::Postgres => CLAIM_POSTGRES.as_str(),
                Dialect::Sqlite => CLAIM.as_str(),
            };
            if self.db.execute(claim, args).await.map_err(store_error)? == 1 {
                self.mark(role, key);
                return Ok(Claim::Claimed);
            }
            let row = self
                .db
                .fetch_optional(
                    "SELECT request_hash, status::bigint AS status, body, location, position, owner, claimed_at \
                     FROM idempotency_keys WHERE role = $1 AND key = $2",
                    Args::new().text(role).text(key),
                )
                .await
                .map_err(store_error)?;
            // A row purged between our insert and read: claim again.
            let Some(row) = row else { continue };
            match Self::decode(&row, request_hash).map_err(store_error)? {
                Seen::Mismatch => return Ok(Claim::Mismatch),
                Seen::Done(answer) => return Ok(Claim::Done(answer)),
                Seen::Pending(owner, claimed_at) => {
                    if !self
                        .abandoned(role, key, owner.as_deref(), claimed_at)
                        .await?
                        || !self.mark(role, key)
                    {
                        return Ok(Claim::InFlight);
                    }
                    let args = Args::new()
                        .text(role)
                        .text(key)
                        .text(self.owner.as_str())
                        .time(&now)
                        .opt_text(owner.clone());
                    if self
                        .db
                        .execute(TAKE_OVER, args)
                        .await
                        .map_err(store_error)?
                        == 1
                    {
                        tracing::info!(%role, abandoned_by = ?owner, "took over an abandoned Idempotency-Key claim");
                        return Ok(Claim::Claimed);
                    }
                    self.leave(role, key);
                }
            }
        }
        Ok(Claim::InFlight)
    }

    fn enter(&self, role: &str, key: &str) -> bool {
        self.mark(role, key)
    }

    async fn record(
        &self,
        key: &IdempotencyKey,
        status: u16,
        body: &str,
        location: Option<&str>,
    ) -> Result<bool, AppError> {
        let written = self
            .db
            .execute(
                "INSERT INTO idempotency_keys (role, key, request_hash, created_at, claimed_at, status, body, location) \
                 VALUES ($1, $2, $3, $4::timestamptz, $4::timestamptz, $5, $6, $7) ON CONFLICT (role, key) DO NOTHING",
                Args::new()
                    .text(&key.role)
                    .text(&key.key)
                    .text(&key.request_hash)
                    .time(&Utc::now())
                    .int(i64::from(status))
                    .text(body)
                    .opt_text(location),
            )
            .await
            .map_err(store_error)?;
        Ok(written == 1)
    }

    async fn complete(
        &self,
        role: &str,
        key: &str,
        status: u16,
        body: &str,
        location: Option<&str>,
    ) -> Result<(), AppError> {
        self.db
            .execute(
                "UPDATE idempotency_keys SET status = $1, body = $2, location = $3 \
                 WHERE role = $4 AND key = $5 AND status IS NULL",
                Args::new()
                    .int(i64::from(status))
                    .text(body)
                    .opt_text(location)
                    .text(role)
                    .text(key),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn release(&self, role: &str, key: &str) -> Result<(), AppError> {
        self.db
            .execute(
                "DELETE FROM idempotency_keys WHERE role = $1 AND key = $2 AND status IS NULL AND owner = $3",
                Args::new().text(role).text(key).text(self.owner.as_str()),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    fn finish(&self, role: &str, key: &str) {
        self.leave(role, key);
    }
}
