//! A row being encoded ([`Fields`]): its values by column name, checked against its
//! table's definition, then put in the table's column order for the statement.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Table;
use crate::db::Arg;

/// Whether `arg` is `NULL`.
fn is_null(arg: &Arg) -> bool {
    matches!(
        arg,
        Arg::Uuid(None) | Arg::Text(None) | Arg::Int(None) | Arg::Bool(None) | Arg::Time(None)
    )
}

/// A row being encoded: its values by column, checked against the table.
#[derive(Debug)]
pub struct Fields {
    table: &'static Table,
    values: Vec<Option<Arg>>,
    error: Option<String>,
}

impl Fields {
    pub(super) fn new(table: &'static Table) -> Self {
        Self {
            table,
            values: vec![None; table.columns.len()],
            error: None,
        }
    }

    fn set(&mut self, name: &str, value: Arg) -> &mut Self {
        if self.error.is_some() {
            return self;
        }
        let table = self.table.name;
        self.error = match self.table.find(name) {
            None => Some(format!("{table} has no column {name}")),
            Some((_, c)) if !c.ty.takes(&value) => {
                Some(format!("{table}.{name} is {:?}, not {value:?}", c.ty))
            }
            Some((_, c)) if is_null(&value) && !c.nullable => {
                Some(format!("{table}.{name} is NOT NULL"))
            }
            Some((i, _)) if self.values[i].is_some() => {
                Some(format!("{table}.{name} is written twice"))
            }
            Some((i, _)) => {
                self.values[i] = Some(value);
                None
            }
        };
        self
    }

    /// An id.
    pub fn uuid(&mut self, name: &str, v: Uuid) -> &mut Self {
        self.set(name, Arg::Uuid(Some(v)))
    }

    /// An id or `NULL`.
    pub fn opt_uuid(&mut self, name: &str, v: Option<Uuid>) -> &mut Self {
        self.set(name, Arg::Uuid(v))
    }

    /// Text.
    pub fn text(&mut self, name: &str, v: impl Into<String>) -> &mut Self {
        self.set(name, Arg::Text(Some(v.into())))
    }

    /// Text or `NULL`.
    pub fn opt_text(&mut self, name: &str, v: Option<impl Into<String>>) -> &mut Self {
        self.set(name, Arg::Text(v.map(Into::into)))
    }

    /// A JSON document.
    pub fn json<T: serde::Serialize>(&mut self, name: &str, v: &T) -> &mut Self {
        match serde_json::to_string(v) {
            Ok(doc) => self.set(name, Arg::Text(Some(doc))),
            Err(e) => {
                self.error = Some(format!("{}.{name}: {e}", self.table.name));
                self
            }
        }
    }

    /// A JSON document or `NULL`.
    pub fn opt_json<T: serde::Serialize>(&mut self, name: &str, v: Option<&T>) -> &mut Self {
        match v {
            Some(v) => self.json(name, v),
            None => self.set(name, Arg::Text(None)),
        }
    }

    /// An integer.
    pub fn int(&mut self, name: &str, v: i64) -> &mut Self {
        self.set(name, Arg::Int(Some(v)))
    }

    /// An integer or `NULL`.
    pub fn opt_int(&mut self, name: &str, v: Option<i64>) -> &mut Self {
        self.set(name, Arg::Int(v))
    }

    /// A count, kept at the largest integer the column holds when it is larger.
    pub fn count(&mut self, name: &str, v: u64) -> &mut Self {
        self.int(name, clamp(v))
    }

    /// A count or `NULL`.
    pub fn opt_count(&mut self, name: &str, v: Option<u64>) -> &mut Self {
        self.opt_int(name, v.map(clamp))
    }

    /// A boolean.
    pub fn bool(&mut self, name: &str, v: bool) -> &mut Self {
        self.set(name, Arg::Bool(Some(v)))
    }

    /// A time.
    pub fn time(&mut self, name: &str, v: DateTime<Utc>) -> &mut Self {
        self.set(name, Arg::Time(Some(v)))
    }

    /// A time or `NULL`.
    pub fn opt_time(&mut self, name: &str, v: Option<DateTime<Utc>>) -> &mut Self {
        self.set(name, Arg::Time(v))
    }

    /// The values in the table's column order, or what does not fit.
    pub(super) fn finish(self) -> Result<Vec<Arg>, String> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.values
            .into_iter()
            .zip(self.table.columns)
            .map(|(v, c)| v.ok_or_else(|| format!("{}.{} is not written", self.table.name, c.name)))
            .collect()
    }
}

/// A count as the `bigint` it is stored in (counts beyond it are kept at the max).
fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
