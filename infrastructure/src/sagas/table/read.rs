//! A stored row being decoded ([`Read`]): its columns by name, checked against its table's
//! definition (the column exists and has the type the row type reads it as).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Table, Ty};
use crate::db::DbRow;

/// A stored row being decoded: its columns by name, checked against the table.
pub struct Read<'r> {
    pub(super) table: &'static Table,
    pub(super) row: &'r DbRow,
}

fn decode_error(col: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: col.to_string(),
        source: e.to_string().into(),
    }
}

impl Read<'_> {
    fn column(&self, name: &str, tys: &[Ty]) -> Result<(), sqlx::Error> {
        match self.table.readable(name) {
            Some(c) if tys.contains(&c.ty) => Ok(()),
            Some(c) => Err(decode_error(
                name,
                format!("{}.{name} is {:?}", self.table.name, c.ty),
            )),
            None => Err(decode_error(
                name,
                format!("{} has no column {name}", self.table.name),
            )),
        }
    }

    /// An id.
    pub fn uuid(&self, name: &str) -> Result<Uuid, sqlx::Error> {
        self.column(name, &[Ty::Uuid])?;
        self.row.uuid(name)
    }

    /// An id or `NULL`.
    pub fn opt_uuid(&self, name: &str) -> Result<Option<Uuid>, sqlx::Error> {
        self.column(name, &[Ty::Uuid])?;
        self.row.opt_uuid(name)
    }

    /// Text.
    pub fn text(&self, name: &str) -> Result<String, sqlx::Error> {
        self.column(name, &[Ty::Text])?;
        self.row.string(name)
    }

    /// Text or `NULL`.
    pub fn opt_text(&self, name: &str) -> Result<Option<String>, sqlx::Error> {
        self.column(name, &[Ty::Text])?;
        self.row.opt_string(name)
    }

    /// A text column parsed by `parse` (an enumeration's wire name).
    pub fn parsed<T>(&self, name: &str, parse: fn(&str) -> Option<T>) -> Result<T, sqlx::Error> {
        self.opt_parsed(name, parse)?
            .ok_or_else(|| decode_error(name, "unexpected NULL"))
    }

    /// A nullable text column parsed by `parse`.
    pub fn opt_parsed<T>(
        &self,
        name: &str,
        parse: fn(&str) -> Option<T>,
    ) -> Result<Option<T>, sqlx::Error> {
        self.column(name, &[Ty::Text])?;
        self.row
            .opt_str(name)?
            .map(|raw| parse(raw).ok_or_else(|| decode_error(name, format!("unknown value {raw}"))))
            .transpose()
    }

    /// A JSON document.
    pub fn json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, sqlx::Error> {
        self.opt_json(name)?
            .ok_or_else(|| decode_error(name, "unexpected NULL"))
    }

    /// A JSON document or `NULL`.
    pub fn opt_json<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, sqlx::Error> {
        self.column(name, &[Ty::Json])?;
        self.row
            .opt_str(name)?
            .map(|raw| serde_json::from_str(raw).map_err(|e| decode_error(name, e)))
            .transpose()
    }

    /// An integer.
    pub fn int(&self, name: &str) -> Result<i64, sqlx::Error> {
        self.column(name, &[Ty::BigInt, Ty::Integer])?;
        self.row.int(name)
    }

    /// An integer or `NULL`.
    pub fn opt_int(&self, name: &str) -> Result<Option<i64>, sqlx::Error> {
        self.column(name, &[Ty::BigInt, Ty::Integer])?;
        self.row.opt_int(name)
    }

    /// A non-negative count.
    pub fn count<T: TryFrom<i64>>(&self, name: &str) -> Result<T, sqlx::Error>
    where
        T::Error: std::fmt::Display,
    {
        T::try_from(self.int(name)?).map_err(|e| decode_error(name, e))
    }

    /// A non-negative count or `NULL`.
    pub fn opt_count<T: TryFrom<i64>>(&self, name: &str) -> Result<Option<T>, sqlx::Error>
    where
        T::Error: std::fmt::Display,
    {
        self.opt_int(name)?
            .map(|v| T::try_from(v).map_err(|e| decode_error(name, e)))
            .transpose()
    }

    /// A boolean.
    pub fn bool(&self, name: &str) -> Result<bool, sqlx::Error> {
        self.column(name, &[Ty::Bool])?;
        self.row.bool(name)
    }

    /// A time.
    pub fn time(&self, name: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        self.column(name, &[Ty::Time])?;
        self.row.time(name)
    }

    /// A time or `NULL`.
    pub fn opt_time(&self, name: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        self.column(name, &[Ty::Time])?;
        self.row.opt_time(name)
    }
}
