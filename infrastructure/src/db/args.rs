//! Statement arguments for either database: a statement's parameters are collected as
//! typed [`Args`] and bound by [`super::Database`] or [`super::Tx`] to whichever connection
//! runs it, each in that database's own type — so the SQL needs no casts on parameters.
//! PostgreSQL gets ids as `uuid` and times as `timestamptz`; SQLite gets them as the text
//! it stores (hyphenated ids, RFC 3339 times with microseconds and `Z`, which sort as
//! time). An id compared with a `text` column (the log's `aggregate_id`) is bound as text
//! ([`Args::text`]): PostgreSQL has no `text = uuid`.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One bound value.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// Text, or NULL.
    Text(Option<String>),
    /// A 64-bit integer, or NULL.
    Int(Option<i64>),
    /// A 32-bit integer, or NULL: for a PostgreSQL function that takes `integer`
    /// (`substr`), which a 64-bit value does not fit implicitly.
    Int32(Option<i32>),
    /// A boolean, or NULL.
    Bool(Option<bool>),
    /// Bytes (`bytea`, SQLite's `blob`).
    Bytes(Vec<u8>),
    /// An id, or NULL: a `uuid` on PostgreSQL, hyphenated text on SQLite.
    Uuid(Option<Uuid>),
    /// A time, or NULL: a `timestamptz` on PostgreSQL, RFC 3339 text
    /// ([`pm_domain::time::format`]) on SQLite.
    Time(Option<DateTime<Utc>>),
}

/// A statement's arguments, in `$1, $2, …` order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args(pub(crate) Vec<Arg>);

impl Args {
    /// No arguments.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Room for `n` arguments.
    pub fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    /// How many arguments there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Appends `arg`.
    pub fn arg(mut self, arg: Arg) -> Self {
        self.0.push(arg);
        self
    }

    /// Appends text.
    pub fn text(self, v: impl Into<String>) -> Self {
        self.arg(Arg::Text(Some(v.into())))
    }

    /// Appends text or NULL.
    pub fn opt_text(self, v: Option<impl Into<String>>) -> Self {
        self.arg(Arg::Text(v.map(Into::into)))
    }

    /// Appends an id, for a `uuid` column (see the module's note on `text` columns).
    pub fn uuid(self, v: Uuid) -> Self {
        self.arg(Arg::Uuid(Some(v)))
    }

    /// Appends an id or NULL.
    pub fn opt_uuid(self, v: Option<Uuid>) -> Self {
        self.arg(Arg::Uuid(v))
    }

    /// Appends a time.
    pub fn time(self, v: &DateTime<Utc>) -> Self {
        self.arg(Arg::Time(Some(*v)))
    }

    /// Appends a time or NULL.
    pub fn opt_time(self, v: Option<&DateTime<Utc>>) -> Self {
        self.arg(Arg::Time(v.copied()))
    }

    /// Appends an integer.
    pub fn int(self, v: i64) -> Self {
        self.arg(Arg::Int(Some(v)))
    }

    /// Appends an integer or NULL.
    pub fn opt_int(self, v: Option<i64>) -> Self {
        self.arg(Arg::Int(v))
    }

    /// Appends a boolean.
    pub fn bool(self, v: bool) -> Self {
        self.arg(Arg::Bool(Some(v)))
    }

    /// Appends bytes.
    pub fn bytes(self, v: Vec<u8>) -> Self {
        self.arg(Arg::Bytes(v))
    }

    /// Appends `arg` and returns its placeholder (`$n`), for SQL built piece by piece.
    pub fn push(&mut self, arg: Arg) -> String {
        self.0.push(arg);
        format!("${}", self.0.len())
    }
}

/// `n` numbered parameters from `$first`, comma-separated (`$1, $2, $3`): an `IN` list.
pub fn params(first: usize, n: usize) -> String {
    let mut sql = String::with_capacity(n * 5);
    for i in 0..n {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push('$');
        sql.push_str(&(first + i).to_string());
    }
    sql
}

/// The `VALUES` list of a multi-row statement: `rows` tuples of `width` numbered
/// parameters, row by row from `$1` — no casts, the arguments carry their types.
pub fn values(width: usize, rows: usize) -> String {
    let mut sql = String::with_capacity(rows * (width * 6 + 4));
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        sql.push_str(&params(row * width + 1, width));
        sql.push(')');
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_rows_when_listed_as_values_then_the_parameters_are_numbered_row_by_row() {
        assert_eq!(values(2, 2), "($1, $2), ($3, $4)");
        assert_eq!(values(1, 0), "");
        assert_eq!(params(3, 3), "$3, $4, $5");
        assert_eq!(params(1, 0), "");
    }

    #[test]
    fn given_typed_values_when_appended_then_ids_and_times_keep_their_types() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let args = Args::new()
            .uuid(Uuid::nil())
            .opt_uuid(None)
            .time(&at)
            .opt_time(None)
            .text(Uuid::nil().to_string());
        assert_eq!(
            args.0,
            vec![
                Arg::Uuid(Some(Uuid::nil())),
                Arg::Uuid(None),
                Arg::Time(Some(at)),
                Arg::Time(None),
                Arg::Text(Some("00000000-0000-0000-0000-000000000000".into())),
            ]
        );
    }
}
