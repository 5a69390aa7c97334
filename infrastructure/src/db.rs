//! One configuration, two stores: `postgres://…` (postgres-es) or `sqlite://…`
//! (sqlite-es). The service migrates its own schema at start-up.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

/// The embedded default when no `DATABASE_URL` is given.
pub const DEFAULT_SQLITE_URL: &str = "sqlite://data/project-manager.db";

/// A connection pool to one of the two supported databases.
#[derive(Debug, Clone)]
pub enum Database {
    /// PostgreSQL (production).
    Postgres(PgPool),
    /// Embedded SQLite (the zero-setup default).
    Sqlite(SqlitePool),
}

/// A database that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL is neither `postgres://` nor `sqlite://`, or does not parse.
    #[error("DATABASE_URL {0:?} is not a postgres:// or sqlite:// URL")]
    BadUrl(String),
    /// Connecting failed.
    #[error("cannot connect to the database: {0}")]
    Connect(#[source] sqlx::Error),
    /// Migrating the schema failed.
    #[error("cannot migrate the database schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A query failed.
    #[error("database error: {0}")]
    Query(#[from] sqlx::Error),
    /// A file system step (creating the SQLite directory) failed.
    #[error("cannot create the SQLite directory {0}: {1}")]
    Directory(String, #[source] std::io::Error),
}

impl Database {
    /// Connects to `url` with at most `pool_size` connections.
    ///
    /// # Errors
    /// [`DbError::BadUrl`] for an unsupported URL, [`DbError::Connect`] when the
    /// database cannot be reached.
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, DbError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options =
                PgConnectOptions::from_str(url).map_err(|_| DbError::BadUrl(url.into()))?;
            let pool = PgPoolOptions::new()
                .max_connections(pool_size.max(2))
                // No ping round trip before every query; a dead connection fails its
                // query and the command answers 503 (the store is unreachable).
                .test_before_acquire(false)
                .acquire_timeout(Duration::from_secs(10))
                .connect_with(options)
                .await
                .map_err(DbError::Connect)?;
            Ok(Self::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)
                .map_err(|_| DbError::BadUrl(url.into()))?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                // FULL: a 201 means the fact survives a power cut, not only a crash.
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(10));
            let in_memory = url.contains(":memory:") || url.contains("mode=memory");
            if !in_memory {
                ensure_parent_dir(options.get_filename())?;
            }
            let pool = SqlitePoolOptions::new()
                .test_before_acquire(false)
                .max_connections(if in_memory { 1 } else { pool_size.clamp(1, 8) })
                .acquire_timeout(Duration::from_secs(10))
                .connect_with(options)
                .await
                .map_err(DbError::Connect)?;
            Ok(Self::Sqlite(pool))
        } else {
            Err(DbError::BadUrl(url.into()))
        }
    }

    /// Brings the schema up to date.
    ///
    /// # Errors
    /// [`DbError::Migrate`] when a migration fails.
    pub async fn migrate(&self) -> Result<(), DbError> {
        match self {
            Self::Postgres(pool) => sqlx::migrate!("migrations/postgres").run(pool).await?,
            Self::Sqlite(pool) => sqlx::migrate!("migrations/sqlite").run(pool).await?,
        }
        Ok(())
    }

    /// Checks the database answers.
    ///
    /// # Errors
    /// [`DbError::Query`] when it does not.
    pub async fn ping(&self) -> Result<(), DbError> {
        crate::on_db!(self, _d, pool, {
            sqlx::query("SELECT 1").execute(pool).await.map(|_| ())
        })?;
        Ok(())
    }

    /// `postgres` or `sqlite`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres",
            Self::Sqlite(_) => "sqlite",
        }
    }

    /// Closes every connection.
    pub async fn close(&self) {
        match self {
            Self::Postgres(pool) => pool.close().await,
            Self::Sqlite(pool) => pool.close().await,
        }
    }
}

fn ensure_parent_dir(file: &Path) -> Result<(), DbError> {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir)
            .map_err(|e| DbError::Directory(dir.display().to_string(), e)),
        _ => Ok(()),
    }
}
