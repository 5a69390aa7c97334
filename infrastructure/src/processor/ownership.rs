//! Who owns a processor, in a way that ends when the owner dies — so a replica takes over
//! within one ownership check of a crash, not after a lease expires.
//!
//! - **PostgreSQL**: a session-level advisory lock per processor, held on one dedicated
//!   connection of this replica (its `application_name` is the replica's id, which is
//!   what [`super::liveness`] looks for to tell that the replica is alive). When
//!   the process dies its connection closes and PostgreSQL releases the locks at once. The
//!   owner confirms its connection answers at every check; a connection that does not
//!   answer is dropped, and with it the ownership.
//! - **SQLite**: one process owns the file: an exclusive lock on `<database>.owner`
//!   (`flock`), which the operating system releases when the process ends.
//!
//! Processors' effects move their cursor with compare-and-set, so ownership is about
//! doing the work once, not about correctness: two owners at once still apply every event
//! once.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::time::Duration;

use pm_application::AppError;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};
use tokio::sync::Mutex;

use crate::Database;

/// The advisory lock key of processor `name` (FNV-1a of `pm-processor:<name>`, positive).
pub fn lock_key(name: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in "pm-processor:".bytes().chain(name.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash >> 1) as i64
}

/// What a claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The claimant owns the processor now and did not before.
    Taken,
    /// The claimant still owns it.
    Kept,
    /// Someone else (alive) owns it.
    Refused,
}

impl Claim {
    /// Whether the claimant owns the processor.
    pub fn owned(self) -> bool {
        self != Self::Refused
    }
}

/// How long an ownership check may take before the connection counts as lost.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

enum Kind {
    Postgres(Box<PgConnectOptions>),
    SqliteFile(PathBuf),
    /// An in-memory SQLite database: this process is the only one that can see it.
    Alone,
}

#[derive(Default)]
struct Held {
    connection: Option<PgConnection>,
    file: Option<File>,
    names: HashSet<String>,
}

/// This replica's ownership of processors.
pub struct Ownership {
    kind: Kind,
    held: Mutex<Held>,
}

impl std::fmt::Debug for Ownership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ownership")
    }
}

fn unavailable(e: impl std::fmt::Display) -> AppError {
    AppError::Unavailable(format!("processor ownership: {e}"))
}

impl Ownership {
    /// Ownership in `db`.
    pub fn new(db: &Database) -> Self {
        let kind = match db {
            Database::Postgres(pool) => Kind::Postgres(Box::new((*pool.connect_options()).clone())),
            Database::Sqlite(pool) => {
                let options = pool.connect_options();
                let file = options.get_filename();
                if file.as_os_str().is_empty() || file.to_string_lossy().contains(":memory:") {
                    Kind::Alone
                } else {
                    let mut path = file.as_os_str().to_owned();
                    path.push(".owner");
                    Kind::SqliteFile(PathBuf::from(path))
                }
            }
        };
        Self {
            kind,
            held: Mutex::new(Held::default()),
        }
    }

    /// Takes `name` for `owner` when nobody alive owns it, or confirms `owner` still
    /// does.
    ///
    /// # Errors
    /// [`AppError::Unavailable`] when the database (or the lock file) cannot be used.
    pub async fn claim(&self, name: &str, owner: &str) -> Result<Claim, AppError> {
        let mut held = self.held.lock().await;
        let before = held.names.contains(name);
        let owned = self.claim_held(&mut held, name, owner).await?;
        Ok(match (owned, before) {
            (false, _) => Claim::Refused,
            (true, true) => Claim::Kept,
            (true, false) => Claim::Taken,
        })
    }

    async fn claim_held(&self, held: &mut Held, name: &str, owner: &str) -> Result<bool, AppError> {
        match &self.kind {
            Kind::Alone => {
                held.names.insert(name.to_string());
                Ok(true)
            }
            Kind::SqliteFile(path) => {
                if held.file.is_none() {
                    let file = OpenOptions::new()
                        .create(true)
                        .truncate(false)
                        .write(true)
                        .open(path)
                        .map_err(unavailable)?;
                    match file.try_lock() {
                        Ok(()) => held.file = Some(file),
                        Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
                        Err(std::fs::TryLockError::Error(e)) => return Err(unavailable(e)),
                    }
                }
                held.names.insert(name.to_string());
                Ok(true)
            }
            Kind::Postgres(options) => {
                if held.names.contains(name) {
                    let connection = held.connection.as_mut();
                    let alive = match connection {
                        Some(c) => matches!(
                            tokio::time::timeout(CHECK_TIMEOUT, c.ping()).await,
                            Ok(Ok(()))
                        ),
                        None => false,
                    };
                    if alive {
                        return Ok(true);
                    }
                    tracing::warn!(
                        processor = name,
                        "the ownership connection was lost; ownership ends"
                    );
                    *held = Held::default();
                    return Ok(false);
                }
                if held.connection.is_none() {
                    let options = (**options)
                        .clone()
                        .application_name(super::liveness::application_name(owner))
                        .log_statements(tracing::log::LevelFilter::Off);
                    let connection =
                        tokio::time::timeout(CHECK_TIMEOUT, PgConnection::connect_with(&options))
                            .await
                            .map_err(|_| unavailable("connecting timed out"))?
                            .map_err(unavailable)?;
                    held.connection = Some(connection);
                }
                let Some(connection) = held.connection.as_mut() else {
                    return Ok(false);
                };
                let query = sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
                    .bind(lock_key(name))
                    .fetch_one(&mut *connection);
                match tokio::time::timeout(CHECK_TIMEOUT, query).await {
                    Ok(Ok(true)) => {
                        held.names.insert(name.to_string());
                        Ok(true)
                    }
                    Ok(Ok(false)) => Ok(false),
                    Ok(Err(e)) => {
                        held.connection = None;
                        Err(unavailable(e))
                    }
                    Err(_) => {
                        held.connection = None;
                        Err(unavailable("the ownership check timed out"))
                    }
                }
            }
        }
    }

    /// Gives `name` up (the file lock of SQLite once nothing is owned any more).
    ///
    /// # Errors
    /// [`AppError::Unavailable`] when the database cannot be reached.
    pub async fn release(&self, name: &str) -> Result<(), AppError> {
        let mut held = self.held.lock().await;
        if !held.names.remove(name) {
            return Ok(());
        }
        match &self.kind {
            Kind::Postgres(_) => {
                if let Some(connection) = held.connection.as_mut() {
                    sqlx::query("SELECT pg_advisory_unlock($1)")
                        .bind(lock_key(name))
                        .execute(&mut *connection)
                        .await
                        .map_err(unavailable)?;
                }
            }
            Kind::SqliteFile(_) if held.names.is_empty() => held.file = None,
            Kind::SqliteFile(_) | Kind::Alone => {}
        }
        Ok(())
    }
}
