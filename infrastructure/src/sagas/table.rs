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

use crate::db::{rows_source, Arg, Args, DbRow, SqlType, Tx, ROWS_PER_STATEMENT};
use crate::sql::Dialect;

mod fields;
mod read;

pub use fields::Fields;
pub use read::Read;

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
mod tests;
