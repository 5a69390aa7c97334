//! `saga_turns`: a turn ([`TurnView`]); its tool calls are `saga_tool_calls`
//! ([`super::TOOL_CALLS`]).

use pm_domain::saga::{Lease, TurnKind, TurnState, TurnView};

use crate::sagas::table::{Column, Fields, Read, Row, Statements, Table, Ty};

/// The table.
pub static TURNS: Table = Table {
    name: "saga_turns",
    read_from: "saga_turns",
    key: &["id"],
    columns: &[
        Column::new("id", Ty::Uuid).keep(),
        Column::new("agent_id", Ty::Uuid).keep(),
        Column::new("conversation_id", Ty::Uuid).keep(),
        Column::new("kind", Ty::Text).keep(),
        Column::new("task_id", Ty::Uuid).null().keep(),
        Column::new("input", Ty::Json).keep(),
        Column::new("state", Ty::Text),
        Column::new("turn_epoch", Ty::BigInt).null(),
        Column::new("terminal_rune", Ty::Text).null(),
        Column::new("deliverable", Ty::Uuid).null(),
        Column::new("deliverable_reason", Ty::Text).null(),
        Column::new("created_at", Ty::Time).keep(),
        Column::new("updated_at", Ty::Time),
        Column::new("lease_worker", Ty::Text).null(),
        Column::new("lease_epoch", Ty::BigInt).null(),
        // A heartbeat moves the expiry of the same claim in the store only: a row written
        // for that claim keeps the later expiry.
        Column::new("lease_expires_at", Ty::Time).null().rule(
            "CASE WHEN excluded.lease_epoch = saga_turns.lease_epoch \
             AND saga_turns.lease_expires_at > excluded.lease_expires_at \
             THEN saga_turns.lease_expires_at ELSE excluded.lease_expires_at END",
        ),
        Column::new("claims", Ty::Integer),
        Column::new("input_tokens", Ty::BigInt),
        Column::new("output_tokens", Ty::BigInt),
    ],
    derived: &[],
    statements: Statements::new(),
};

impl Row for TurnView {
    fn table() -> &'static Table {
        &TURNS
    }

    fn encode(&self, f: &mut Fields) {
        let lease = self.lease.as_ref();
        f.uuid("id", self.id)
            .uuid("agent_id", self.agent_id)
            .uuid("conversation_id", self.conversation_id)
            .text("kind", self.kind.as_str())
            .opt_uuid("task_id", self.task_id)
            .json("input", &self.input)
            .text("state", self.state.as_str())
            .opt_int("turn_epoch", self.turn_epoch)
            .opt_text("terminal_rune", self.terminal_rune.clone())
            .opt_uuid("deliverable", self.deliverable)
            .opt_text("deliverable_reason", self.deliverable_reason.clone())
            .opt_text("lease_worker", lease.map(|l| l.worker.clone()))
            .opt_int("lease_epoch", lease.map(|l| l.turn_epoch))
            .opt_time("lease_expires_at", lease.map(|l| l.lease_expires_at))
            .int("claims", i64::from(self.claims))
            .count("input_tokens", self.input_tokens)
            .count("output_tokens", self.output_tokens)
            .time("created_at", self.created_at)
            .time("updated_at", self.updated_at);
    }

    /// The turn without its tool calls (a read adds them).
    fn decode(r: &Read<'_>) -> Result<Self, sqlx::Error> {
        let lease = match (
            r.opt_text("lease_worker")?,
            r.opt_int("lease_epoch")?,
            r.opt_time("lease_expires_at")?,
        ) {
            (Some(worker), Some(turn_epoch), Some(lease_expires_at)) => Some(Lease {
                worker,
                turn_epoch,
                lease_expires_at,
            }),
            _ => None,
        };
        Ok(Self {
            id: r.uuid("id")?,
            agent_id: r.uuid("agent_id")?,
            conversation_id: r.uuid("conversation_id")?,
            kind: r.parsed("kind", TurnKind::parse)?,
            task_id: r.opt_uuid("task_id")?,
            input: r.json("input")?,
            state: r.parsed("state", TurnState::parse)?,
            turn_epoch: r.opt_int("turn_epoch")?,
            terminal_rune: r.opt_text("terminal_rune")?,
            deliverable: r.opt_uuid("deliverable")?,
            deliverable_reason: r.opt_text("deliverable_reason")?,
            lease,
            claims: r.count("claims")?,
            input_tokens: r.count("input_tokens")?,
            output_tokens: r.count("output_tokens")?,
            tool_calls: Vec::new(),
            created_at: r.time("created_at")?,
            updated_at: r.time("updated_at")?,
        })
    }
}
