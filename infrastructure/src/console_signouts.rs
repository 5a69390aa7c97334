//! Console sign-outs, shared by every replica through the database (migration
//! `0016_console_signouts.sql`): a signed-out session's cookie is refused everywhere from
//! the moment the sign-out answered, though the cookie itself would still verify.

use pm_application::AppError;

use crate::db::Args;
use crate::processor::store::store_error;
use crate::Database;

/// The sign-outs of one database.
#[derive(Debug, Clone)]
pub struct DbConsoleSignouts {
    db: Database,
}

impl DbConsoleSignouts {
    /// Sign-outs kept in `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// Ends session `id` (whose cookie expires at `expires`, Unix seconds) on every
    /// replica, and forgets the sign-outs of sessions that have expired by `now`.
    ///
    /// # Errors
    /// [`AppError`] from the store.
    pub async fn sign_out(&self, id: &str, expires: i64, now: i64) -> Result<(), AppError> {
        self.db
            .execute(
                "INSERT INTO console_signouts (session_id, expires_at) VALUES ($1, $2) \
                 ON CONFLICT (session_id) DO NOTHING",
                Args::new().text(id).int(expires),
            )
            .await
            .map_err(store_error)?;
        self.db
            .execute(
                "DELETE FROM console_signouts WHERE expires_at < $1",
                Args::new().int(now),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    /// Whether session `id` was signed out.
    ///
    /// # Errors
    /// [`AppError`] from the store.
    pub async fn signed_out(&self, id: &str) -> Result<bool, AppError> {
        let row = self
            .db
            .fetch_optional(
                "SELECT 1 AS out FROM console_signouts WHERE session_id = $1",
                Args::new().text(id),
            )
            .await
            .map_err(store_error)?;
        Ok(row.is_some())
    }
}
