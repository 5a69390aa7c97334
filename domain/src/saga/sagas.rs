//! [`Sagas`]: the machines of one conversation side by side — the composite decisions are
//! taken over — folded from all their runes in log order.
//!
//! Composite-derived (from runes of more than one stream): an agent's real state (idle
//! once the turn it leased is terminal), the consecutive turn errors (`turn.error` +1,
//! `turn.completed` and `session.unsuspended` reset), the turns in enqueue order and the
//! turns of each task.

use std::borrow::Cow;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::rune::agent::AgentRune;
use super::rune::session::SessionRune;
use super::rune::tool::ToolRune;
use super::rune::turn::TurnRune;
use super::rune::{Instance, Recorded, Rune};
use super::types::{AgentRole, AgentState};
use super::{decide, Agent, ControlError, Input, Machine, Outcome, Plan, SagaConfig};
use super::{ids, SagaError, Session, ToolCall, Turn};
use crate::PmAggregate;

/// The saga instances of one conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sagas {
    session: Option<Session>,
    agents: BTreeMap<Uuid, Agent>,
    turns: BTreeMap<Uuid, Turn>,
    plan: Option<Plan>,
    consecutive_errors: u32,
    turn_order: Vec<Uuid>,
    task_turns: BTreeMap<Uuid, Vec<Uuid>>,
    last_position: Option<i64>,
    #[serde(default)]
    agent_tokens: BTreeMap<Uuid, u64>,
    #[serde(default)]
    tool_calls: BTreeMap<Uuid, ToolCall>,
}

impl Sagas {
    /// Folds recorded runes, in log order, over an empty state; `last_position` is the
    /// position of the last input the processor applied (see [`Sagas::handle_at`]).
    pub fn restore<'a>(
        last_position: Option<i64>,
        runes: impl IntoIterator<Item = &'a Recorded>,
    ) -> Self {
        let mut sagas = Self::default();
        sagas.apply_all(last_position, runes);
        sagas
    }

    /// Folds the runes recorded after the state `self` holds (a snapshot's), in log order;
    /// `last_position` is that of the last input applied with them, if it is later than
    /// the one `self` knows.
    pub fn apply_all<'a>(
        &mut self,
        last_position: Option<i64>,
        runes: impl IntoIterator<Item = &'a Recorded>,
    ) {
        self.last_position = self.last_position.max(last_position);
        for rune in runes {
            self.apply(rune);
        }
    }

    /// Decides what `input` does and applies it: each emitted rune is applied to `self`
    /// as it is emitted, so the state is always the fold of the runes.
    ///
    /// A `Sagas` holds one conversation: a fact naming another conversation is not its
    /// input (empty outcome).
    ///
    /// # Errors
    /// Only controls fail ([`ControlError`]); a refused control records nothing. A fact
    /// without an edge becomes a `saga.anomaly` rune instead.
    pub fn handle(
        &mut self,
        input: Input<'_>,
        now: DateTime<Utc>,
        config: &SagaConfig,
    ) -> Result<Outcome, ControlError> {
        decide::run(self, input, None, now, config)
    }

    /// [`Sagas::handle`] for an input at a log position: a position at or below the last
    /// one applied is a redelivery and changes nothing (empty outcome).
    ///
    /// # Errors
    /// As [`Sagas::handle`]; a refused control does not advance the position.
    pub fn handle_at(
        &mut self,
        position: i64,
        input: Input<'_>,
        now: DateTime<Utc>,
        config: &SagaConfig,
    ) -> Result<Outcome, ControlError> {
        self.handle_fenced_at(position, None, input, now, config)
    }

    /// [`Sagas::handle_at`] for a fact fenced by a worker's claim (WORKERS.md): it moves
    /// the turn `fence` names and no other — a fenced message or checkpoint whose turn
    /// ended before the sagas reached it is recorded as `saga.anomaly` on that turn
    /// instead of being taken for another turn's.
    ///
    /// # Errors
    /// As [`Sagas::handle`].
    pub fn handle_fenced_at(
        &mut self,
        position: i64,
        fence: Option<Uuid>,
        input: Input<'_>,
        now: DateTime<Utc>,
        config: &SagaConfig,
    ) -> Result<Outcome, ControlError> {
        if self.last_position.is_some_and(|last| position <= last) {
            return Ok(Outcome::default());
        }
        let outcome = decide::run(self, input, fence, now, config)?;
        self.last_position = Some(position);
        Ok(outcome)
    }

    /// Folds one recorded rune (no check: it is recorded).
    pub fn apply(&mut self, rec: &Recorded) {
        match (&rec.instance, &rec.rune) {
            (Instance::Session(_), Rune::Session(r)) => {
                if matches!(r, SessionRune::Unsuspended(_)) {
                    self.consecutive_errors = 0;
                }
                self.session
                    .get_or_insert_with(Session::default)
                    .fold(r.clone());
            }
            (Instance::Agent(id), Rune::Agent(r)) => {
                self.agents.entry(*id).or_default().fold(r.clone());
            }
            (Instance::Turn(id), Rune::Turn(r)) => {
                match r {
                    TurnRune::Queued(q) => {
                        self.turn_order.push(*id);
                        if let Some(task) = q.task_id {
                            self.task_turns.entry(task).or_default().push(*id);
                        }
                    }
                    TurnRune::Error(_) => self.consecutive_errors += 1,
                    TurnRune::Completed(_) => self.consecutive_errors = 0,
                    TurnRune::UsageReported(u) => {
                        let agent = self.turns.get(id).and_then(Turn::agent_id);
                        if let Some(agent) = agent {
                            let used = self.agent_tokens.entry(agent).or_default();
                            *used = used
                                .saturating_add(u.input_tokens)
                                .saturating_add(u.output_tokens);
                        }
                    }
                    _ => {}
                }
                self.turns.entry(*id).or_default().fold(r.clone());
            }
            (Instance::Plan(_), Rune::Plan(r)) => {
                self.plan.get_or_insert_with(Plan::default).fold(r.clone());
            }
            (Instance::ToolCall(id), Rune::Tool(r)) => {
                self.tool_calls.entry(*id).or_default().fold(r.clone());
            }
            _ => {}
        }
    }

    /// Whether a rune is an edge: its instance's own check, plus the composite guards
    /// (INV-TURN-SEQUENTIAL: an agent leases only when its leased turn is terminal; the
    /// inbox and the turn agree).
    ///
    /// # Errors
    /// [`SagaError`] naming the missing edge or the failed guard.
    pub fn check(&self, rec: &Recorded) -> Result<(), SagaError> {
        let guard = |rune: &'static str, ok: bool, reason: &dyn Fn() -> String| {
            if ok {
                Ok(())
            } else {
                Err(SagaError::Guard {
                    rune,
                    reason: reason(),
                })
            }
        };
        match (&rec.instance, &rec.rune) {
            (Instance::Session(_), Rune::Session(r)) => or_new(self.session.as_ref()).check(r),
            (Instance::Agent(id), Rune::Agent(r)) => {
                or_new(self.agents.get(id)).check(r)?;
                match r {
                    AgentRune::TurnEnqueued(e) => {
                        let ok = self.turns.get(&e.turn_id).is_some_and(|t| {
                            t.agent_id() == Some(*id) && t.state() == Some(super::TurnState::Queued)
                        });
                        guard(r.name(), ok, &|| {
                            format!("turn {} is not queued here", e.turn_id)
                        })
                    }
                    AgentRune::TurnDispatched(_) => {
                        let busy = self.active_turn(*id).map(|t| t.id());
                        guard(r.name(), busy.is_none(), &|| {
                            format!("INV-TURN-SEQUENTIAL: turn {busy:?} is still running")
                        })
                    }
                    _ => Ok(()),
                }
            }
            (Instance::Turn(id), Rune::Turn(r)) => {
                let turn = or_new(self.turns.get(id));
                turn.check(r)?;
                match r {
                    TurnRune::Queued(q) => {
                        let alive = self.agents.get(&q.agent_id).is_some_and(Agent::is_alive);
                        guard(r.name(), alive && q.turn_id == *id, &|| {
                            format!("agent {} takes no turns", q.agent_id)
                        })
                    }
                    TurnRune::Dispatched(d) => {
                        let agent = turn.agent_id().and_then(|a| self.agents.get(&a));
                        let ok = agent.is_some_and(|a| {
                            a.leased_turn_id() == Some(*id) && a.turn_epoch() == d.turn_epoch
                        });
                        guard(r.name(), ok, &|| "the agent has not leased it".into())
                    }
                    TurnRune::ToolsFinished(_) => {
                        let open = self.open_calls(*id);
                        guard(r.name(), open.is_empty(), &|| {
                            format!("INV-TOOL-TERMINAL: calls {open:?} have no result")
                        })
                    }
                    _ if r.delivery().is_some() => {
                        let open = self.open_calls(*id);
                        guard(r.name(), open.is_empty(), &|| {
                            format!("INV-TOOL-TERMINAL: calls {open:?} have no result")
                        })
                    }
                    _ => Ok(()),
                }
            }
            (Instance::Plan(_), Rune::Plan(r)) => or_new(self.plan.as_ref()).check(r),
            (Instance::ToolCall(id), Rune::Tool(r)) => {
                or_new(self.tool_calls.get(id)).check(r)?;
                match r {
                    ToolRune::Call(c) => {
                        let ok = *id == ids::tool_call_id(c.turn_id, &c.call_id)
                            && self.turns.get(&c.turn_id).is_some_and(|t| {
                                t.state() == Some(super::TurnState::ToolExecuting)
                                    && t.batch().contains(&c.call_id)
                            });
                        guard(r.name(), ok, &|| {
                            format!("call {} is not in turn {}'s batch", c.call_id, c.turn_id)
                        })
                    }
                    _ => Ok(()),
                }
            }
            _ => Err(SagaError::Guard {
                rune: rec.event_type(),
                reason: format!("not a rune of a {}", rec.instance.aggregate_type()),
            }),
        }
    }

    /// The conversation.
    pub fn conversation_id(&self) -> Option<Uuid> {
        self.session.as_ref().and_then(PmAggregate::conversation_id)
    }
    /// The session.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }
    /// The agents, by id.
    pub fn agents(&self) -> &BTreeMap<Uuid, Agent> {
        &self.agents
    }
    /// The turns, by id.
    pub fn turns(&self) -> &BTreeMap<Uuid, Turn> {
        &self.turns
    }
    /// The autonomy loop.
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }
    /// Tokens an agent's turns reported (composite).
    pub fn agent_tokens(&self, agent_id: Uuid) -> u64 {
        self.agent_tokens.get(&agent_id).copied().unwrap_or(0)
    }
    /// Tokens the session's turns reported (composite): what its budget counts.
    pub fn tokens_used(&self) -> u64 {
        self.agent_tokens
            .values()
            .fold(0, |a, b| a.saturating_add(*b))
    }
    /// Consecutive turn errors (composite).
    pub fn consecutive_errors(&self) -> u32 {
        self.consecutive_errors
    }
    /// Turn ids in enqueue order (composite).
    pub fn turn_order(&self) -> &[Uuid] {
        &self.turn_order
    }
    /// A task's turns, oldest first (composite).
    pub fn task_turns(&self, task_id: Uuid) -> &[Uuid] {
        self.task_turns.get(&task_id).map_or(&[], Vec::as_slice)
    }
    /// The tool calls, by instance id ([`ids::tool_call_id`]).
    pub fn tool_calls(&self) -> &BTreeMap<Uuid, ToolCall> {
        &self.tool_calls
    }
    /// A turn's call by its `call_id`.
    pub fn tool_call(&self, turn_id: Uuid, call_id: &str) -> Option<&ToolCall> {
        self.tool_calls.get(&ids::tool_call_id(turn_id, call_id))
    }
    /// A turn's calls, in the order it reported them.
    pub fn turn_tool_calls(&self, turn_id: Uuid) -> Vec<&ToolCall> {
        self.turns.get(&turn_id).map_or_else(Vec::new, |turn| {
            turn.tool_call_ids()
                .iter()
                .filter_map(|call| self.tool_call(turn_id, call))
                .collect()
        })
    }
    /// A turn's calls that still owe their `tool.result` (INV-TOOL-TERMINAL).
    pub fn open_calls(&self, turn_id: Uuid) -> Vec<String> {
        self.turn_tool_calls(turn_id)
            .into_iter()
            .filter(|c| c.is_open())
            .filter_map(|c| c.call_id().map(str::to_string))
            .collect()
    }
    /// The position of the last input applied by [`Sagas::handle_at`].
    pub fn last_position(&self) -> Option<i64> {
        self.last_position
    }

    /// An agent's real state (composite): `running_turn` only while the turn it leased is
    /// not terminal.
    pub fn agent_state(&self, agent_id: Uuid) -> Option<AgentState> {
        let agent = self.agents.get(&agent_id)?;
        match agent.state()? {
            AgentState::RunningTurn if self.active_turn(agent_id).is_none() => {
                Some(AgentState::Idle)
            }
            state => Some(state),
        }
    }

    /// The turn an agent is running: leased and not terminal (composite).
    pub fn active_turn(&self, agent_id: Uuid) -> Option<&Turn> {
        let agent = self.agents.get(&agent_id)?;
        let turn = self.turns.get(&agent.leased_turn_id()?)?;
        (!turn.is_terminal()).then_some(turn)
    }

    /// The root agent.
    pub fn root_agent(&self) -> Option<&Agent> {
        self.agents
            .values()
            .find(|a| a.role() == Some(AgentRole::Root))
    }
}

/// The instance, or a new one (state `none`) when it does not exist yet.
fn or_new<T: Clone + Default>(instance: Option<&T>) -> Cow<'_, T> {
    instance.map_or_else(|| Cow::Owned(T::default()), Cow::Borrowed)
}
