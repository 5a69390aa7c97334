//! Queries over the read model's views (`actors`, `conversations`, `tasks`, …), with
//! keyset pagination. Answers are JSON objects shaped as the API shows them.

/// Appends `AND (<column>, id) > (<cursor time>, <cursor id>)` for keyset pagination by a
/// time column.
macro_rules! after_cursor {
    ($q:ident, $d:ident, $column:literal, $cursor:expr) => {
        if let Some(c) = &$cursor {
            $q.push(concat!(" AND (", $column, ", id) > ("))
                .push_bind(c.k.clone())
                .push($d.cast("timestamptz"))
                .push(", ")
                .push_bind(c.id.clone())
                .push($d.cast("uuid"))
                .push(")");
        }
    };
}

mod conversations;
pub(crate) mod rows;
mod single;
mod tasks;

use pm_application::AppError;

use crate::Database;

pub use conversations::ConversationFilter;
pub use tasks::{StatsGroup, TaskFilter};

/// Read access to the read model.
#[derive(Debug, Clone)]
pub struct ReadModel {
    db: Database,
}

/// A page request: at most `limit` items after `cursor`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// 1..=500.
    pub limit: u32,
    /// The previous page's `next_cursor`.
    pub cursor: Option<super::PageCursor>,
}

impl ReadModel {
    /// Queries against `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

/// Connection trouble is `Unavailable` (retry later); anything else is a bug (`Internal`).
fn unavailable(e: sqlx::Error) -> AppError {
    if super::apply::is_transient(&e) {
        AppError::Unavailable(e.to_string())
    } else {
        AppError::Internal(e.to_string())
    }
}
