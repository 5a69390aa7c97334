//! The saga tables, one definition each ([`super::table`]): the row type a table stores,
//! its columns and its encode and decode. `commit`, `load` and `query` build their
//! statements from these; a new column is added to the row type, its table's definition
//! and the two migrations.

mod agents;
mod anomalies;
mod deadlines;
mod inbox;
mod sessions;
mod tool_calls;
mod turns;

pub use agents::AGENTS;
pub use anomalies::ANOMALIES;
pub use deadlines::{ArmedDeadline, DEADLINES};
pub use inbox::{Queued, INBOX};
pub use sessions::SESSIONS;
pub use tool_calls::TOOL_CALLS;
pub use turns::TURNS;

use super::table::Table;

/// Every saga table with a definition (the migrations' columns must equal theirs).
pub fn all() -> [&'static Table; 7] {
    [
        &SESSIONS,
        &AGENTS,
        &TURNS,
        &TOOL_CALLS,
        &INBOX,
        &DEADLINES,
        &ANOMALIES,
    ]
}
