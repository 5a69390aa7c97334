//! Reading columns the same way from PostgreSQL and SQLite rows.

use chrono::{DateTime, Utc};
use pm_domain::time;
use serde_json::Value;
use sqlx::{ColumnIndex, Decode, Row, Type};

/// Typed column access for rows of either database. Ids are selected as text
/// (`id::text`), times as timestamps.
pub(crate) trait RowExt {
    /// A text column (null → `Value::Null`).
    fn text(&self, col: &str) -> Result<Value, sqlx::Error>;
    /// A text column as a plain string (empty when null).
    fn string(&self, col: &str) -> Result<String, sqlx::Error>;
    /// A nullable text column.
    fn opt_string(&self, col: &str) -> Result<Option<String>, sqlx::Error>;
    /// A time column as RFC 3339 (null → `Value::Null`).
    fn time(&self, col: &str) -> Result<Value, sqlx::Error>;
    /// A time column as a value.
    fn datetime(&self, col: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error>;
    /// An integer column.
    fn int(&self, col: &str) -> Result<i64, sqlx::Error>;
}

impl<R> RowExt for R
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<DateTime<Utc>>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    fn text(&self, col: &str) -> Result<Value, sqlx::Error> {
        Ok(self
            .try_get::<Option<String>, _>(col)?
            .map_or(Value::Null, Value::String))
    }

    fn string(&self, col: &str) -> Result<String, sqlx::Error> {
        Ok(self.try_get::<Option<String>, _>(col)?.unwrap_or_default())
    }

    fn opt_string(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        self.try_get::<Option<String>, _>(col)
    }

    fn time(&self, col: &str) -> Result<Value, sqlx::Error> {
        Ok(self
            .try_get::<Option<DateTime<Utc>>, _>(col)?
            .map_or(Value::Null, |t| Value::String(time::format(&t))))
    }

    fn datetime(&self, col: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        self.try_get::<Option<DateTime<Utc>>, _>(col)
    }

    fn int(&self, col: &str) -> Result<i64, sqlx::Error> {
        self.try_get::<i64, _>(col)
    }
}

/// Removes the `null` members of an object (optional fields are omitted, as in facts).
pub(crate) fn compact(mut v: Value) -> Value {
    if let Some(obj) = v.as_object_mut() {
        obj.retain(|_, value| !value.is_null());
    }
    v
}
