//! Which database errors are transient: worth retrying as they are (connection trouble,
//! lock contention, serialization failures, an operator ending the connection) rather than
//! a property of the statement or the data.

/// Whether `e` is transient.
pub fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.to_string()).unwrap_or_default();
            if code.len() == 5 {
                // PostgreSQL SQLSTATE classes 08 (connection), 40 (rollback: serialization,
                // deadlock), 53 (resources), 57 (operator intervention: shutdown,
                // terminated connection).
                ["08", "40", "53", "57"]
                    .iter()
                    .any(|class| code.starts_with(class))
            } else {
                // SQLite result codes: BUSY (5) and LOCKED (6), extended codes included.
                code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        _ => false,
    }
}
