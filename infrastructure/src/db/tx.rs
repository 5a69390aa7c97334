//! Running statements on either database: [`Database`](super::Database) (autocommit, from
//! the pool) and [`Tx`] (one transaction) take a statement written in PostgreSQL's dialect
//! with [`Args`], translate it for SQLite ([`Dialect::sql`]) and bind the arguments.

use sqlx::query::Query;
use sqlx::{Encode, Postgres, Sqlite, Transaction, Type};

use super::args::{Arg, Args};
use super::row::DbRow;
use super::rows::RowsStatement;
use crate::sql::Dialect;

/// Rows per multi-row statement: well below both databases' parameter limits.
pub const ROWS_PER_STATEMENT: usize = 500;

/// Binds `args` to a statement of any database.
fn bind<'q, DB: sqlx::Database>(
    mut q: Query<'q, DB, DB::Arguments<'q>>,
    args: Args,
) -> Query<'q, DB, DB::Arguments<'q>>
where
    Option<String>: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB> + Type<DB>,
    bool: Encode<'q, DB> + Type<DB>,
    Vec<u8>: Encode<'q, DB> + Type<DB>,
{
    for arg in args.0 {
        q = match arg {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
        };
    }
    q
}

/// Binds `args` to a SQLite statement written for SQLite.
pub(crate) fn bind_sqlite<'q>(
    q: Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    args: Args,
) -> Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    bind(q, args)
}

/// A statement's SQL for one connection's dialect.
pub(crate) struct Statement {
    pub(crate) sql: String,
}

impl Statement {
    pub(crate) fn new(d: Dialect, sql: &str) -> Self {
        Self {
            sql: d.sql(sql).into_owned(),
        }
    }

    pub(crate) fn pg(&self, args: Args) -> Query<'_, Postgres, sqlx::postgres::PgArguments> {
        bind(sqlx::query(&self.sql), args)
    }

    pub(crate) fn sqlite(
        &self,
        args: Args,
    ) -> Query<'_, Sqlite, sqlx::sqlite::SqliteArguments<'_>> {
        bind(sqlx::query(&self.sql), args)
    }
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

    /// Runs a statement; returns the number of rows it affected.
    ///
    /// # Errors
    /// The database's error.
    pub async fn execute(&mut self, sql: &str, args: Args) -> Result<u64, sqlx::Error> {
        let s = Statement::new(self.dialect(), sql);
        Ok(match self {
            Self::Postgres(tx) => s.pg(args).execute(&mut **tx).await?.rows_affected(),
            Self::Sqlite(tx) => s.sqlite(args).execute(&mut **tx).await?.rows_affected(),
        })
    }

    /// Runs a query; returns its rows.
    ///
    /// # Errors
    /// The database's error.
    pub async fn fetch_all(&mut self, sql: &str, args: Args) -> Result<Vec<DbRow>, sqlx::Error> {
        let s = Statement::new(self.dialect(), sql);
        Ok(match self {
            Self::Postgres(tx) => s
                .pg(args)
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(DbRow::Postgres)
                .collect(),
            Self::Sqlite(tx) => s
                .sqlite(args)
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(DbRow::Sqlite)
                .collect(),
        })
    }

    /// Runs a query; returns its first row, if any.
    ///
    /// # Errors
    /// The database's error.
    pub async fn fetch_optional(
        &mut self,
        sql: &str,
        args: Args,
    ) -> Result<Option<DbRow>, sqlx::Error> {
        let s = Statement::new(self.dialect(), sql);
        Ok(match self {
            Self::Postgres(tx) => s
                .pg(args)
                .fetch_optional(&mut **tx)
                .await?
                .map(DbRow::Postgres),
            Self::Sqlite(tx) => s
                .sqlite(args)
                .fetch_optional(&mut **tx)
                .await?
                .map(DbRow::Sqlite),
        })
    }

    /// A multi-row `INSERT`: `head` (`INSERT INTO t (cols)`), `rows` rows of
    /// `casts.len()` arguments in `args`, row by row, then `suffix`; returns the rows a
    /// `RETURNING` suffix gives. See [`Tx::fetch_rows`].
    ///
    /// # Errors
    /// The database's error.
    pub async fn insert_rows(
        &mut self,
        head: &str,
        casts: &[&str],
        rows: usize,
        args: Args,
        suffix: &str,
    ) -> Result<Vec<DbRow>, sqlx::Error> {
        self.fetch_rows(casts, rows, args, |source| {
            format!("{head} {source} {suffix}")
        })
        .await
    }

    /// [`Tx::insert_rows`] over any number of `items`, [`ROWS_PER_STATEMENT`] per
    /// statement; `bind` adds one item's arguments. Returns every statement's rows.
    ///
    /// # Errors
    /// The database's error.
    pub async fn insert_all<T>(
        &mut self,
        head: &str,
        casts: &[&str],
        suffix: &str,
        items: &[T],
        bind: impl Fn(Args, &T) -> Args,
    ) -> Result<Vec<DbRow>, sqlx::Error> {
        let mut returned = Vec::new();
        for chunk in items.chunks(ROWS_PER_STATEMENT) {
            let args = chunk
                .iter()
                .fold(Args::with_capacity(chunk.len() * casts.len()), &bind);
            returned.extend(
                self.insert_rows(head, casts, chunk.len(), args, suffix)
                    .await?,
            );
        }
        Ok(returned)
    }

    /// A statement over `rows` rows of `casts.len()` arguments (row by row in `args`):
    /// `around` places the rows' source in it (see [`RowsStatement`]). On PostgreSQL one
    /// array per column, so the statement is the same whatever the number of rows.
    ///
    /// # Errors
    /// The database's error.
    pub async fn fetch_rows(
        &mut self,
        casts: &[&str],
        rows: usize,
        args: Args,
        around: impl FnOnce(&str) -> String,
    ) -> Result<Vec<DbRow>, sqlx::Error> {
        let mut statement = RowsStatement::new(self.dialect(), casts, rows, args, around);
        let s = Statement::new(self.dialect(), statement.sql());
        Ok(match self {
            Self::Postgres(tx) => {
                let q = match statement.take_args() {
                    Some(args) => s.pg(args),
                    None => statement.bind_columns(sqlx::query(&s.sql)),
                };
                q.fetch_all(&mut **tx)
                    .await?
                    .into_iter()
                    .map(DbRow::Postgres)
                    .collect()
            }
            Self::Sqlite(tx) => s
                .sqlite(statement.take_args().unwrap_or_default())
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
