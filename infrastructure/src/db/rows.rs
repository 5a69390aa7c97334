//! Statements over many rows of arguments (multi-row `INSERT`s, `UPDATE … FROM` a list of
//! rows) on either database, built for each dialect from the columns' [`SqlType`]s. SQLite
//! gets a `VALUES` list of plain parameters; PostgreSQL gets one natively typed array per
//! column (`SELECT * FROM UNNEST($1::uuid[], $2::text[], …)`), so a statement has the same
//! text whatever its number of rows and is parsed and planned once per connection — a
//! `VALUES` list of N rows is a new statement for every N.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::Postgres;
use uuid::Uuid;

use super::args::{values, Arg, Args};
use crate::sql::Dialect;

/// The type of a column of a multi-row statement: which [`Arg`]s it takes and, on
/// PostgreSQL, the array its values are bound as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlType {
    /// An id ([`Arg::Uuid`]): `uuid[]`.
    Uuid,
    /// Text ([`Arg::Text`]): `text[]`.
    Text,
    /// A JSON document written to a PostgreSQL `json` column ([`Arg::Text`]): bound as
    /// `text[]` and read as `json[]`, which keeps the document as written (a `jsonb`
    /// parameter would reorder it). Text on SQLite.
    Json,
    /// A 64-bit integer ([`Arg::Int`]): `int8[]` (an `integer` column takes it too).
    Int,
    /// A boolean ([`Arg::Bool`]): `bool[]`.
    Bool,
    /// A time ([`Arg::Time`]): `timestamptz[]`.
    Time,
}

impl SqlType {
    /// The PostgreSQL array expression of parameter `$n` of this type.
    fn pg_array(self) -> &'static str {
        match self {
            Self::Uuid => "uuid[]",
            Self::Text => "text[]",
            Self::Json => "text[]::json[]",
            Self::Int => "int8[]",
            Self::Bool => "bool[]",
            Self::Time => "timestamptz[]",
        }
    }

    /// Whether `arg` is a value of this type.
    pub(crate) fn takes(self, arg: &Arg) -> bool {
        matches!(
            (self, arg),
            (Self::Uuid, Arg::Uuid(_))
                | (Self::Text | Self::Json, Arg::Text(_))
                | (Self::Int, Arg::Int(_))
                | (Self::Bool, Arg::Bool(_))
                | (Self::Time, Arg::Time(_))
        )
    }
}

/// The source of `rows` rows of `types` for `dialect`, its parameters from `$1`: on
/// PostgreSQL `SELECT * FROM UNNEST($1::uuid[], …)` (one array per column, whatever the
/// rows), on SQLite `VALUES ($1, $2), ($3, $4)`. It goes after `INSERT INTO t (cols)` or
/// in a `WITH v (cols) AS (…)`.
pub fn rows_source(dialect: Dialect, types: &[SqlType], rows: usize) -> String {
    match dialect {
        Dialect::Postgres => {
            let mut sql = String::from("SELECT * FROM UNNEST(");
            for (i, ty) in types.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push('$');
                sql.push_str(&(i + 1).to_string());
                sql.push_str("::");
                sql.push_str(ty.pg_array());
            }
            sql.push(')');
            sql
        }
        Dialect::Sqlite => format!("VALUES {}", values(types.len(), rows)),
    }
}

/// Checks that `args` are `rows` rows of `types`, row by row: a statement whose arguments
/// do not fit its columns is refused before it reaches either database (alike on both).
pub(crate) fn check(types: &[SqlType], rows: usize, args: &Args) -> Result<(), sqlx::Error> {
    let refuse = |why: String| Err(sqlx::Error::Encode(why.into()));
    if args.len() != rows * types.len() {
        return refuse(format!(
            "{} arguments for {rows} rows of {} columns",
            args.len(),
            types.len()
        ));
    }
    for (i, arg) in args.0.iter().enumerate() {
        let ty = types[i % types.len()];
        if !ty.takes(arg) {
            return refuse(format!("column {} is {ty:?}, not {arg:?}", i % types.len()));
        }
    }
    Ok(())
}

/// One column's values, bound to a PostgreSQL statement as one array.
pub(crate) enum PgArray {
    Uuid(Vec<Option<Uuid>>),
    Text(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
    Bool(Vec<Option<bool>>),
    Time(Vec<Option<DateTime<Utc>>>),
}

impl PgArray {
    fn of(ty: SqlType, rows: usize) -> Self {
        match ty {
            SqlType::Uuid => Self::Uuid(Vec::with_capacity(rows)),
            SqlType::Text | SqlType::Json => Self::Text(Vec::with_capacity(rows)),
            SqlType::Int => Self::Int(Vec::with_capacity(rows)),
            SqlType::Bool => Self::Bool(Vec::with_capacity(rows)),
            SqlType::Time => Self::Time(Vec::with_capacity(rows)),
        }
    }

    /// Adds a value ([`check`] made sure it is of the column's type).
    fn push(&mut self, arg: Arg) {
        match (self, arg) {
            (Self::Uuid(a), Arg::Uuid(v)) => a.push(v),
            (Self::Text(a), Arg::Text(v)) => a.push(v),
            (Self::Int(a), Arg::Int(v)) => a.push(v),
            (Self::Bool(a), Arg::Bool(v)) => a.push(v),
            (Self::Time(a), Arg::Time(v)) => a.push(v),
            _ => debug_assert!(false, "a value of another type (see `check`)"),
        }
    }

    /// The checked, row-major `args` as one array per column of `types`.
    pub(crate) fn columns(types: &[SqlType], rows: usize, args: Args) -> Vec<Self> {
        let mut columns: Vec<Self> = types.iter().map(|ty| Self::of(*ty, rows)).collect();
        for (i, arg) in args.0.into_iter().enumerate() {
            columns[i % types.len()].push(arg);
        }
        columns
    }

    /// Binds the array to `q`.
    pub(crate) fn bind(
        self,
        q: Query<'_, Postgres, PgArguments>,
    ) -> Query<'_, Postgres, PgArguments> {
        match self {
            Self::Uuid(a) => q.bind(a),
            Self::Text(a) => q.bind(a),
            Self::Int(a) => q.bind(a),
            Self::Bool(a) => q.bind(a),
            Self::Time(a) => q.bind(a),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: &[SqlType] = &[SqlType::Uuid, SqlType::Int, SqlType::Json, SqlType::Time];

    #[test]
    fn given_postgres_when_the_rows_source_is_built_then_it_is_one_typed_array_per_column() {
        assert_eq!(
            rows_source(Dialect::Postgres, TYPES, 3),
            "SELECT * FROM UNNEST($1::uuid[], $2::int8[], $3::text[]::json[], $4::timestamptz[])"
        );
        assert_eq!(
            rows_source(Dialect::Postgres, TYPES, 1),
            rows_source(Dialect::Postgres, TYPES, 500)
        );
    }

    #[test]
    fn given_sqlite_when_the_rows_source_is_built_then_it_is_a_values_list_without_casts() {
        assert_eq!(
            rows_source(Dialect::Sqlite, &TYPES[..2], 2),
            "VALUES ($1, $2), ($3, $4)"
        );
    }

    #[test]
    fn given_arguments_that_do_not_fit_the_columns_when_checked_then_they_are_refused() {
        let row = |args: Args| args.uuid(Uuid::nil()).opt_int(None);
        let two = row(row(Args::new()));
        assert!(check(&TYPES[..2], 2, &two).is_ok());
        assert!(check(&TYPES[..2], 3, &two).is_err());
        let text_id = Args::new().text(Uuid::nil().to_string()).int(1);
        assert!(check(&TYPES[..2], 1, &text_id).is_err());
        let columns = PgArray::columns(&TYPES[..2], 2, two);
        assert!(
            matches!(&columns[..], [PgArray::Uuid(ids), PgArray::Int(ns)]
            if ids.len() == 2 && ns == &[None, None])
        );
    }
}
