//! A fetched row of either database, with typed column access that reads the same from
//! both, so a select list needs no casts: an id is PostgreSQL's `uuid` (or an id kept as
//! `text`, like the log's `aggregate_id`) or SQLite's text, an integer PostgreSQL's
//! `smallint`, `integer` or `bigint` or SQLite's integer, a time PostgreSQL's
//! `timestamptz` or SQLite's RFC 3339 text.

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgRow, PgValueRef};
use sqlx::sqlite::SqliteRow;
use sqlx::{ColumnIndex, Decode, Postgres, Row, Type, TypeInfo, ValueRef};
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

/// A PostgreSQL column's value (`None` for NULL), found by name once; its type says how
/// it decodes.
fn pg_value<'r>(row: &'r PgRow, col: &str) -> Result<Option<PgValueRef<'r>>, sqlx::Error> {
    let raw = row.try_get_raw(col)?;
    Ok((!raw.is_null()).then_some(raw))
}

/// `raw` decoded as a `T` whose type the caller checked.
fn pg_decode<'r, T: Decode<'r, Postgres>>(
    raw: PgValueRef<'r>,
    col: &str,
) -> Result<T, sqlx::Error> {
    T::decode(raw).map_err(|e| decode_error(col, e))
}

/// The error of a PostgreSQL column of a type an accessor does not read.
fn pg_mismatch(col: &str, raw: &PgValueRef<'_>, wanted: &str) -> sqlx::Error {
    decode_error(col, format!("{} is not {wanted}", raw.type_info().name()))
}

/// A PostgreSQL value read as text: text types, and `json`, which the server sends as the
/// document's text in either wire format (unlike `jsonb`, whose binary form has a version
/// byte).
fn pg_text<'r>(raw: PgValueRef<'r>, col: &str) -> Result<&'r str, sqlx::Error> {
    let ty = raw.type_info();
    if ty.name() == "JSON" || <&str as Type<Postgres>>::compatible(&ty) {
        raw.as_str().map_err(|e| decode_error(col, e))
    } else {
        Err(pg_mismatch(col, &raw, "text"))
    }
}

impl DbRow {
    /// A nullable text column (also a PostgreSQL `json` document, as written; see
    /// [`DbRow::opt_str`]).
    pub fn opt_string(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        Ok(self.opt_str(col)?.map(str::to_owned))
    }

    /// A nullable text column, borrowed from the row (no copy, for columns parsed at
    /// once). A PostgreSQL `json` column (the log's `payload` and `metadata`) reads as
    /// its document's text, exactly as stored: the server sends `json` as that text in
    /// either wire format, so the select list needs no `::text`.
    pub fn opt_str(&self, col: &str) -> Result<Option<&str>, sqlx::Error> {
        match self {
            Self::Postgres(r) => pg_value(r, col)?.map(|raw| pg_text(raw, col)).transpose(),
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

    /// A nullable integer column (PostgreSQL's `integer` and `smallint` widened).
    pub fn opt_int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        match self {
            Self::Postgres(r) => {
                let Some(raw) = pg_value(r, col)? else {
                    return Ok(None);
                };
                let (int8, int4, int2) = {
                    let ty = raw.type_info();
                    (
                        <i64 as Type<Postgres>>::compatible(&ty),
                        <i32 as Type<Postgres>>::compatible(&ty),
                        <i16 as Type<Postgres>>::compatible(&ty),
                    )
                };
                if int8 {
                    pg_decode::<i64>(raw, col).map(Some)
                } else if int4 {
                    pg_decode::<i32>(raw, col).map(|v| Some(v.into()))
                } else if int2 {
                    pg_decode::<i16>(raw, col).map(|v| Some(v.into()))
                } else {
                    Err(pg_mismatch(col, &raw, "an integer"))
                }
            }
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

    /// A nullable id column: PostgreSQL's `uuid`, or an id kept as text (SQLite's, the
    /// log's `aggregate_id`).
    pub fn opt_uuid(&self, col: &str) -> Result<Option<Uuid>, sqlx::Error> {
        let text = match self {
            Self::Postgres(r) => {
                let Some(raw) = pg_value(r, col)? else {
                    return Ok(None);
                };
                if <Uuid as Type<Postgres>>::compatible(&raw.type_info()) {
                    return pg_decode(raw, col).map(Some);
                }
                pg_text(raw, col)?
            }
            Self::Sqlite(r) => match get(r, col)? {
                Some(text) => text,
                None => return Ok(None),
            },
        };
        text.parse().map(Some).map_err(|e| decode_error(col, e))
    }

    /// An id column (NULL is an error; see [`DbRow::opt_uuid`]).
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
