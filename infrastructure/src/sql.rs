//! One SQL text for both databases. Statements are written in PostgreSQL's dialect with
//! explicit casts on parameters and columns (`$1::uuid`, `id::text`); for SQLite the casts
//! are removed (SQLite binds `$N` by number, and stores ids and times as text). The
//! statements run through [`crate::db::Database`] and [`crate::db::Tx`], which apply the
//! dialect.

use std::borrow::Cow;

/// The SQL dialect of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres,
    /// SQLite.
    Sqlite,
}

const CASTS: &[&str] = &[
    "::timestamptz",
    "::uuid",
    "::text",
    "::bigint",
    "::integer",
    "::jsonb",
    "::json",
    "::xid8",
];

impl Dialect {
    /// The dialect a `DATABASE_URL` names (`postgres://`, `postgresql://`, `sqlite:`), or
    /// `None`: what [`crate::Database::connect`] accepts, so that a command can tell which
    /// store it would open before opening it (opening a SQLite URL creates the file).
    pub fn of_url(url: &str) -> Option<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Self::Postgres)
        } else if url.starts_with("sqlite:") {
            Some(Self::Sqlite)
        } else {
            None
        }
    }

    /// The statement for this dialect.
    pub fn sql<'a>(self, pg: &'a str) -> Cow<'a, str> {
        match self {
            Self::Postgres => Cow::Borrowed(pg),
            Self::Sqlite => {
                let mut s = pg.replace(" FOR UPDATE", "");
                for cast in CASTS {
                    s = s.replace(cast, "");
                }
                Cow::Owned(s)
            }
        }
    }

    /// A column type for DDL: `uuid` and `timestamptz` are `text` in SQLite.
    pub fn ty(self, pg_type: &'static str) -> &'static str {
        match (self, pg_type) {
            (Self::Sqlite, "uuid" | "timestamptz") => "text",
            (Self::Sqlite, "bigint") => "integer",
            (_, t) => t,
        }
    }

    /// `::<ty>` on PostgreSQL, nothing on SQLite (for SQL built piece by piece).
    pub fn cast(self, ty: &'static str) -> &'static str {
        match (self, ty) {
            (Self::Sqlite, _) => "",
            (_, "uuid") => "::uuid",
            (_, "timestamptz") => "::timestamptz",
            (_, "text") => "::text",
            (_, _) => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_urls_when_classified_then_the_connecting_rule_holds() {
        assert_eq!(
            Dialect::of_url("postgres://u@h/db"),
            Some(Dialect::Postgres)
        );
        assert_eq!(
            Dialect::of_url("postgresql://h/db"),
            Some(Dialect::Postgres)
        );
        assert_eq!(
            Dialect::of_url("sqlite://data/pm.db"),
            Some(Dialect::Sqlite)
        );
        assert_eq!(Dialect::of_url("sqlite::memory:"), Some(Dialect::Sqlite));
        assert_eq!(Dialect::of_url("mysql://h/db"), None);
    }

    #[test]
    fn sqlite_drops_casts_and_row_locks() {
        let pg = "SELECT id::text FROM t WHERE id = $1::uuid AND at > $2::timestamptz FOR UPDATE";
        assert_eq!(Dialect::Postgres.sql(pg), pg);
        assert_eq!(
            Dialect::Sqlite.sql(pg),
            "SELECT id FROM t WHERE id = $1 AND at > $2"
        );
    }
}
