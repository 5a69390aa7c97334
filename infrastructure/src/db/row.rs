//! A fetched row of either database, with typed column access that reads the same from
//! both: ids are selected as text (`id::text AS id`), times as timestamps (PostgreSQL
//! `timestamptz`, SQLite RFC 3339 text).

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{ColumnIndex, Decode, Row, Type};
use uuid::Uuid;

/// A row of PostgreSQL or SQLite.
pub enum DbRow {
    /// From PostgreSQL.
    Postgres(PgRow),
    /// From SQLite.
    Sqlite(SqliteRow),
}

impl std::fmt::Debug for DbRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Postgres(_) => "DbRow::Postgres",
            Self::Sqlite(_) => "DbRow::Sqlite",
        })
    }
}

fn get<'r, T, R>(row: &'r R, col: &str) -> Result<T, sqlx::Error>
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    T: Decode<'r, R::Database> + Type<R::Database>,
{
    row.try_get(col)
}

/// The error of a column whose text is not what it should be (an id that is no UUID).
fn decode_error(col: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: col.to_string(),
        source: e.to_string().into(),
    }
}

impl DbRow {
    /// A nullable text column.
    pub fn opt_string(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        match self {
            Self::Postgres(r) => get(r, col),
            Self::Sqlite(r) => get(r, col),
        }
    }

    /// A nullable text column, borrowed from the row (no copy, for columns parsed at
    /// once).
    pub fn opt_str(&self, col: &str) -> Result<Option<&str>, sqlx::Error> {
        match self {
            Self::Postgres(r) => get(r, col),
            Self::Sqlite(r) => get(r, col),
        }
    }

    /// A text column borrowed from the row (NULL is an error).
    pub fn str(&self, col: &str) -> Result<&str, sqlx::Error> {
        self.opt_str(col)?
            .ok_or_else(|| decode_error(col, "unexpected NULL"))
    }

    /// A bytes column borrowed from the row (NULL is an error).
    pub fn bytes(&self, col: &str) -> Result<&[u8], sqlx::Error> {
        match self {
            Self::Postgres(r) => get(r, col),
            Self::Sqlite(r) => get(r, col),
        }
    }

    /// A text column (NULL is an error).
    pub fn string(&self, col: &str) -> Result<String, sqlx::Error> {
        self.opt_string(col)?
            .ok_or_else(|| decode_error(col, "unexpected NULL"))
    }

    /// A nullable integer column.
    pub fn opt_int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        match self {
            Self::Postgres(r) => get(r, col),
            Self::Sqlite(r) => get(r, col),
        }
    }

    /// An integer column (NULL is an error).
    pub fn int(&self, col: &str) -> Result<i64, sqlx::Error> {
        self.opt_int(col)?
            .ok_or_else(|| decode_error(col, "unexpected NULL"))
    }

    /// A floating-point column (NULL is an error).
    pub fn float(&self, col: &str) -> Result<f64, sqlx::Error> {
        let value: Option<f64> = match self {
            Self::Postgres(r) => get(r, col)?,
            Self::Sqlite(r) => get(r, col)?,
        };
        value.ok_or_else(|| decode_error(col, "unexpected NULL"))
    }

    /// A boolean column.
    pub fn bool(&self, col: &str) -> Result<bool, sqlx::Error> {
        match self {
            Self::Postgres(r) => get(r, col),
            Self::Sqlite(r) => get(r, col),
        }
    }

    /// A nullable time column.
    pub fn opt_time(&self, col: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        match self {
            Self::Postgres(r) => get(r, col),
            Self::Sqlite(r) => get(r, col),
        }
    }

    /// A time column (NULL is an error).
    pub fn time(&self, col: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        self.opt_time(col)?
            .ok_or_else(|| decode_error(col, "unexpected NULL"))
    }

    /// A nullable id column selected as text.
    pub fn opt_uuid(&self, col: &str) -> Result<Option<Uuid>, sqlx::Error> {
        self.opt_string(col)?
            .map(|s| s.parse().map_err(|e| decode_error(col, e)))
            .transpose()
    }

    /// An id column selected as text (NULL is an error).
    pub fn uuid(&self, col: &str) -> Result<Uuid, sqlx::Error> {
        self.opt_uuid(col)?
            .ok_or_else(|| decode_error(col, "unexpected NULL"))
    }

    /// A text column parsed with `parse` (an enumeration's wire name, JSON, …).
    pub fn parsed<T, E: std::fmt::Display>(
        &self,
        col: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<T, sqlx::Error> {
        parse(&self.string(col)?).map_err(|e| decode_error(col, e))
    }
}
