//! Runes: the events of the saga instances, one enum per machine. Every rune name is a
//! constant here — the one vocabulary; nobody else writes these strings.
//!
//! Payloads are internally tagged with `"rune": <name>` (the same string as
//! `event_type`): several runes have the same field list (`session.resumed`,
//! `session.unsuspended`, `session.archived`, `conversation.completed` and
//! `restart.preserve_waiting` are all `{}`), and cqrs-es reads a payload back with serde
//! alone, so an untagged payload could not say which rune it is.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub mod agent;
pub mod plan;
pub mod session;
pub mod tool;
pub mod turn;

use agent::AgentRune;
use plan::PlanRune;
use session::SessionRune;
use tool::ToolRune;
use turn::TurnRune;

/// `saga.anomaly` (every stream): an input the machine has no edge for.
pub const SAGA_ANOMALY: &str = "saga.anomaly";

pub use agent::names::*;
pub use plan::names::*;
pub use session::names::*;
pub use tool::names::*;
pub use turn::names::*;

/// A saga instance: which aggregate, which id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "aggregate_type", content = "id", rename_all = "snake_case")]
pub enum Instance {
    /// A session (id = the conversation id).
    Session(Uuid),
    /// An agent.
    Agent(Uuid),
    /// A turn.
    Turn(Uuid),
    /// A conversation's autonomy loop (id = the conversation id).
    Plan(Uuid),
    /// A tool call (id = [`crate::saga::ids::tool_call_id`]).
    ToolCall(Uuid),
}

impl Instance {
    /// The aggregate type (`session`, `agent`, `turn`, `plan`, `tool_call`).
    pub fn aggregate_type(&self) -> &'static str {
        match self {
            Self::Session(_) => super::SESSION_TYPE,
            Self::Agent(_) => super::AGENT_TYPE,
            Self::Turn(_) => super::TURN_TYPE,
            Self::Plan(_) => super::PLAN_TYPE,
            Self::ToolCall(_) => super::TOOL_CALL_TYPE,
        }
    }

    /// The aggregate id.
    pub fn id(&self) -> Uuid {
        match self {
            Self::Session(id)
            | Self::Agent(id)
            | Self::Turn(id)
            | Self::Plan(id)
            | Self::ToolCall(id) => *id,
        }
    }

    /// The instance of a stored row; `None` for another aggregate type.
    pub fn from_parts(aggregate_type: &str, id: Uuid) -> Option<Self> {
        match aggregate_type {
            super::SESSION_TYPE => Some(Self::Session(id)),
            super::AGENT_TYPE => Some(Self::Agent(id)),
            super::TURN_TYPE => Some(Self::Turn(id)),
            super::PLAN_TYPE => Some(Self::Plan(id)),
            super::TOOL_CALL_TYPE => Some(Self::ToolCall(id)),
            _ => None,
        }
    }
}

/// Rune `saga.anomaly` {instance, state, fact, reason}: recorded, never applied (folding
/// it only counts it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SagaAnomaly {
    /// The instance the input targeted.
    pub instance: Instance,
    /// Its state when the input came (`none` before creation).
    pub state: String,
    /// The input: a fact's type (`project_manager.task.checkpoint.created`, ...).
    pub fact: String,
    /// Why there is no edge, naming the fact's id.
    pub reason: String,
}

/// A rune of any machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Rune {
    /// Of a session.
    Session(SessionRune),
    /// Of an agent.
    Agent(AgentRune),
    /// Of a turn.
    Turn(TurnRune),
    /// Of a plan.
    Plan(PlanRune),
    /// Of a tool call.
    Tool(ToolRune),
}

impl Rune {
    /// The rune's name (its `event_type`).
    pub fn event_type(&self) -> &'static str {
        match self {
            Self::Session(r) => r.name(),
            Self::Agent(r) => r.name(),
            Self::Turn(r) => r.name(),
            Self::Plan(r) => r.name(),
            Self::Tool(r) => r.name(),
        }
    }

    /// Whether it is a `saga.anomaly`.
    pub fn is_anomaly(&self) -> bool {
        self.anomaly().is_some()
    }

    /// The anomaly, when it is a `saga.anomaly`.
    pub fn anomaly(&self) -> Option<&SagaAnomaly> {
        match self {
            Self::Session(SessionRune::Anomaly(a))
            | Self::Agent(AgentRune::Anomaly(a))
            | Self::Turn(TurnRune::Anomaly(a))
            | Self::Plan(PlanRune::Anomaly(a))
            | Self::Tool(ToolRune::Anomaly(a)) => Some(a),
            _ => None,
        }
    }
}

/// A rune recorded on an instance: what [`super::Sagas::handle`] emits, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The instance whose stream it goes to.
    pub instance: Instance,
    /// The rune.
    pub rune: Rune,
}

impl Recorded {
    /// The rune's name.
    pub fn event_type(&self) -> &'static str {
        self.rune.event_type()
    }

    /// The rune's payload as the log stores it: exactly the fields of its seed table (its
    /// name is the event's type, not a field).
    pub fn payload(&self) -> serde_json::Value {
        let mut value = match &self.rune {
            Rune::Session(r) => serde_json::to_value(r),
            Rune::Agent(r) => serde_json::to_value(r),
            Rune::Turn(r) => serde_json::to_value(r),
            Rune::Plan(r) => serde_json::to_value(r),
            Rune::Tool(r) => serde_json::to_value(r),
        }
        .unwrap_or(serde_json::Value::Null);
        if let serde_json::Value::Object(fields) = &mut value {
            fields.remove("rune");
        }
        value
    }

    /// [`Recorded::payload`] as the text the log stores, serialized straight from the rune
    /// instead of through a [`serde_json::Value`] (the saga processor writes every rune
    /// it records this way). The fields come in the rune's declaration order, not sorted;
    /// the JSON is the same.
    pub fn payload_text(&self) -> String {
        let tagged = match &self.rune {
            Rune::Session(r) => serde_json::to_string(r),
            Rune::Agent(r) => serde_json::to_string(r),
            Rune::Turn(r) => serde_json::to_string(r),
            Rune::Plan(r) => serde_json::to_string(r),
            Rune::Tool(r) => serde_json::to_string(r),
        };
        // An internally tagged enum writes its tag first: `{"rune":"<name>"` then `,` and
        // the fields, or `}`. Anything else (never seen) goes the long way.
        let head = format!("{{\"rune\":\"{}\"", self.event_type());
        match tagged
            .as_deref()
            .ok()
            .and_then(|t| t.strip_prefix(head.as_str()))
        {
            Some(rest) if rest.starts_with(',') => format!("{{{}", &rest[1..]),
            Some("}") => "{}".to_string(),
            _ => self.payload().to_string(),
        }
    }

    /// Reads a stored rune back from its row: aggregate type and id, event type, and the
    /// payload's JSON text.
    ///
    /// The text is parsed once, straight into the rune (its name spliced in as the tag):
    /// a conversation's machines are folded from every rune it has, so going through a
    /// `serde_json::Value` first would double the cost of loading a long conversation.
    ///
    /// # Errors
    /// A message when the row is not a rune of a saga aggregate or does not parse.
    pub fn from_stored(
        aggregate_type: &str,
        aggregate_id: Uuid,
        event_type: &str,
        payload: &str,
    ) -> Result<Self, String> {
        let instance = Instance::from_parts(aggregate_type, aggregate_id)
            .ok_or_else(|| format!("{aggregate_type} is not a saga aggregate"))?;
        let tagged = tagged(event_type, payload)
            .ok_or_else(|| format!("the payload of {event_type} is not an object"))?;
        let parse = |e: serde_json::Error| format!("{event_type} does not parse: {e}");
        let rune = match instance {
            Instance::Session(_) => Rune::Session(serde_json::from_str(&tagged).map_err(parse)?),
            Instance::Agent(_) => Rune::Agent(serde_json::from_str(&tagged).map_err(parse)?),
            Instance::Turn(_) => Rune::Turn(serde_json::from_str(&tagged).map_err(parse)?),
            Instance::Plan(_) => Rune::Plan(serde_json::from_str(&tagged).map_err(parse)?),
            Instance::ToolCall(_) => Rune::Tool(serde_json::from_str(&tagged).map_err(parse)?),
        };
        Ok(Self { instance, rune })
    }
}

/// The object `payload` with `"rune": event_type` as its first member, or `None` when
/// `payload` is not an object. What follows the opening brace is left to the parser.
fn tagged(event_type: &str, payload: &str) -> Option<String> {
    // JSON's whitespace only (not `str::trim_start`'s Unicode whitespace, which JSON
    // refuses and the splice would otherwise cut away unseen).
    let json_space: &[char] = &[' ', '\t', '\n', '\r'];
    let body = payload.trim_start_matches(json_space).strip_prefix('{')?;
    let name = serde_json::to_string(event_type).ok()?;
    let mut out = String::with_capacity(payload.len() + name.len() + 9);
    out.push_str("{\"rune\":");
    out.push_str(&name);
    if !body.trim_start_matches(json_space).starts_with('}') {
        out.push(',');
    }
    out.push_str(body);
    Some(out)
}

/// Implements `DomainEvent` (`event_version` = [`crate::EVENT_VERSION`]) for a rune enum
/// with a `name()` method.
macro_rules! rune_event {
    ($rune:ty) => {
        impl cqrs_es::DomainEvent for $rune {
            fn event_type(&self) -> String {
                self.name().into()
            }
            fn event_version(&self) -> String {
                $crate::EVENT_VERSION.into()
            }
        }
    };
}
pub(crate) use rune_event;
