//! Running statements on either database: [`Database`](super::Database) (autocommit, from
//! the pool) and [`Tx`] (one transaction) run the SQL they are given as it is — the caller
//! wrote it for the connection's [`Dialect`] — and bind the typed [`Args`] in each
//! database's own types ([`bind_pg`], [`bind_sqlite`]).

use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::sqlite::SqliteArguments;
use sqlx::{Postgres, Sqlite, Transaction};

use super::args::{Arg, Args};
use super::row::DbRow;
use super::rows::{check, rows_source, PgArray, SqlType};
use crate::sql::Dialect;

/// Rows per multi-row statement: well below both databases' parameter limits.
pub const ROWS_PER_STATEMENT: usize = 500;

/// Binds `args` to a PostgreSQL statement: ids as `uuid`, times as `timestamptz`.
pub(crate) fn bind_pg<'q>(
    mut q: Query<'q, Postgres, PgArguments>,
    args: Args,
) -> Query<'q, Postgres, PgArguments> {
    for arg in args.0 {
        q = match arg {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Int32(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
            Arg::Uuid(v) => q.bind(v),
            Arg::Time(v) => q.bind(v),
        };
    }
    q
}

/// Binds `args` to a SQLite statement: ids and times as the text SQLite stores them as
/// (hyphenated; [`pm_domain::time::format`]) — never sqlx's own encodings of them (a
/// blob, another time format), which would not compare equal to the stored text.
pub(crate) fn bind_sqlite<'q>(
    mut q: Query<'q, Sqlite, SqliteArguments<'q>>,
    args: Args,
) -> Query<'q, Sqlite, SqliteArguments<'q>> {
    for arg in args.0 {
        q = match arg {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Int32(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
            Arg::Uuid(v) => q.bind(v.map(|v| v.hyphenated().to_string())),
            Arg::Time(v) => q.bind(v.as_ref().map(pm_domain::time::format)),
        };
    }
    q
}

/// One transaction on either database. Dropped without [`Tx::commit`], it rolls back.
pub enum Tx {
    /// On PostgreSQL.
    Postgres(Transaction<'static, Postgres>),
    /// On SQLite (begun with `BEGIN IMMEDIATE`, so it never has to upgrade its lock).
    Sqlite(Transaction<'static, Sqlite>),
}

impl Tx {
    /// The transaction's SQL dialect.
    pub fn dialect(&self) -> Dialect {
        match self {
            Self::Postgres(_) => Dialect::Postgres,
            Self::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Runs a statement written for [`Tx::dialect`]; returns the number of rows it
    /// affected.
    ///
    /// # Errors
    /// The database's error.
    pub async fn execute(&mut self, sql: &str, args: Args) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Self::Postgres(tx) => bind_pg(sqlx::query(sql), args)
                .execute(&mut **tx)
                .await?
                .rows_affected(),
            Self::Sqlite(tx) => bind_sqlite(sqlx::query(sql), args)
                .execute(&mut **tx)
                .await?
                .rows_affected(),
        })
    }

    /// Runs a query written for [`Tx::dialect`]; returns its rows.
    ///
    /// # Errors
    /// The database's error.
    pub async fn fetch_all(&mut self, sql: &str, args: Args) -> Result<Vec<DbRow>, sqlx::Error> {
        Ok(match self {
            Self::Postgres(tx) => bind_pg(sqlx::query(sql), args)
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(DbRow::Postgres)
                .collect(),
            Self::Sqlite(tx) => bind_sqlite(sqlx::query(sql), args)
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(DbRow::Sqlite)
                .collect(),
        })
    }

    /// Runs a query written for [`Tx::dialect`]; returns its first row, if any.
    ///
    /// # Errors
    /// The database's error.
    pub async fn fetch_optional(
        &mut self,
        sql: &str,
        args: Args,
    ) -> Result<Option<DbRow>, sqlx::Error> {
        Ok(match self {
            Self::Postgres(tx) => bind_pg(sqlx::query(sql), args)
                .fetch_optional(&mut **tx)
                .await?
                .map(DbRow::Postgres),
            Self::Sqlite(tx) => bind_sqlite(sqlx::query(sql), args)
                .fetch_optional(&mut **tx)
                .await?
                .map(DbRow::Sqlite),
        })
    }

    /// A multi-row `INSERT`: `head` (`INSERT INTO t (cols)`), `rows` rows of `types` in
    /// `args`, row by row, then `suffix`; returns the rows a `RETURNING` suffix gives. See
    /// [`Tx::fetch_rows`].
    ///
    /// # Errors
    /// The database's error, or arguments that do not fit `types`.
    pub async fn insert_rows(
        &mut self,
        head: &str,
        types: &[SqlType],
        rows: usize,
        args: Args,
        suffix: &str,
    ) -> Result<Vec<DbRow>, sqlx::Error> {
        self.fetch_rows(types, rows, args, |source| {
            format!("{head} {source} {suffix}")
        })
        .await
    }

    /// [`Tx::insert_rows`] over any number of `items`, [`ROWS_PER_STATEMENT`] per
    /// statement; `bind` adds one item's arguments. Returns every statement's rows.
    ///
    /// # Errors
    /// The database's error, or arguments that do not fit `types`.
    pub async fn insert_all<T>(
        &mut self,
        head: &str,
        types: &[SqlType],
        suffix: &str,
        items: &[T],
        bind: impl Fn(Args, &T) -> Args,
    ) -> Result<Vec<DbRow>, sqlx::Error> {
        let mut returned = Vec::new();
        for chunk in items.chunks(ROWS_PER_STATEMENT) {
            let args = chunk
                .iter()
                .fold(Args::with_capacity(chunk.len() * types.len()), &bind);
            returned.extend(
                self.insert_rows(head, types, chunk.len(), args, suffix)
                    .await?,
            );
        }
        Ok(returned)
    }

    /// A statement over `rows` rows of `types` (row by row in `args`): `around` places the
    /// rows' source ([`rows_source`] for this dialect) in it. On PostgreSQL one array per
    /// column, so the statement is the same whatever the number of rows.
    ///
    /// # Errors
    /// The database's error, or arguments that do not fit `types`.
    pub async fn fetch_rows(
        &mut self,
        types: &[SqlType],
        rows: usize,
        args: Args,
        around: impl FnOnce(&str) -> String,
    ) -> Result<Vec<DbRow>, sqlx::Error> {
        let sql = around(&rows_source(self.dialect(), types, rows));
        self.fetch_rows_in(&sql, types, rows, args).await
    }

    /// [`Tx::fetch_rows`] with the statement already built (its rows' source from
    /// [`rows_source`] for this dialect, `rows` rows of `types`): for a caller that keeps
    /// the PostgreSQL text, which is the same for any number of rows.
    ///
    /// # Errors
    /// The database's error, or arguments that do not fit `types`.
    pub(crate) async fn fetch_rows_in(
        &mut self,
        sql: &str,
        types: &[SqlType],
        rows: usize,
        args: Args,
    ) -> Result<Vec<DbRow>, sqlx::Error> {
        check(types, rows, &args)?;
        Ok(match self {
            Self::Postgres(tx) => PgArray::columns(types, rows, args)
                .into_iter()
                .fold(sqlx::query(sql), |q, a| a.bind(q))
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(DbRow::Postgres)
                .collect(),
            Self::Sqlite(tx) => bind_sqlite(sqlx::query(sql), args)
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(DbRow::Sqlite)
                .collect(),
        })
    }

    /// Commits.
    ///
    /// # Errors
    /// The database's error; the transaction is rolled back then.
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Self::Postgres(tx) => tx.commit().await,
            Self::Sqlite(tx) => tx.commit().await,
        }
    }
}
