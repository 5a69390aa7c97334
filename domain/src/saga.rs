//! # The sagas: session, agent, turn, autonomy-loop and tool call machines (docs/SAGAS.md)
//!
//! The project-manager facts say *what happened*; the machines of the ECHS, FCMP and L0
//! documents say *what the agents are doing about it*. Each machine instance is an
//! event-sourced aggregate whose events are **runes** ([`rune`]):
//!
//! | aggregate | `TYPE` | id | runes |
//! |---|---|---|---|
//! | [`Session`] | `session` | the conversation id | [`SessionRune`] |
//! | [`Agent`] | `agent` | [`ids::agent_id`] | [`AgentRune`] |
//! | [`Turn`] | `turn` | [`ids::turn_id`] | [`TurnRune`] |
//! | [`Plan`] | `plan` | the conversation id | [`PlanRune`] |
//! | [`ToolCall`] | `tool_call` | [`ids::tool_call_id`] | [`ToolRune`] |
//!
//! Each aggregate's command is [`Record`]: a list of runes it accepts only when every one
//! is an edge of its machine ([`Machine::check`]), so every recorded transition is a
//! diagram edge. Decisions are taken over the composite of one conversation, [`Sagas`]:
//! [`Sagas::handle`] turns an [`Input`] (a fact, a due deadline, an operator control, a
//! restart) into an [`Outcome`] (runes and deadline operations), applying each rune to
//! itself as it is emitted. The crate does no I/O: time comes in as `now`.

use crate::DomainError;

mod agent;
mod deadline;
mod decide;
pub mod ids;
mod input;
mod plan;
pub mod rune;
mod sagas;
mod session;
mod tool;
mod turn;
mod types;
mod view;

pub use agent::Agent;
pub use deadline::{Deadline, DeadlineKind, DeadlineOp, LeaseHeld, Outcome};
pub use input::{
    Control, ControlError, Decision, Input, NewToolCall, ToolOp, WorkerOp,
    AGENT_TRANSITION_NOT_ALLOWED, APPROVER_FORBIDDEN, SELF_APPROVAL_FORBIDDEN,
    SESSION_TRANSITION_NOT_ALLOWED, TOOL_CALL_EXISTS, TOOL_CALL_NOT_AWAITING_APPROVAL,
    TOOL_CALL_NOT_EXECUTING, TOOL_CALL_TERMINAL, TURN_FENCED, TURN_NOT_CLAIMABLE,
    TURN_TRANSITION_NOT_ALLOWED,
};
pub use plan::{plan_edge_triggers, Plan, PlanTask};
pub use rune::agent::{AgentRune, InboxChange};
pub use rune::plan::PlanRune;
pub use rune::session::SessionRune;
pub use rune::tool::ToolRune;
pub use rune::turn::{TurnInput, TurnRune};
pub use rune::{Instance, Recorded, Rune, SagaAnomaly};
pub use sagas::Sagas;
pub use session::{fcmp_edge, Session, BUDGET_EXHAUSTED};
pub use tool::ToolCall;
pub use turn::{
    claimable, FenceCheck, Fenced, Lease, Turn, CLAIMABLE_AFTER, CLAIMABLE_STATES, LEASED_STATE,
};
pub use types::{
    AgentRole, AgentState, ConversationState, HeadStatus, PlanState, PlanTaskStatus, SessionState,
    ToolCallState, ToolStatus, ToolStream, TurnKind, TurnState, Verdict,
};
pub use view::{AgentView, SessionView, ToolCallView, ToolResultView, TurnView};

/// `Aggregate::TYPE` of [`Session`].
pub const SESSION_TYPE: &str = "session";
/// `Aggregate::TYPE` of [`Agent`].
pub const AGENT_TYPE: &str = "agent";
/// `Aggregate::TYPE` of [`Turn`].
pub const TURN_TYPE: &str = "turn";
/// `Aggregate::TYPE` of [`Plan`].
pub const PLAN_TYPE: &str = "plan";
/// `Aggregate::TYPE` of [`ToolCall`].
pub const TOOL_CALL_TYPE: &str = "tool_call";

/// The settings the machines decide with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SagaConfig {
    /// The root agent's actor when a conversation has no `ai` actor.
    pub default_llm_actor: Option<uuid::Uuid>,
    /// How long a session waits for the user before it auto-decides (FCMP §3).
    pub session_timeout: chrono::Duration,
    /// How long a dispatched or streaming turn may go without progress (watchdog).
    pub turn_timeout: chrono::Duration,
    /// Consecutive turn errors that suspend an active session.
    pub error_threshold: u32,
    /// Claims of one turn that may expire before it ends in `turn.error`
    /// (`lease_expired`).
    pub max_claims: u32,
    /// Each new session's token budget (`PM_SESSION_TOKEN_BUDGET`); `None`: unlimited.
    pub token_budget: Option<u64>,
    /// How long a tool call waits for an approver (`PM_TOOL_APPROVAL_TIMEOUT_SECS`).
    pub tool_approval_timeout: chrono::Duration,
    /// How long a tool call may execute unless it gave its own `timeout_ms`
    /// (`PM_TOOL_TIMEOUT_SECS`).
    pub tool_timeout: chrono::Duration,
}

impl Default for SagaConfig {
    fn default() -> Self {
        Self {
            default_llm_actor: None,
            session_timeout: chrono::Duration::seconds(300),
            turn_timeout: chrono::Duration::seconds(600),
            error_threshold: 3,
            max_claims: 3,
            token_budget: None,
            tool_approval_timeout: chrono::Duration::seconds(300),
            tool_timeout: chrono::Duration::seconds(600),
        }
    }
}

/// Why a rune is not an edge of its instance's machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SagaError {
    /// The machine has no edge for this rune from the instance's state.
    #[error("{machine} in state {state}: no edge for {rune}")]
    NoEdge {
        /// The aggregate type (`session`, `agent`, `turn`, `plan`, `tool_call`).
        machine: &'static str,
        /// The instance's state (`none` before creation).
        state: String,
        /// The rune's name.
        rune: &'static str,
    },
    /// The rune's payload names another instance.
    #[error("{rune} names {got}, not this instance {expected}")]
    WrongInstance {
        /// The rune's name.
        rune: &'static str,
        /// The instance's id.
        expected: uuid::Uuid,
        /// The id the payload names.
        got: uuid::Uuid,
    },
    /// The edge exists but a guard of it fails (epoch, inbox head, delivery contract...).
    #[error("{rune}: {reason}")]
    Guard {
        /// The rune's name.
        rune: &'static str,
        /// Which guard failed.
        reason: String,
    },
}

impl From<SagaError> for DomainError {
    fn from(err: SagaError) -> Self {
        DomainError::validation("rune", err.to_string())
    }
}

/// A state machine over its own runes: the edge check and the fold.
pub trait Machine: Default + Clone {
    /// The runes of this machine.
    type Rune: Clone;

    /// `Ok` when `rune` is an edge of the machine from the current state.
    ///
    /// # Errors
    /// [`SagaError`] naming the missing edge or the failed guard.
    fn check(&self, rune: &Self::Rune) -> Result<(), SagaError>;

    /// Applies a rune (no check: the rune is already recorded).
    fn fold(&mut self, rune: Self::Rune);
}

/// Command of every saga aggregate: record these runes, each an edge of the machine
/// from the state the previous one left. All or nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<R>(pub Vec<R>);

/// Implements `cqrs_es::Aggregate` and [`crate::PmAggregate`] for a [`Machine`].
macro_rules! saga_aggregate {
    ($agg:ty, $rune:ty, $type:expr) => {
        $crate::saga::saga_aggregate!($agg, $rune, $type, no_conversation);
        impl $crate::PmAggregate for $agg {
            /// Saga instances are written by their processor, never answered as a created
            /// entity of a command: there is no creation fact to answer with.
            fn creation(&self) -> Option<$rune> {
                None
            }
            fn conversation_id(&self) -> Option<uuid::Uuid> {
                self.conversation_id
            }
        }
    };
    ($agg:ty, $rune:ty, $type:expr, no_conversation) => {
        impl cqrs_es::Aggregate for $agg {
            const TYPE: &'static str = $type;
            type Command = $crate::saga::Record<$rune>;
            type Event = $rune;
            type Error = $crate::DomainError;
            type Services = $crate::Services;

            async fn handle(
                &mut self,
                cmd: $crate::saga::Record<$rune>,
                _services: &$crate::Services,
                sink: &cqrs_es::event_sink::EventSink<Self>,
            ) -> Result<(), $crate::DomainError> {
                let mut probe = self.clone();
                for rune in &cmd.0 {
                    $crate::saga::Machine::check(&probe, rune)?;
                    $crate::saga::Machine::fold(&mut probe, rune.clone());
                }
                for rune in cmd.0 {
                    sink.write(rune, self).await;
                }
                Ok(())
            }

            fn apply(&mut self, rune: $rune) {
                $crate::saga::Machine::fold(self, rune);
            }
        }
    };
}
pub(crate) use saga_aggregate;

#[cfg(test)]
mod tests;
