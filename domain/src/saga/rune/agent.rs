//! Runes of an agent stream: the ECHS agent lifecycle and the L0 inbox (enqueue, lease).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::session::TurnCounts;
use super::{rune_event, SagaAnomaly};
use crate::saga::types::AgentRole;

/// The names of the agent runes.
pub mod names {
    /// `agent.spawning` — `[*] → spawning`.
    pub const AGENT_SPAWNING: &str = "agent.spawning";
    /// `agent.ready` — `spawning → idle`.
    pub const AGENT_READY: &str = "agent.ready";
    /// `agent.failed` — `spawning → failed` (in the machine; no fact emits it).
    pub const AGENT_FAILED: &str = "agent.failed";
    /// `agent.turn_enqueued` — a turn joins the inbox (L0 enqueue).
    pub const AGENT_TURN_ENQUEUED: &str = "agent.turn_enqueued";
    /// `agent.turn_dispatched` — the inbox head is leased (`idle → running_turn`).
    pub const AGENT_TURN_DISPATCHED: &str = "agent.turn_dispatched";
    /// `agent.terminated` — `idle | running_turn → terminated`.
    pub const AGENT_TERMINATED: &str = "agent.terminated";
}

/// `agent.spawning` {agent_id, role, model, parent_id} + {conversation_id, actor_id}
/// (added so that the agent's stream is self-contained).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AgentSpawning {
    /// The agent.
    pub agent_id: Uuid,
    /// `root` or `worker`.
    pub role: AgentRole,
    /// The model; the facts never say, so null.
    pub model: Option<String>,
    /// The spawning agent: null for the root, the root agent for workers.
    pub parent_id: Option<Uuid>,
    /// Its conversation (addition).
    pub conversation_id: Uuid,
    /// The actor it acts for; null for a root agent without an LLM actor (addition).
    pub actor_id: Option<Uuid>,
}

/// `agent.ready` {agent_id}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AgentReady {
    /// The agent.
    pub agent_id: Uuid,
}

/// `agent.failed` {agent_id, error}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AgentFailed {
    /// The agent.
    pub agent_id: Uuid,
    /// What went wrong.
    pub error: String,
}

/// `agent.turn_enqueued` {turn_id}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnEnqueued {
    /// The turn joining the inbox.
    pub turn_id: Uuid,
}

/// `agent.turn_dispatched` {turn_id, turn_epoch}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnDispatched {
    /// The leased turn (the inbox head).
    pub turn_id: Uuid,
    /// The agent's new epoch (previous + 1).
    pub turn_epoch: i64,
}

/// `agent.terminated`'s `stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AgentStats {
    /// Turns leased (the final `turn_epoch`).
    pub turn_epoch: i64,
    /// Its turns by terminal state.
    pub turns: TurnCounts,
}

/// `agent.terminated` {agent_id, reason, stats}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AgentTerminated {
    /// The agent.
    pub agent_id: Uuid,
    /// `session_closed` or `killed`.
    pub reason: String,
    /// What it did.
    pub stats: AgentStats,
}

/// The runes of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "rune")]
pub enum AgentRune {
    /// `agent.spawning`
    #[serde(rename = "agent.spawning")]
    Spawning(AgentSpawning),
    /// `agent.ready`
    #[serde(rename = "agent.ready")]
    Ready(AgentReady),
    /// `agent.failed`
    #[serde(rename = "agent.failed")]
    Failed(AgentFailed),
    /// `agent.turn_enqueued`
    #[serde(rename = "agent.turn_enqueued")]
    TurnEnqueued(TurnEnqueued),
    /// `agent.turn_dispatched`
    #[serde(rename = "agent.turn_dispatched")]
    TurnDispatched(TurnDispatched),
    /// `agent.terminated`
    #[serde(rename = "agent.terminated")]
    Terminated(AgentTerminated),
    /// `saga.anomaly`
    #[serde(rename = "saga.anomaly")]
    Anomaly(SagaAnomaly),
}

/// What a rune does to its agent's inbox (the FIFO of queued turns): the one definition
/// the agent's fold and the stored inbox rows both follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxChange {
    /// The turn joins the end of the inbox.
    Enqueued(Uuid),
    /// The turn leaves the inbox (it runs now).
    Dequeued(Uuid),
    /// The inbox empties (the agent is gone).
    Cleared,
}

impl AgentRune {
    /// What this rune does to the agent's inbox, if anything.
    pub fn inbox_change(&self) -> Option<InboxChange> {
        match self {
            Self::TurnEnqueued(r) => Some(InboxChange::Enqueued(r.turn_id)),
            Self::TurnDispatched(r) => Some(InboxChange::Dequeued(r.turn_id)),
            Self::Terminated(_) => Some(InboxChange::Cleared),
            Self::Spawning(_) | Self::Ready(_) | Self::Failed(_) | Self::Anomaly(_) => None,
        }
    }

    /// Every rune name of the stream, `saga.anomaly` last.
    pub const NAMES: &'static [&'static str] = &[
        names::AGENT_SPAWNING,
        names::AGENT_READY,
        names::AGENT_FAILED,
        names::AGENT_TURN_ENQUEUED,
        names::AGENT_TURN_DISPATCHED,
        names::AGENT_TERMINATED,
        super::SAGA_ANOMALY,
    ];

    /// The rune's name.
    pub fn name(&self) -> &'static str {
        use names::*;
        match self {
            Self::Spawning(_) => AGENT_SPAWNING,
            Self::Ready(_) => AGENT_READY,
            Self::Failed(_) => AGENT_FAILED,
            Self::TurnEnqueued(_) => AGENT_TURN_ENQUEUED,
            Self::TurnDispatched(_) => AGENT_TURN_DISPATCHED,
            Self::Terminated(_) => AGENT_TERMINATED,
            Self::Anomaly(_) => super::SAGA_ANOMALY,
        }
    }
}

rune_event!(AgentRune);
