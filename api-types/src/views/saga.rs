//! The sagas as the query side shows them (`/v1/sessions`, `/v1/agents`, `/v1/turns`,
//! `/v1/tool-calls`, `/v1/anomalies`). The machines' rows are the domain's
//! (`pm_domain::saga` views: one type for the machines, the tables and the wire); the
//! anomalies and the SSE snapshot are the query side's own.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use pm_domain::saga::{
    AgentView, Lease as LeaseView, SessionView, ToolCallView, ToolResultView, TurnView,
};

/// The saga instance an anomaly was recorded on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AnomalyInstance {
    /// `session`, `agent`, `turn`, `plan` or `tool_call`.
    pub aggregate_type: String,
    /// The instance's id.
    pub id: Uuid,
}

/// An input a saga had no edge for (`GET /v1/anomalies`): recorded as a `saga.anomaly`
/// rune and not applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AnomalyView {
    /// The anomaly (derived from its rune's stream and sequence).
    pub id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// The instance the input targeted.
    pub instance: AnomalyInstance,
    /// The rune's sequence in that instance's stream.
    pub sequence: i64,
    /// The instance's state when the input came (`none` before it existed).
    pub state: String,
    /// The input: a fact's type, a control or a deadline.
    pub fact: String,
    /// Why there is no edge.
    pub reason: String,
    /// What caused it: the fact's log position, or the control's or deadline's id.
    pub causation_id: Option<String>,
    /// When it was recorded (log time).
    #[serde(with = "pm_domain::time")]
    pub created_at: DateTime<Utc>,
}

/// The first event (`event: snapshot`) of an SSE stream filtered by `conversation_id`:
/// the session's current state, agents and turns (FCMP snapshot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionSnapshot {
    /// The conversation.
    pub conversation_id: Uuid,
    /// Where the stream continues: the events after this position follow.
    pub cursor: String,
    /// The saga processor's position when the snapshot was read: it reflects every
    /// event up to here.
    pub position: String,
    /// The session; null before the conversation has one.
    pub session: Option<SessionView>,
    /// Its agents, oldest first.
    pub agents: Vec<AgentView>,
    /// Its turns, oldest first.
    pub turns: Vec<TurnView>,
}
