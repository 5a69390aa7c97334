//! Reading columns the same way from PostgreSQL and SQLite rows.

use chrono::{DateTime, Utc};
use pm_domain::time;
use serde_json::{json, Value};
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

/// A conversation checkpoint row (`id`, `conversation_id`, `checkpoint_type`, `summary`,
/// `created_at`) as the API shows it.
pub(crate) fn checkpoint_json<R: RowExt>(r: &R) -> Result<Value, sqlx::Error> {
    Ok(json!({
        "id": r.text("id")?,
        "conversation_id": r.text("conversation_id")?,
        "checkpoint_type": r.text("checkpoint_type")?,
        "summary": r.text("summary")?,
        "created_at": r.time("created_at")?,
    }))
}

/// A message row as the API shows it (optional fields omitted when absent).
pub(crate) fn message_json<R: RowExt>(r: &R) -> Result<Value, sqlx::Error> {
    Ok(compact(json!({
        "id": r.text("id")?,
        "time": r.time("time")?,
        "actor_id": r.text("actor_id")?,
        "conversation_id": r.text("conversation_id")?,
        "task_id": r.text("task_id")?,
        "content": r.text("content")?,
        "external_identity": r.text("external_identity")?,
    })))
}

/// A task checkpoint row as the API shows it, with its stream `sequence`.
pub(crate) fn task_checkpoint_json<R: RowExt>(r: &R) -> Result<Value, sqlx::Error> {
    Ok(json!({
        "id": r.text("id")?,
        "task_id": r.text("task_id")?,
        "type": r.text("type")?,
        "created_at": r.time("created_at")?,
        "sequence": r.int("sequence")?,
    }))
}

/// The columns of a message row.
pub(crate) const MESSAGE_COLUMNS: &str =
    "id::text AS id, conversation_id::text AS conversation_id, \
    actor_id::text AS actor_id, task_id::text AS task_id, content, external_identity, time";
/// The columns of a conversation checkpoint row.
pub(crate) const CHECKPOINT_COLUMNS: &str =
    "id::text AS id, conversation_id::text AS conversation_id, checkpoint_type, summary, created_at";
/// The columns of a task checkpoint row.
pub(crate) const TASK_CHECKPOINT_COLUMNS: &str =
    "id::text AS id, task_id::text AS task_id, type, created_at, sequence";
