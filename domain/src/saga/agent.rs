//! The Agent aggregate: the ECHS agent lifecycle and the L0 head (turn epoch, active
//! turn, FIFO inbox), folded from the agent's own runes.
//!
//! Its own runes cannot tell `running_turn → idle`: ECHS records that edge with the
//! turn's terminal rune, on the turn's stream. So [`Agent::state`] is the agent's own
//! view (`running_turn` once a turn is leased) and the composite
//! [`super::Sagas::agent_state`] is the real state (idle when the active turn is terminal).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::rune::agent::{AgentRune, InboxChange};
use super::types::{AgentRole, AgentState};
use super::{saga_aggregate, Machine, SagaError, AGENT_TYPE};

/// An agent (one per conversation and actor; id = [`super::ids::agent_id`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    agent_id: Option<Uuid>,
    conversation_id: Option<Uuid>,
    actor_id: Option<Uuid>,
    role: Option<AgentRole>,
    model: Option<String>,
    parent_id: Option<Uuid>,
    state: Option<AgentState>,
    turn_epoch: i64,
    active_turn_id: Option<Uuid>,
    inbox: Vec<Uuid>,
    terminated_reason: Option<String>,
    anomalies: u32,
}

impl Agent {
    /// The agent's id; `None` before `agent.spawning`.
    pub fn id(&self) -> Option<Uuid> {
        self.agent_id
    }
    /// The actor it acts for (null for a root agent without an LLM actor).
    pub fn actor_id(&self) -> Option<Uuid> {
        self.actor_id
    }
    /// `root` or `worker`.
    pub fn role(&self) -> Option<AgentRole> {
        self.role
    }
    /// The spawning agent.
    pub fn parent_id(&self) -> Option<Uuid> {
        self.parent_id
    }
    /// The state its own runes give (see the module docs).
    pub fn state(&self) -> Option<AgentState> {
        self.state
    }
    /// The epoch of its last lease (0 before the first).
    pub fn turn_epoch(&self) -> i64 {
        self.turn_epoch
    }
    /// The turn of its last lease (it may have ended since: see the module docs).
    pub fn leased_turn_id(&self) -> Option<Uuid> {
        self.active_turn_id
    }
    /// Queued turns, oldest first (FIFO).
    pub fn inbox(&self) -> &[Uuid] {
        &self.inbox
    }
    /// Why it was terminated.
    pub fn terminated_reason(&self) -> Option<&str> {
        self.terminated_reason.as_deref()
    }
    /// `saga.anomaly` runes recorded on the agent.
    pub fn anomalies(&self) -> u32 {
        self.anomalies
    }
    /// Whether it can still take turns (`spawning`, `idle`, `running_turn`).
    pub fn is_alive(&self) -> bool {
        matches!(
            self.state,
            Some(AgentState::Spawning | AgentState::Idle | AgentState::RunningTurn)
        )
    }
    /// The state's name, `none` before spawning.
    pub fn state_name(&self) -> String {
        self.state.map_or("none", AgentState::as_str).to_string()
    }

    fn same(&self, rune: &AgentRune, id: Uuid) -> Result<(), SagaError> {
        match self.agent_id {
            Some(expected) if expected != id => Err(SagaError::WrongInstance {
                rune: rune.name(),
                expected,
                got: id,
            }),
            _ => Ok(()),
        }
    }

    fn guard(rune: &AgentRune, ok: bool, reason: impl FnOnce() -> String) -> Result<(), SagaError> {
        if ok {
            Ok(())
        } else {
            Err(SagaError::Guard {
                rune: rune.name(),
                reason: reason(),
            })
        }
    }
}

impl Machine for Agent {
    type Rune = AgentRune;

    fn check(&self, rune: &AgentRune) -> Result<(), SagaError> {
        use AgentRune as R;
        use AgentState as A;
        let st = self.state;
        let edge = match rune {
            R::Spawning(_) => st.is_none(),
            R::Ready(r) => {
                self.same(rune, r.agent_id)?;
                st == Some(A::Spawning)
            }
            R::Failed(r) => {
                self.same(rune, r.agent_id)?;
                st == Some(A::Spawning)
            }
            R::TurnEnqueued(r) => {
                let known =
                    self.inbox.contains(&r.turn_id) || self.active_turn_id == Some(r.turn_id);
                Self::guard(rune, !known, || {
                    format!("turn {} already enqueued", r.turn_id)
                })?;
                self.is_alive()
            }
            R::TurnDispatched(r) => {
                if matches!(st, Some(A::Idle | A::RunningTurn)) {
                    Self::guard(rune, self.inbox.first() == Some(&r.turn_id), || {
                        format!("turn {} is not the inbox head", r.turn_id)
                    })?;
                    Self::guard(rune, r.turn_epoch == self.turn_epoch + 1, || {
                        format!("epoch {} after {}", r.turn_epoch, self.turn_epoch)
                    })?;
                }
                matches!(st, Some(A::Idle | A::RunningTurn))
            }
            R::Terminated(r) => {
                self.same(rune, r.agent_id)?;
                matches!(st, Some(A::Idle | A::RunningTurn))
            }
            R::Anomaly(_) => true,
        };
        if edge {
            Ok(())
        } else {
            Err(SagaError::NoEdge {
                machine: AGENT_TYPE,
                state: self.state_name(),
                rune: rune.name(),
            })
        }
    }

    fn fold(&mut self, rune: AgentRune) {
        use AgentRune as R;
        match rune.inbox_change() {
            Some(InboxChange::Enqueued(turn)) => self.inbox.push(turn),
            Some(InboxChange::Dequeued(turn)) => self.inbox.retain(|t| *t != turn),
            Some(InboxChange::Cleared) => self.inbox.clear(),
            None => {}
        }
        match rune {
            R::Spawning(r) => {
                self.agent_id = Some(r.agent_id);
                self.conversation_id = Some(r.conversation_id);
                self.actor_id = r.actor_id;
                self.role = Some(r.role);
                self.model = r.model;
                self.parent_id = r.parent_id;
                self.state = Some(AgentState::Spawning);
            }
            R::Ready(_) => self.state = Some(AgentState::Idle),
            R::Failed(_) => self.state = Some(AgentState::Failed),
            R::TurnEnqueued(_) => {}
            R::TurnDispatched(r) => {
                self.active_turn_id = Some(r.turn_id);
                self.turn_epoch = r.turn_epoch;
                self.state = Some(AgentState::RunningTurn);
            }
            R::Terminated(r) => {
                self.active_turn_id = None;
                self.terminated_reason = Some(r.reason);
                self.state = Some(AgentState::Terminated);
            }
            R::Anomaly(_) => self.anomalies += 1,
        }
    }
}

saga_aggregate!(Agent, AgentRune, AGENT_TYPE);
