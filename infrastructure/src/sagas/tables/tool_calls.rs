//! `saga_tool_calls`: a tool call in its place in its turn ([`PlacedCall`]). Its id is
//! derived from its turn and call id; what the worker reported (`tool_name`, `arguments`,
//! `requires_approval`, `timeout_ms`, `policy`, `reported_by`) and its place never change.

use pm_application::sagas::PlacedCall;
use pm_domain::saga::{ids, ToolCallState, ToolCallView};

use crate::sagas::table::{Column, Fields, Read, Row, Statements, Table, Ty};

/// The table.
pub static TOOL_CALLS: Table = Table {
    name: "saga_tool_calls",
    read_from: "saga_tool_calls",
    key: &["id"],
    columns: &[
        Column::new("id", Ty::Uuid).keep(),
        Column::new("turn_id", Ty::Uuid).keep(),
        Column::new("conversation_id", Ty::Uuid).keep(),
        Column::new("call_id", Ty::Text).keep(),
        Column::new("ordinal", Ty::BigInt).keep(),
        Column::new("tool_name", Ty::Text).keep(),
        Column::new("arguments", Ty::Json).keep(),
        Column::new("state", Ty::Text),
        Column::new("requires_approval", Ty::Bool).keep(),
        Column::new("policy_reason", Ty::Text).null(),
        Column::new("approver", Ty::Text).null(),
        Column::new("timeout_ms", Ty::BigInt).null().keep(),
        Column::new("result", Ty::Json).null(),
        Column::new("created_at", Ty::Time).keep(),
        Column::new("updated_at", Ty::Time),
        Column::new("policy", Ty::Text).null().keep(),
        Column::new("reported_by", Ty::Text).null().keep(),
        Column::new("approvers", Ty::Json).null(),
        Column::new("on_behalf_of", Ty::Uuid).null(),
        Column::new("comment", Ty::Text).null(),
    ],
    derived: &[],
    statements: Statements::new(),
};

impl Row for PlacedCall {
    fn table() -> &'static Table {
        &TOOL_CALLS
    }

    fn encode(&self, f: &mut Fields) {
        let c = &self.call;
        f.uuid("id", ids::tool_call_id(c.turn_id, &c.call_id))
            .uuid("turn_id", c.turn_id)
            .uuid("conversation_id", c.conversation_id)
            .text("call_id", c.call_id.clone())
            .int("ordinal", self.place)
            .text("tool_name", c.tool_name.clone())
            .json("arguments", &c.arguments)
            .text("state", c.state.as_str())
            .bool("requires_approval", c.requires_approval)
            .opt_text("policy_reason", c.policy_reason.clone())
            .opt_text("approver", c.approver.clone())
            .opt_count("timeout_ms", c.timeout_ms)
            .opt_json("result", c.result.as_ref())
            .opt_text("policy", c.policy.clone())
            .opt_text("reported_by", c.reported_by.clone())
            .opt_json("approvers", c.approvers.as_ref())
            .opt_uuid("on_behalf_of", c.on_behalf_of)
            .opt_text("comment", c.comment.clone())
            .time("created_at", c.created_at)
            .time("updated_at", c.updated_at);
    }

    fn decode(r: &Read<'_>) -> Result<Self, sqlx::Error> {
        Ok(Self {
            place: r.int("ordinal")?,
            call: ToolCallView {
                call_id: r.text("call_id")?,
                turn_id: r.uuid("turn_id")?,
                conversation_id: r.uuid("conversation_id")?,
                tool_name: r.text("tool_name")?,
                arguments: r.json("arguments")?,
                state: r.parsed("state", ToolCallState::parse)?,
                requires_approval: r.bool("requires_approval")?,
                policy_reason: r.opt_text("policy_reason")?,
                approver: r.opt_text("approver")?,
                timeout_ms: r.opt_count("timeout_ms")?,
                result: r.opt_json("result")?,
                policy: r.opt_text("policy")?,
                reported_by: r.opt_text("reported_by")?,
                approvers: r.opt_json("approvers")?,
                on_behalf_of: r.opt_uuid("on_behalf_of")?,
                comment: r.opt_text("comment")?,
                created_at: r.time("created_at")?,
                updated_at: r.time("updated_at")?,
            },
        })
    }
}
