//! `saga_deadlines`: an armed deadline ([`ArmedDeadline`]), one per instance and kind; arming
//! it again moves it.

use pm_domain::saga::{Deadline, DeadlineKind, Instance};
use uuid::Uuid;

use crate::sagas::table::{Column, Fields, Read, Row, Statements, Table, Ty};

/// The table.
pub static DEADLINES: Table = Table {
    name: "saga_deadlines",
    read_from: "saga_deadlines",
    key: &["aggregate_type", "aggregate_id", "kind"],
    columns: &[
        Column::new("aggregate_type", Ty::Text).keep(),
        Column::new("aggregate_id", Ty::Uuid).keep(),
        Column::new("kind", Ty::Text).keep(),
        Column::new("conversation_id", Ty::Uuid),
        Column::new("due_at", Ty::Time),
        Column::new("epoch", Ty::BigInt),
    ],
    derived: &[],
    statements: Statements::new(),
};

/// A deadline with its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmedDeadline {
    /// The conversation of its instance.
    pub conversation_id: Uuid,
    /// The deadline.
    pub deadline: Deadline,
}

fn corrupt(col: &str, what: String) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: col.to_string(),
        source: what.into(),
    }
}

impl Row for ArmedDeadline {
    fn table() -> &'static Table {
        &DEADLINES
    }

    fn encode(&self, f: &mut Fields) {
        let d = &self.deadline;
        f.text("aggregate_type", d.instance.aggregate_type())
            .uuid("aggregate_id", d.instance.id())
            .text("kind", d.kind.as_str())
            .uuid("conversation_id", self.conversation_id)
            .time("due_at", d.due_at)
            .int("epoch", d.epoch);
    }

    fn decode(r: &Read<'_>) -> Result<Self, sqlx::Error> {
        let aggregate_type = r.text("aggregate_type")?;
        let instance = Instance::from_parts(&aggregate_type, r.uuid("aggregate_id")?)
            .ok_or_else(|| corrupt("aggregate_type", format!("unknown value {aggregate_type}")))?;
        Ok(Self {
            conversation_id: r.uuid("conversation_id")?,
            deadline: Deadline {
                instance,
                kind: r.parsed("kind", DeadlineKind::parse)?,
                due_at: r.time("due_at")?,
                epoch: r.int("epoch")?,
            },
        })
    }
}
