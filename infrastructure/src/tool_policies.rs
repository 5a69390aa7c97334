//! The tool policies in force, read from the log-derived `tool_policies` table (migration
//! `0015_tool_policies.sql`), which commits with each policy's fact: a batch reported after
//! a policy's `PUT` answered is decided by it, on every replica. Read once per batch — a
//! handful of short rows, cheaper than keeping caches of many replicas in step.

use pm_application::AppError;
use pm_domain::tool_policy::ToolPolicySet;

use crate::db::Args;
use crate::processor::store::store_error;
use crate::Database;

/// The policies of one database.
#[derive(Debug, Clone)]
pub struct DbToolPolicies {
    db: Database,
}

fn corrupt(name: &str, e: serde_json::Error) -> AppError {
    AppError::Internal(format!(
        "the stored tool policy {name} does not read back: {e}"
    ))
}

impl DbToolPolicies {
    /// Policies read from `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// Every policy in force, by name.
    ///
    /// # Errors
    /// [`AppError`] from the store, or a stored policy that does not parse.
    pub async fn all(&self) -> Result<Vec<ToolPolicySet>, AppError> {
        let rows = self
            .db
            .fetch_all(
                "SELECT name, policy FROM tool_policies ORDER BY name",
                Args::new(),
            )
            .await
            .map_err(store_error)?;
        rows.iter()
            .map(|row| {
                let name = row.str("name").map_err(store_error)?;
                let raw = row.str("policy").map_err(store_error)?;
                serde_json::from_str(raw).map_err(|e| corrupt(name, e))
            })
            .collect()
    }

    /// The policy named `name`, if one is in force.
    ///
    /// # Errors
    /// As [`DbToolPolicies::all`].
    pub async fn get(&self, name: &str) -> Result<Option<ToolPolicySet>, AppError> {
        let row = self
            .db
            .fetch_optional(
                "SELECT policy FROM tool_policies WHERE name = $1",
                Args::new().text(name),
            )
            .await
            .map_err(store_error)?;
        row.map(|row| {
            let raw = row.str("policy").map_err(store_error)?;
            serde_json::from_str(raw).map_err(|e| corrupt(name, e))
        })
        .transpose()
    }
}
