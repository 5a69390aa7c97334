//! Statement arguments for either database: a statement's parameters are collected as
//! [`Args`] and bound by [`super::Database`] or [`super::Tx`] to whichever connection
//! runs it. Ids and times travel as text; the SQL casts them (`$1::uuid`,
//! `$2::timestamptz`) on PostgreSQL, and SQLite stores them as text that sorts correctly.

use chrono::{DateTime, Utc};
use pm_domain::time;
use uuid::Uuid;

/// One bound value.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// Text (also ids and times), or NULL.
    Text(Option<String>),
    /// A 64-bit integer, or NULL.
    Int(Option<i64>),
    /// A boolean.
    Bool(bool),
    /// Bytes (`bytea`, SQLite's `blob`).
    Bytes(Vec<u8>),
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

    /// Appends text.
    pub fn text(mut self, v: impl Into<String>) -> Self {
        self.0.push(Arg::Text(Some(v.into())));
        self
    }

    /// Appends text or NULL.
    pub fn opt_text(mut self, v: Option<impl Into<String>>) -> Self {
        self.0.push(Arg::Text(v.map(Into::into)));
        self
    }

    /// Appends an id (as text; cast it with `::uuid` in the SQL).
    pub fn uuid(self, v: Uuid) -> Self {
        self.text(v.to_string())
    }

    /// Appends an id or NULL.
    pub fn opt_uuid(self, v: Option<Uuid>) -> Self {
        self.opt_text(v.map(|v| v.to_string()))
    }

    /// Appends a time (as RFC 3339 text; cast it with `::timestamptz` in the SQL).
    pub fn time(self, v: &DateTime<Utc>) -> Self {
        self.text(time::format(v))
    }

    /// Appends a time or NULL.
    pub fn opt_time(self, v: Option<&DateTime<Utc>>) -> Self {
        self.opt_text(v.map(time::format))
    }

    /// Appends an integer.
    pub fn int(mut self, v: i64) -> Self {
        self.0.push(Arg::Int(Some(v)));
        self
    }

    /// Appends an integer or NULL.
    pub fn opt_int(mut self, v: Option<i64>) -> Self {
        self.0.push(Arg::Int(v));
        self
    }

    /// Appends a boolean.
    pub fn bool(mut self, v: bool) -> Self {
        self.0.push(Arg::Bool(v));
        self
    }

    /// Appends bytes.
    pub fn bytes(mut self, v: Vec<u8>) -> Self {
        self.0.push(Arg::Bytes(v));
        self
    }

    /// Appends `arg` and returns its placeholder (`$n`), for SQL built piece by piece.
    pub fn push(&mut self, arg: Arg) -> String {
        self.0.push(arg);
        format!("${}", self.0.len())
    }
}

/// The `VALUES` list of a multi-row `INSERT`: `rows` tuples of `casts.len()` numbered
/// parameters, each followed by its cast (`"::uuid"`, `""`, …), starting at `$1`.
pub fn values(casts: &[&str], rows: usize) -> String {
    let mut sql = String::with_capacity(rows * casts.len() * 12);
    let mut n = 0;
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for (i, cast) in casts.iter().enumerate() {
            n += 1;
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push('$');
            sql.push_str(&n.to_string());
            sql.push_str(cast);
        }
        sql.push(')');
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_number_the_parameters_row_by_row() {
        assert_eq!(values(&["::uuid", ""], 2), "($1::uuid, $2), ($3::uuid, $4)");
        assert_eq!(values(&[""], 0), "");
    }
}
