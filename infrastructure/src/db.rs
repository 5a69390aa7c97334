//! One configuration, two stores: `postgres://…` (postgres-es) or `sqlite://…`
//! (sqlite-es). The service migrates its own schema at start-up.
//!
//! Statements run on either database through [`Database`] (autocommit) or a [`Tx`], as
//! written: a statement that both databases read alike is one text with no casts, one
//! where they differ is written once per [`Dialect`] (row locks, PostgreSQL-only reads;
//! see [`crate::sql`]) — the SQL is never rewritten on the way. What makes one text fit
//! both is typing: arguments are typed [`Args`], bound as each database's own type (ids
//! `uuid` on PostgreSQL, text on SQLite), rows are [`DbRow`]s whose accessors
//! decode either database's representation, and multi-row statements are built per
//! dialect from their columns' [`SqlType`]s ([`rows_source`]).

mod args;
mod row;
mod rows;
mod transient;
mod tx;

pub use args::{params, values, Arg, Args};
pub use row::DbRow;
pub use rows::{rows_source, SqlType};
pub use transient::is_transient;
pub use tx::{Tx, ROWS_PER_STATEMENT};

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

use crate::sql::Dialect;

/// The embedded default when no `DATABASE_URL` is given.
pub const DEFAULT_SQLITE_URL: &str = "sqlite://data/project-manager.db";

/// `url` fit for a log line or an error: the password of its user part, if any, replaced
/// by `***` — also when the rest does not parse (the case it is shown for).
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

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

/// PostgreSQL connections a pool keeps open even when idle.
const WARM_CONNECTIONS: u32 = 4;

impl Database {
    /// Connects to `url` with at most `pool_size` connections; a request waits at most
    /// `acquire_timeout` for one (so an outage answers fast instead of queueing).
    ///
    /// # Errors
    /// [`DbError::BadUrl`] for an unsupported URL, [`DbError::Connect`] when the
    /// database cannot be reached.
    pub async fn connect(
        url: &str,
        pool_size: u32,
        acquire_timeout: Duration,
    ) -> Result<Self, DbError> {
        let dialect = Dialect::of_url(url);
        if dialect == Some(Dialect::Postgres) {
            let options =
                PgConnectOptions::from_str(url).map_err(|_| DbError::BadUrl(redacted(url)))?;
            let pool = PgPoolOptions::new()
                .max_connections(pool_size.max(2))
                // A few connections opened at start and kept: the first requests after a
                // start (or a restart) do not each pay a connection's handshake.
                .min_connections(pool_size.clamp(1, WARM_CONNECTIONS))
                // No ping round trip before every query; a dead connection fails its
                // query and the command answers 503 (the store is unreachable).
                .test_before_acquire(false)
                .acquire_timeout(acquire_timeout)
                .connect_with(options)
                .await
                .map_err(DbError::Connect)?;
            Ok(Self::Postgres(pool))
        } else if dialect == Some(Dialect::Sqlite) {
            let options = SqliteConnectOptions::from_str(url)
                .map_err(|_| DbError::BadUrl(redacted(url)))?
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
                .acquire_timeout(acquire_timeout.max(Duration::from_secs(5)))
                .connect_with(options)
                .await
                .map_err(DbError::Connect)?;
            Ok(Self::Sqlite(pool))
        } else {
            Err(DbError::BadUrl(redacted(url)))
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

    /// Brings the schema to what an earlier release made: the migrations numbered below
    /// `version` (this store's numbering). For the tests that a database of that release
    /// migrates in place.
    ///
    /// # Errors
    /// [`DbError::Migrate`] when a migration fails.
    #[doc(hidden)]
    pub async fn migrate_before(&self, version: i64) -> Result<(), DbError> {
        fn older(mut m: sqlx::migrate::Migrator, version: i64) -> sqlx::migrate::Migrator {
            let kept = m.migrations.iter().filter(|m| m.version < version).cloned();
            m.migrations = std::borrow::Cow::Owned(kept.collect());
            m
        }
        match self {
            Self::Postgres(pool) => {
                older(sqlx::migrate!("migrations/postgres"), version)
                    .run(pool)
                    .await?;
            }
            Self::Sqlite(pool) => {
                older(sqlx::migrate!("migrations/sqlite"), version)
                    .run(pool)
                    .await?;
            }
        }
        Ok(())
    }

    /// Checks the database answers.
    ///
    /// # Errors
    /// [`DbError::Query`] when it does not.
    pub async fn ping(&self) -> Result<(), DbError> {
        self.execute("SELECT 1", Args::new()).await?;
        Ok(())
    }

    /// The SQL dialect.
    pub fn dialect(&self) -> Dialect {
        match self {
            Self::Postgres(_) => Dialect::Postgres,
            Self::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Begins a transaction (`BEGIN IMMEDIATE` on SQLite, so a read-then-write
    /// transaction never has to upgrade its lock).
    ///
    /// # Errors
    /// The database's error.
    pub async fn begin(&self) -> Result<Tx, sqlx::Error> {
        Ok(match self {
            Self::Postgres(pool) => Tx::Postgres(pool.begin().await?),
            Self::Sqlite(pool) => Tx::Sqlite(pool.begin_with("BEGIN IMMEDIATE").await?),
        })
    }

    /// Runs a statement written for [`Database::dialect`] in its own transaction; returns the number of rows it affected.
    ///
    /// # Errors
    /// The database's error.
    pub async fn execute(&self, sql: &str, args: Args) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Self::Postgres(pool) => tx::bind_pg(sqlx::query(sql), args)
                .execute(pool)
                .await?
                .rows_affected(),
            Self::Sqlite(pool) => tx::bind_sqlite(sqlx::query(sql), args)
                .execute(pool)
                .await?
                .rows_affected(),
        })
    }

    /// Runs a query written for [`Database::dialect`]; returns its rows.
    ///
    /// # Errors
    /// The database's error.
    pub async fn fetch_all(&self, sql: &str, args: Args) -> Result<Vec<DbRow>, sqlx::Error> {
        Ok(match self {
            Self::Postgres(pool) => tx::bind_pg(sqlx::query(sql), args)
                .fetch_all(pool)
                .await?
                .into_iter()
                .map(DbRow::Postgres)
                .collect(),
            Self::Sqlite(pool) => tx::bind_sqlite(sqlx::query(sql), args)
                .fetch_all(pool)
                .await?
                .into_iter()
                .map(DbRow::Sqlite)
                .collect(),
        })
    }

    /// Runs a query written for [`Database::dialect`]; returns its first row, if any.
    ///
    /// # Errors
    /// The database's error.
    pub async fn fetch_optional(
        &self,
        sql: &str,
        args: Args,
    ) -> Result<Option<DbRow>, sqlx::Error> {
        Ok(match self {
            Self::Postgres(pool) => tx::bind_pg(sqlx::query(sql), args)
                .fetch_optional(pool)
                .await?
                .map(DbRow::Postgres),
            Self::Sqlite(pool) => tx::bind_sqlite(sqlx::query(sql), args)
                .fetch_optional(pool)
                .await?
                .map(DbRow::Sqlite),
        })
    }

    /// On PostgreSQL, how many replicas with this pool fit the server's
    /// `max_connections` (each replica holds its pool plus [`EXTRA_CONNECTIONS`]), with
    /// the numbers it is computed from; `None` on SQLite.
    ///
    /// # Errors
    /// [`DbError::Query`] when the settings cannot be read.
    pub async fn capacity(&self) -> Result<Option<Capacity>, DbError> {
        let Self::Postgres(pool) = self else {
            return Ok(None);
        };
        let setting = |name: &'static str| async move {
            sqlx::query_scalar::<_, String>("SELECT setting FROM pg_settings WHERE name = $1")
                .bind(name)
                .fetch_one(pool)
                .await
                .map(|v| v.parse::<u32>().unwrap_or(0))
        };
        let max_connections = setting("max_connections").await?;
        let reserved = setting("superuser_reserved_connections").await?;
        let per_replica = pool.options().get_max_connections() + EXTRA_CONNECTIONS;
        let available = max_connections.saturating_sub(reserved);
        Ok(Some(Capacity {
            max_connections,
            reserved,
            per_replica,
            replicas: available / per_replica.max(1),
        }))
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

/// Connections a replica holds besides its pool: processor ownership, and the LISTEN
/// doorbell.
pub const EXTRA_CONNECTIONS: u32 = 2;

/// How many replicas fit a PostgreSQL server's connection limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// The server's `max_connections`.
    pub max_connections: u32,
    /// Its `superuser_reserved_connections`.
    pub reserved: u32,
    /// Connections one replica holds (its pool plus [`EXTRA_CONNECTIONS`]).
    pub per_replica: u32,
    /// Replicas that fit: `(max_connections − reserved) / per_replica`.
    pub replicas: u32,
}

fn ensure_parent_dir(file: &Path) -> Result<(), DbError> {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir)
            .map_err(|e| DbError::Directory(dir.display().to_string(), e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn given_a_url_with_a_password_when_redacted_then_the_password_never_shows() {
        let cases = [
            (
                "postgres://pm:s3cret@127.0.0.1:bad/pm",
                "postgres://pm:***@127.0.0.1:bad/pm",
            ),
            (
                "postgresql://pm:p@ss:w@rd@db/pm?sslmode=require",
                "postgresql://pm:***@db/pm?sslmode=require",
            ),
            ("postgres://pm@db/pm", "postgres://pm@db/pm"),
            ("sqlite://data/pm.db", "sqlite://data/pm.db"),
            ("no scheme at all", "no scheme at all"),
        ];
        for (url, shown) in cases {
            assert_eq!(super::redacted(url), shown, "{url}");
        }
    }
}
