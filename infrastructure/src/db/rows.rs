//! Statements over many rows of arguments (multi-row `INSERT`s, `UPDATE … FROM` a list of
//! rows) on either database. SQLite gets a `VALUES` list; PostgreSQL gets one array per
//! column (`SELECT … FROM UNNEST($1::text[], …)`), so a statement has the same text
//! whatever its number of rows and is parsed and planned once per connection — a `VALUES`
//! list of N rows is a new statement for every N.

use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::Postgres;

use super::args::{values, Arg, Args};
use crate::sql::Dialect;

/// One column's values, gathered from the rows' arguments.
enum Column {
    Text(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
    Bool(Vec<bool>),
    Bytes(Vec<Vec<u8>>),
}

impl Column {
    fn of(first: &Arg, rows: usize) -> Self {
        match first {
            Arg::Text(_) => Self::Text(Vec::with_capacity(rows)),
            Arg::Int(_) => Self::Int(Vec::with_capacity(rows)),
            Arg::Bool(_) => Self::Bool(Vec::with_capacity(rows)),
            Arg::Bytes(_) => Self::Bytes(Vec::with_capacity(rows)),
        }
    }

    /// Adds a row's value (of the column's kind: see [`uniform`]).
    fn push(&mut self, arg: Arg) {
        match (self, arg) {
            (Self::Text(c), Arg::Text(v)) => c.push(v),
            (Self::Int(c), Arg::Int(v)) => c.push(v),
            (Self::Bool(c), Arg::Bool(v)) => c.push(v),
            (Self::Bytes(c), Arg::Bytes(v)) => c.push(v),
            _ => debug_assert!(false, "a column mixes kinds of values (see `uniform`)"),
        }
    }

    fn array_type(&self) -> &'static str {
        match self {
            Self::Text(_) => "text[]",
            Self::Int(_) => "int8[]",
            Self::Bool(_) => "bool[]",
            Self::Bytes(_) => "bytea[]",
        }
    }
}

/// A statement over `rows` rows of `casts.len()` arguments each (row by row in `args`,
/// each column cast with its entry of `casts`: `"::uuid"`, `"::timestamptz"`, `""`): the
/// rows as a source — `VALUES (…), (…)` or `SELECT … FROM UNNEST(…) AS u(…)` — that
/// `around` places in the statement (after `INSERT INTO t (cols)`, in a `WITH v (cols)
/// AS (…)`).
pub(crate) struct RowsStatement {
    sql: String,
    columns: Option<Vec<Column>>,
    args: Option<Args>,
}

impl RowsStatement {
    /// The statement for `dialect`.
    pub(crate) fn new(
        dialect: Dialect,
        casts: &[&str],
        rows: usize,
        args: Args,
        around: impl FnOnce(&str) -> String,
    ) -> Self {
        let width = casts.len();
        if dialect == Dialect::Postgres
            && rows > 0
            && args.len() == rows * width
            && uniform(&args, width)
        {
            let columns = transpose(args, width, rows);
            let mut select = Vec::with_capacity(width);
            let mut arrays = Vec::with_capacity(width);
            let mut names = Vec::with_capacity(width);
            for (i, (cast, column)) in casts.iter().zip(&columns).enumerate() {
                select.push(format!("u.c{i}{cast}"));
                arrays.push(format!("${}::{}", i + 1, column.array_type()));
                names.push(format!("c{i}"));
            }
            let source = format!(
                "SELECT {} FROM UNNEST({}) AS u({})",
                select.join(", "),
                arrays.join(", "),
                names.join(", ")
            );
            return Self {
                sql: around(&source),
                columns: Some(columns),
                args: None,
            };
        }
        Self {
            sql: around(&format!("VALUES {}", values(casts, rows))),
            columns: None,
            args: Some(args),
        }
    }

    /// The SQL (PostgreSQL's dialect; the caller translates it for SQLite).
    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }

    /// The row-by-row arguments of the `VALUES` form, if that is the form.
    pub(crate) fn take_args(&mut self) -> Option<Args> {
        self.args.take()
    }

    /// Binds the column arrays of the `UNNEST` form to `q`.
    pub(crate) fn bind_columns<'q>(
        &mut self,
        mut q: Query<'q, Postgres, PgArguments>,
    ) -> Query<'q, Postgres, PgArguments> {
        for column in self.columns.take().unwrap_or_default() {
            q = match column {
                Column::Text(v) => q.bind(v),
                Column::Int(v) => q.bind(v),
                Column::Bool(v) => q.bind(v),
                Column::Bytes(v) => q.bind(v),
            };
        }
        q
    }
}

/// Whether every column of the row-major `args` holds one kind of value.
fn uniform(args: &Args, width: usize) -> bool {
    let kind = |a: &Arg| std::mem::discriminant(a);
    args.0
        .iter()
        .enumerate()
        .all(|(i, a)| kind(a) == kind(&args.0[i % width]))
}

/// The row-major `args` (uniform, see [`uniform`]) as `width` columns.
fn transpose(args: Args, width: usize, rows: usize) -> Vec<Column> {
    let all = args.0;
    let mut columns: Vec<Column> = all[..width]
        .iter()
        .map(|first| Column::of(first, rows))
        .collect();
    for (i, arg) in all.into_iter().enumerate() {
        columns[i % width].push(arg);
    }
    columns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_gets_one_array_per_column_whatever_the_rows() {
        let args = Args::new().text("a").int(1).text("b").opt_int(None::<i64>);
        let insert = RowsStatement::new(Dialect::Postgres, &["::uuid", ""], 2, args, |rows| {
            format!("INSERT INTO t (x, n) {rows} ON CONFLICT DO NOTHING")
        });
        assert_eq!(
            insert.sql(),
            "INSERT INTO t (x, n) SELECT u.c0::uuid, u.c1 FROM UNNEST($1::text[], $2::int8[]) \
             AS u(c0, c1) ON CONFLICT DO NOTHING"
        );
    }

    #[test]
    fn sqlite_and_mixed_columns_get_a_values_list() {
        let args = || Args::new().text("a").int(1).int(2).int(3);
        let insert = |rows: &str| format!("INSERT INTO t (x, n) {rows}");
        let sqlite = RowsStatement::new(Dialect::Sqlite, &["", ""], 2, args(), insert);
        assert_eq!(
            sqlite.sql(),
            "INSERT INTO t (x, n) VALUES ($1, $2), ($3, $4)"
        );
        // Column x holds a text and an integer: no single array type.
        let mixed = RowsStatement::new(Dialect::Postgres, &["", ""], 2, args(), insert);
        assert!(mixed.sql().contains("VALUES"), "{}", mixed.sql());
    }
}
