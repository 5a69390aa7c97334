//! A saga table stated once: its columns with their types, nullability and conflict rule
//! ([`Table`]), and its row type's one encode and one decode ([`Row`]), both by column
//! name. Every statement over the table — the upsert of a commit, the select list of a
//! read — is built from the definition for each dialect, so a column is added in one place
//! (and in the migrations, which a test compares with the definition).
//!
//! Values are written by name and checked against the definition (the column exists, has
//! the value's type, accepts `NULL`, is written once): a row that does not fit its table
//! is an error, never a value in the wrong column.

use std::sync::OnceLock;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::db::{rows_source, Arg, Args, DbRow, SqlType, Tx, ROWS_PER_STATEMENT};
use crate::sql::Dialect;

/// A column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// An id (`uuid`; text in SQLite).
    Uuid,
    /// Text.
    Text,
    /// A JSON document, kept as text.
    Json,
    /// A 64-bit integer.
    BigInt,
    /// A 32-bit integer (read and written as 64-bit).
    Integer,
    /// A boolean (an integer in SQLite).
    Bool,
    /// A time (`timestamptz`; RFC 3339 text in SQLite, which sorts as time).
    Time,
}

impl Ty {
    /// The type in PostgreSQL's catalog (`information_schema.columns.data_type`).
    pub fn pg(self) -> &'static str {
        match self {
            Self::Uuid => "uuid",
            Self::Text | Self::Json => "text",
            Self::BigInt => "bigint",
            Self::Integer => "integer",
            Self::Bool => "boolean",
            Self::Time => "timestamp with time zone",
        }
    }

    /// The type a STRICT SQLite table declares (`pragma_table_info.type`).
    pub fn sqlite(self) -> &'static str {
        match self {
            Self::Uuid | Self::Text | Self::Json | Self::Time => "TEXT",
            Self::BigInt | Self::Integer | Self::Bool => "INTEGER",
        }
    }

    /// How a column's values are bound (one array per column on PostgreSQL): a JSON
    /// document as the text it is kept as, a 32-bit integer as a 64-bit one.
    pub fn sql(self) -> SqlType {
        match self {
            Self::Uuid => SqlType::Uuid,
            Self::Text | Self::Json => SqlType::Text,
            Self::BigInt | Self::Integer => SqlType::Int,
            Self::Bool => SqlType::Bool,
            Self::Time => SqlType::Time,
        }
    }

    /// Whether `arg` may be written to a column of this type.
    fn takes(self, arg: &Arg) -> bool {
        self.sql().takes(arg)
    }
}

/// What an upsert does to a column of a row that is already stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    /// Keeps the stored value: the key, and what is fixed when the row is created.
    Keep,
    /// Takes the new row's value.
    Replace,
    /// Takes the value of an expression over `excluded` (the new row) and the table (the
    /// stored row), the same in both dialects.
    Rule(&'static str),
}

/// A column of a saga table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// Whether it may be `NULL`.
    pub nullable: bool,
    /// What an upsert does to it.
    pub on_conflict: OnConflict,
}

impl Column {
    /// A `NOT NULL` column an upsert replaces.
    pub const fn new(name: &'static str, ty: Ty) -> Self {
        Self {
            name,
            ty,
            nullable: false,
            on_conflict: OnConflict::Replace,
        }
    }

    /// The column, nullable.
    pub const fn null(self) -> Self {
        Self {
            nullable: true,
            ..self
        }
    }

    /// The column, kept by an upsert.
    pub const fn keep(self) -> Self {
        Self {
            on_conflict: OnConflict::Keep,
            ..self
        }
    }

    /// The column, set by an upsert to `expression`.
    pub const fn rule(self, expression: &'static str) -> Self {
        Self {
            on_conflict: OnConflict::Rule(expression),
            ..self
        }
    }
}

/// The statements built from a table's definition, once per process.
#[derive(Debug)]
pub struct Statements {
    pg_upsert: OnceLock<String>,
    select: OnceLock<String>,
    types: OnceLock<Vec<SqlType>>,
}

impl Statements {
    /// None built yet.
    pub const fn new() -> Self {
        Self {
            pg_upsert: OnceLock::new(),
            select: OnceLock::new(),
            types: OnceLock::new(),
        }
    }
}

impl Default for Statements {
    fn default() -> Self {
        Self::new()
    }
}

/// A saga table.
#[derive(Debug)]
pub struct Table {
    /// Its name.
    pub name: &'static str,
    /// The relation reads select from: the table, or a view over it that adds
    /// [`Table::derived`] columns.
    pub read_from: &'static str,
    /// The columns of its primary key (the conflict target of an upsert).
    pub key: &'static [&'static str],
    /// Its stored columns.
    pub columns: &'static [Column],
    /// Columns [`Table::read_from`] adds (read, never written).
    pub derived: &'static [Column],
    /// Its statements, built on first use.
    pub statements: Statements,
}

impl Table {
    fn find(&self, name: &str) -> Option<(usize, &Column)> {
        self.columns
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == name)
    }

    fn readable(&self, name: &str) -> Option<&Column> {
        self.columns
            .iter()
            .chain(self.derived)
            .find(|c| c.name == name)
    }

    /// The select list of every column a read decodes: the same for every dialect, since
    /// [`DbRow`] decodes each database's ids and integers (no casts).
    pub fn select_list(&self) -> &str {
        self.statements.select.get_or_init(|| {
            self.columns
                .iter()
                .chain(self.derived)
                .map(|c| c.name)
                .collect::<Vec<_>>()
                .join(", ")
        })
    }

    /// How the stored columns' values are bound, in column order.
    fn types(&self) -> &[SqlType] {
        self.statements
            .types
            .get_or_init(|| self.columns.iter().map(|c| c.ty.sql()).collect())
    }

    /// The type of a readable column, for a filter's parameter.
    pub fn ty(&self, name: &str) -> Option<Ty> {
        self.readable(name).map(|c| c.ty)
    }

    fn names(&self) -> String {
        self.columns
            .iter()
            .map(|c| c.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn on_conflict(&self) -> String {
        let sets: Vec<String> = self
            .columns
            .iter()
            .filter_map(|c| match c.on_conflict {
                OnConflict::Keep => None,
                OnConflict::Replace => Some(format!("{0} = excluded.{0}", c.name)),
                OnConflict::Rule(e) => Some(format!("{} = {e}", c.name)),
            })
            .collect();
        let target = self.key.join(", ");
        if sets.is_empty() {
            format!("ON CONFLICT ({target}) DO NOTHING")
        } else {
            format!("ON CONFLICT ({target}) DO UPDATE SET {}", sets.join(", "))
        }
    }

    /// The PostgreSQL upsert: one array per column, so the text is the same for any
    /// number of rows and is planned once per connection.
    fn pg_upsert(&self) -> &str {
        self.statements
            .pg_upsert
            .get_or_init(|| self.upsert(Dialect::Postgres, 0))
    }

    /// The upsert of `rows` rows for `dialect` (on PostgreSQL the same for any `rows`).
    fn upsert(&self, dialect: Dialect, rows: usize) -> String {
        format!(
            "INSERT INTO {} ({}) {} {}",
            self.name,
            self.names(),
            rows_source(dialect, self.types(), rows),
            self.on_conflict()
        )
    }

    /// The SQLite upsert of `rows` rows: a `VALUES` list.
    fn sqlite_upsert(&self, rows: usize) -> String {
        self.upsert(Dialect::Sqlite, rows)
    }
}

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
    fn new(table: &'static Table) -> Self {
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
    fn finish(self) -> Result<Vec<Arg>, String> {
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

/// A stored row being decoded: its columns by name, checked against the table.
pub struct Read<'r> {
    table: &'static Table,
    row: &'r DbRow,
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

/// A row type of a saga table: its one encode and one decode.
pub trait Row: Sized {
    /// Its table.
    fn table() -> &'static Table;

    /// Writes every stored column of the row.
    fn encode(&self, fields: &mut Fields);

    /// The row from a stored one (selected with [`Table::select_list`]).
    ///
    /// # Errors
    /// A column that is missing or does not decode.
    fn decode(read: &Read<'_>) -> Result<Self, sqlx::Error>;
}

/// `row` decoded as an `R`.
///
/// # Errors
/// A column that is missing or does not decode.
pub fn decode<R: Row>(row: &DbRow) -> Result<R, sqlx::Error> {
    R::decode(&Read {
        table: R::table(),
        row,
    })
}

/// The values of `row` in its table's column order.
fn encoded<R: Row>(row: &R) -> Result<Vec<Arg>, sqlx::Error> {
    let mut fields = Fields::new(R::table());
    row.encode(&mut fields);
    fields.finish().map_err(|e| sqlx::Error::Encode(e.into()))
}

/// Inserts `rows`, or updates the stored ones by each column's [`OnConflict`];
/// [`ROWS_PER_STATEMENT`] rows per statement.
///
/// # Errors
/// The database's error, or a row that does not fit its table.
pub async fn upsert<R: Row>(tx: &mut Tx, rows: &[R]) -> Result<(), sqlx::Error> {
    let table = R::table();
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut args = Args::with_capacity(chunk.len() * table.columns.len());
        for row in chunk {
            args.0.extend(encoded(row)?);
        }
        let sqlite;
        let sql = match tx.dialect() {
            Dialect::Postgres => table.pg_upsert(),
            Dialect::Sqlite => {
                sqlite = table.sqlite_upsert(chunk.len());
                sqlite.as_str()
            }
        };
        tx.fetch_rows_in(sql, table.types(), chunk.len(), args)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    static T: Table = Table {
        name: "t",
        read_from: "v",
        key: &["id"],
        columns: &[
            Column::new("id", Ty::Uuid).keep(),
            Column::new("name", Ty::Text),
            Column::new("note", Ty::Text).null(),
            Column::new("seen", Ty::Integer).rule("t.seen + excluded.seen"),
            Column::new("created_at", Ty::Time).keep(),
        ],
        derived: &[Column::new("extra", Ty::Json)],
        statements: Statements::new(),
    };

    fn fields() -> Fields {
        Fields::new(&T)
    }

    fn complete(f: &mut Fields) -> &mut Fields {
        f.uuid("id", Uuid::nil())
            .text("name", "a")
            .opt_text("note", None::<String>)
            .int("seen", 1)
            .time("created_at", DateTime::<Utc>::MIN_UTC)
    }

    #[test]
    fn given_every_column_when_finished_then_the_values_are_in_column_order() {
        let mut f = fields();
        // Written in another order than the definition's.
        f.time("created_at", DateTime::<Utc>::MIN_UTC)
            .int("seen", 1)
            .opt_text("note", None::<String>)
            .text("name", "a")
            .uuid("id", Uuid::nil());
        assert_eq!(
            f.finish(),
            Ok(vec![
                Arg::Uuid(Some(Uuid::nil())),
                Arg::Text(Some("a".into())),
                Arg::Text(None),
                Arg::Int(Some(1)),
                Arg::Time(Some(DateTime::<Utc>::MIN_UTC)),
            ])
        );
    }

    #[test]
    fn given_a_row_that_does_not_fit_when_finished_then_it_is_refused_naming_the_column() {
        let refused = |f: &mut Fields| std::mem::replace(f, fields()).finish().unwrap_err();
        let mut f = fields();
        complete(&mut f).text("colour", "red");
        assert_eq!(refused(&mut f), "t has no column colour");
        complete(&mut f).text("name", "twice");
        assert_eq!(refused(&mut f), "t.name is written twice");
        f.text("id", "not an id");
        assert!(refused(&mut f).starts_with("t.id is Uuid"));
        f.opt_text("name", None::<String>);
        assert_eq!(refused(&mut f), "t.name is NOT NULL");
        f.uuid("id", Uuid::nil()).text("name", "a");
        assert_eq!(refused(&mut f), "t.note is not written");
        complete(&mut f);
        assert!(f.finish().is_ok());
    }

    #[test]
    fn given_conflict_rules_then_the_upsert_keeps_replaces_and_applies_them() {
        assert_eq!(
            T.pg_upsert(),
            "INSERT INTO t (id, name, note, seen, created_at) SELECT * FROM \
             UNNEST($1::uuid[], $2::text[], $3::text[], $4::int8[], $5::timestamptz[]) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, note = excluded.note, \
             seen = t.seen + excluded.seen"
        );
        assert_eq!(
            T.sqlite_upsert(2),
            "INSERT INTO t (id, name, note, seen, created_at) VALUES \
             ($1, $2, $3, $4, $5), ($6, $7, $8, $9, $10) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, note = excluded.note, \
             seen = t.seen + excluded.seen"
        );
    }

    #[test]
    fn given_either_dialect_then_reads_select_the_columns_as_they_are() {
        assert_eq!(T.select_list(), "id, name, note, seen, created_at, extra");
        assert_eq!(T.ty("extra"), Some(Ty::Json));
        assert_eq!(Ty::Json.sql(), SqlType::Text);
        assert_eq!(Ty::Integer.sql(), SqlType::Int);
    }
}
