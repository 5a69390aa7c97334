//! `saga_agent_inbox`: a turn queued in its agent's inbox ([`Queued`]), in the order of the
//! runes that queued them.

use uuid::Uuid;

use crate::sagas::table::{Column, Fields, Read, Row, Statements, Table, Ty};

/// The table.
pub static INBOX: Table = Table {
    name: "saga_agent_inbox",
    read_from: "saga_agent_inbox",
    key: &["agent_id", "turn_id"],
    columns: &[
        Column::new("agent_id", Ty::Uuid).keep(),
        Column::new("turn_id", Ty::Uuid).keep(),
        Column::new("conversation_id", Ty::Uuid).keep(),
        Column::new("position", Ty::BigInt).keep(),
    ],
    derived: &[],
    statements: Statements::new(),
};

/// A queued turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// The agent whose inbox it is in.
    pub agent_id: Uuid,
    /// The turn.
    pub turn_id: Uuid,
    /// Their conversation.
    pub conversation_id: Uuid,
    /// The sequence of the agent rune that queued it (the inbox's order).
    pub position: i64,
}

impl Row for Queued {
    fn table() -> &'static Table {
        &INBOX
    }

    fn encode(&self, f: &mut Fields) {
        f.uuid("agent_id", self.agent_id)
            .uuid("turn_id", self.turn_id)
            .uuid("conversation_id", self.conversation_id)
            .int("position", self.position);
    }

    fn decode(r: &Read<'_>) -> Result<Self, sqlx::Error> {
        Ok(Self {
            agent_id: r.uuid("agent_id")?,
            turn_id: r.uuid("turn_id")?,
            conversation_id: r.uuid("conversation_id")?,
            position: r.int("position")?,
        })
    }
}
