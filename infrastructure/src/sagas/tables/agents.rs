//! `saga_agents`: an agent ([`AgentView`]). Its inbox is `saga_agent_inbox`
//! ([`super::INBOX`]); reads select from the view `agents`, which adds it as
//! `queued_turn_ids`.

use pm_domain::saga::{AgentRole, AgentState, AgentView, HeadStatus};

use crate::sagas::table::{Column, Fields, Read, Row, Statements, Table, Ty};

/// The table.
pub static AGENTS: Table = Table {
    name: "saga_agents",
    read_from: "agents",
    key: &["id"],
    columns: &[
        Column::new("id", Ty::Uuid).keep(),
        Column::new("conversation_id", Ty::Uuid).keep(),
        Column::new("actor_id", Ty::Uuid).null().keep(),
        Column::new("role", Ty::Text).keep(),
        Column::new("state", Ty::Text),
        Column::new("turn_epoch", Ty::BigInt),
        Column::new("active_turn_id", Ty::Uuid).null(),
        Column::new("created_at", Ty::Time).keep(),
        Column::new("updated_at", Ty::Time),
        Column::new("head_status", Ty::Text),
        Column::new("tokens_used", Ty::BigInt),
    ],
    derived: &[Column::new("queued_turn_ids", Ty::Json)],
    statements: Statements::new(),
};

impl Row for AgentView {
    fn table() -> &'static Table {
        &AGENTS
    }

    fn encode(&self, f: &mut Fields) {
        f.uuid("id", self.id)
            .uuid("conversation_id", self.conversation_id)
            .opt_uuid("actor_id", self.actor_id)
            .text("role", self.role.as_str())
            .text("state", self.state.as_str())
            .int("turn_epoch", self.turn_epoch)
            .opt_uuid("active_turn_id", self.active_turn_id)
            .text("head_status", self.head_status.as_str())
            .count("tokens_used", self.tokens_used)
            .time("created_at", self.created_at)
            .time("updated_at", self.updated_at);
    }

    fn decode(r: &Read<'_>) -> Result<Self, sqlx::Error> {
        Ok(Self {
            id: r.uuid("id")?,
            conversation_id: r.uuid("conversation_id")?,
            actor_id: r.opt_uuid("actor_id")?,
            role: r.parsed("role", AgentRole::parse)?,
            state: r.parsed("state", AgentState::parse)?,
            turn_epoch: r.int("turn_epoch")?,
            active_turn_id: r.opt_uuid("active_turn_id")?,
            head_status: r.parsed("head_status", HeadStatus::parse)?,
            queued_turn_ids: r.json("queued_turn_ids")?,
            tokens_used: r.count("tokens_used")?,
            created_at: r.time("created_at")?,
            updated_at: r.time("updated_at")?,
        })
    }
}
