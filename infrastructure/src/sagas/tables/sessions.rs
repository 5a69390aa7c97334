//! `saga_sessions`: a conversation's session ([`SessionView`]).

use pm_domain::saga::{ConversationState, SessionState, SessionView};

use crate::sagas::table::{Column, Fields, Read, Row, Statements, Table, Ty};

/// The table.
pub static SESSIONS: Table = Table {
    name: "saga_sessions",
    read_from: "saga_sessions",
    key: &["conversation_id"],
    columns: &[
        Column::new("conversation_id", Ty::Uuid).keep(),
        Column::new("state", Ty::Text),
        Column::new("conversation_state", Ty::Text).null(),
        Column::new("root_agent_id", Ty::Uuid).null(),
        Column::new("agent_ids", Ty::Json),
        Column::new("waiting_checkpoint_id", Ty::Uuid).null(),
        // Since when the session waits: kept while it goes on waiting.
        Column::new("waiting_since", Ty::Time).null().rule(
            "CASE WHEN excluded.conversation_state = 'waiting_user' \
             AND saga_sessions.conversation_state = 'waiting_user' \
             THEN saga_sessions.waiting_since ELSE excluded.waiting_since END",
        ),
        Column::new("consecutive_errors", Ty::Integer),
        Column::new("tokens_used", Ty::BigInt),
        Column::new("token_budget", Ty::BigInt).null(),
        Column::new("created_at", Ty::Time).keep(),
        Column::new("updated_at", Ty::Time),
    ],
    derived: &[],
    statements: Statements::new(),
};

impl Row for SessionView {
    fn table() -> &'static Table {
        &SESSIONS
    }

    fn encode(&self, f: &mut Fields) {
        f.uuid("conversation_id", self.conversation_id)
            .text("state", self.state.as_str())
            .opt_text(
                "conversation_state",
                self.conversation_state.map(|c| c.as_str()),
            )
            .opt_uuid("root_agent_id", self.root_agent_id)
            .json("agent_ids", &self.agent_ids)
            .opt_uuid("waiting_checkpoint_id", self.waiting_checkpoint_id)
            .opt_time("waiting_since", self.waiting_since)
            .int("consecutive_errors", i64::from(self.consecutive_errors))
            .count("tokens_used", self.tokens_used)
            .opt_count("token_budget", self.token_budget)
            .time("created_at", self.created_at)
            .time("updated_at", self.updated_at);
    }

    fn decode(r: &Read<'_>) -> Result<Self, sqlx::Error> {
        Ok(Self {
            conversation_id: r.uuid("conversation_id")?,
            state: r.parsed("state", SessionState::parse)?,
            conversation_state: r.opt_parsed("conversation_state", ConversationState::parse)?,
            root_agent_id: r.opt_uuid("root_agent_id")?,
            agent_ids: r.json("agent_ids")?,
            waiting_checkpoint_id: r.opt_uuid("waiting_checkpoint_id")?,
            waiting_since: r.opt_time("waiting_since")?,
            consecutive_errors: r.count("consecutive_errors")?,
            tokens_used: r.count("tokens_used")?,
            token_budget: r.opt_count("token_budget")?,
            created_at: r.time("created_at")?,
            updated_at: r.time("updated_at")?,
        })
    }
}
