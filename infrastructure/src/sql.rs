//! The two SQL dialects. A statement is written for the dialect it runs on and runs as
//! written ([`crate::db`]): most statements read the same in both (typed arguments and
//! row accessors make casts unnecessary), and where the dialects really differ — a row
//! lock, a PostgreSQL-only statement (advisory locks, `pg_*` views, arrays) — both
//! texts are written out ([`Sql`], or a `match` on the [`Dialect`]). No statement is
//! translated from one dialect to the other.

/// The SQL dialect of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres,
    /// SQLite.
    Sqlite,
}

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

    /// A column type for DDL: `uuid` and `timestamptz` are `text` in SQLite, `boolean` an
    /// `integer` (0 or 1, as the migrations' booleans).
    pub fn ty(self, pg_type: &'static str) -> &'static str {
        match (self, pg_type) {
            (Self::Sqlite, "uuid" | "timestamptz") => "text",
            (Self::Sqlite, "bigint" | "boolean") => "integer",
            (_, t) => t,
        }
    }
}

/// A statement whose text differs between the dialects, both written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sql {
    /// The PostgreSQL text.
    pub pg: &'static str,
    /// The SQLite text.
    pub sqlite: &'static str,
}

impl Sql {
    /// The text for `dialect`.
    pub const fn of(&self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::Postgres => self.pg,
            Dialect::Sqlite => self.sqlite,
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
    fn given_a_statement_written_per_dialect_when_chosen_then_each_dialect_gets_its_own_text() {
        const LOCKED: Sql = Sql {
            pg: "SELECT generation FROM processors WHERE name = $1 FOR UPDATE",
            sqlite: "SELECT generation FROM processors WHERE name = $1",
        };
        assert_eq!(LOCKED.of(Dialect::Postgres), LOCKED.pg);
        assert_eq!(LOCKED.of(Dialect::Sqlite), LOCKED.sqlite);
    }
}
