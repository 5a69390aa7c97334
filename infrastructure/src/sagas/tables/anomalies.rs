//! `saga_anomalies`: an input a saga had no edge for ([`AnomalyView`]), recorded once.

use pm_application::views::{AnomalyInstance, AnomalyView};

use crate::sagas::table::{Column, Fields, Read, Row, Statements, Table, Ty};

/// The table.
pub static ANOMALIES: Table = Table {
    name: "saga_anomalies",
    read_from: "saga_anomalies",
    key: &["id"],
    columns: &[
        Column::new("id", Ty::Uuid).keep(),
        Column::new("conversation_id", Ty::Uuid).keep(),
        Column::new("aggregate_type", Ty::Text).keep(),
        Column::new("aggregate_id", Ty::Uuid).keep(),
        Column::new("sequence", Ty::BigInt).keep(),
        Column::new("state", Ty::Text).keep(),
        Column::new("fact", Ty::Text).keep(),
        Column::new("reason", Ty::Text).keep(),
        Column::new("causation_id", Ty::Text).null().keep(),
        Column::new("created_at", Ty::Time).keep(),
    ],
    derived: &[],
    statements: Statements::new(),
};

impl Row for AnomalyView {
    fn table() -> &'static Table {
        &ANOMALIES
    }

    fn encode(&self, f: &mut Fields) {
        f.uuid("id", self.id)
            .uuid("conversation_id", self.conversation_id)
            .text("aggregate_type", self.instance.aggregate_type.clone())
            .uuid("aggregate_id", self.instance.id)
            .int("sequence", self.sequence)
            .text("state", self.state.clone())
            .text("fact", self.fact.clone())
            .text("reason", self.reason.clone())
            .opt_text("causation_id", self.causation_id.clone())
            .time("created_at", self.created_at);
    }

    fn decode(r: &Read<'_>) -> Result<Self, sqlx::Error> {
        Ok(Self {
            id: r.uuid("id")?,
            conversation_id: r.uuid("conversation_id")?,
            instance: AnomalyInstance {
                aggregate_type: r.text("aggregate_type")?,
                id: r.uuid("aggregate_id")?,
            },
            sequence: r.int("sequence")?,
            state: r.text("state")?,
            fact: r.text("fact")?,
            reason: r.text("reason")?,
            causation_id: r.opt_text("causation_id")?,
            created_at: r.time("created_at")?,
        })
    }
}
