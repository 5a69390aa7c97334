//! The decision function behind [`super::Sagas::handle`]: one [`Step`] per input, which
//! emits runes (each checked with [`super::Sagas::check`] and applied at once) and
//! deadline operations, then runs the L0 dispatch rule for every agent.

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use super::rune::agent::AgentRune;
use super::rune::plan::PlanRune;
use super::rune::session::{SessionRune, StateChanged};
use super::rune::tool::ToolRune;
use super::rune::turn::TurnRune;
use super::rune::{Instance, Recorded, Rune, SagaAnomaly};
use super::types::{ConversationState, SessionState};
use super::{
    fcmp_edge, Agent, Control, ControlError, Deadline, DeadlineKind, DeadlineOp, Input, Outcome,
    SagaConfig, Sagas,
};

mod checkpoint;
mod close;
mod control;
mod facts;
mod plan;
mod task;
mod timers;
mod tools;
mod turns;
mod worker;

/// Decides and applies one input; `fence` is the turn a fenced fact belongs to.
pub(super) fn run(
    sagas: &mut Sagas,
    input: Input<'_>,
    fence: Option<Uuid>,
    now: DateTime<Utc>,
    config: &SagaConfig,
) -> Result<Outcome, ControlError> {
    let known = sagas.conversation_id();
    if let (Some(known), Some(named)) = (known, input.conversation_id()) {
        if known != named {
            return Ok(Outcome::default());
        }
    }
    let Some(conv) = input.conversation_id().or(known) else {
        return match input {
            Input::Control(Control::Kill { .. }) => Err(ControlError::AgentNotFound),
            Input::Worker { .. } => Err(ControlError::TurnNotFound),
            Input::Control(_) => Err(ControlError::SessionNotFound),
            _ => Ok(Outcome::default()),
        };
    };
    let mut step = Step {
        s: sagas,
        now,
        config,
        conv,
        fence,
        out: Outcome::default(),
    };
    match input {
        Input::ConversationStarted { fact, ai_actors } => {
            step.conversation_started(fact, ai_actors)
        }
        Input::MessageAdded { fact, author } => step.message_added(fact, author),
        Input::CheckpointCreated(fact) => step.checkpoint_created(fact),
        Input::TaskCreated(fact) => step.task_created(fact),
        Input::TaskCheckpointCreated { fact, .. } => step.task_checkpoint(fact),
        Input::DeadlineDue(deadline) => step.deadline_due(deadline),
        Input::Control(control) => step.control(control)?,
        Input::Worker { turn_id, op } => step.worker(turn_id, op)?,
        Input::Restart { overdue } => step.restart(overdue),
    }
    step.dispatch_all();
    Ok(step.out)
}

/// One input being decided.
struct Step<'a> {
    s: &'a mut Sagas,
    now: DateTime<Utc>,
    config: &'a SagaConfig,
    conv: Uuid,
    /// The turn a fenced fact belongs to (its `turn_id` metadata): the fact moves that
    /// turn or none.
    fence: Option<Uuid>,
    out: Outcome,
}

impl Step<'_> {
    /// Records a rune: checks it, applies it, adds it to the outcome. A rune that is not
    /// an edge is a bug of the decisions: debug builds panic, release builds record the
    /// refusal as `saga.anomaly` instead (the machine never takes a non-edge).
    fn emit(&mut self, instance: Instance, rune: Rune) {
        let mut rec = Recorded { instance, rune };
        if let Err(err) = self.s.check(&rec) {
            if cfg!(debug_assertions) {
                panic!("decided a rune that is not an edge: {err}: {rec:?}");
            }
            let anomaly = self.anomaly_of(instance, rec.event_type(), err.to_string());
            rec = Recorded {
                instance,
                rune: anomaly,
            };
        }
        self.s.apply(&rec);
        self.out.runes.push(rec);
    }

    fn session(&mut self, rune: SessionRune) {
        self.emit(Instance::Session(self.conv), Rune::Session(rune));
    }

    fn agent(&mut self, agent_id: Uuid, rune: AgentRune) {
        self.emit(Instance::Agent(agent_id), Rune::Agent(rune));
    }

    fn turn(&mut self, turn_id: Uuid, rune: TurnRune) {
        self.emit(Instance::Turn(turn_id), Rune::Turn(rune));
    }

    fn plan(&mut self, rune: PlanRune) {
        self.emit(Instance::Plan(self.conv), Rune::Plan(rune));
    }

    fn tool(&mut self, call: Uuid, rune: ToolRune) {
        self.emit(Instance::ToolCall(call), Rune::Tool(rune));
    }

    /// Records `saga.anomaly` on `instance`: `fact` had no edge there.
    fn anomaly(&mut self, instance: Instance, fact: &str, reason: String) {
        let rune = self.anomaly_of(instance, fact, reason);
        self.emit(instance, rune);
    }

    fn anomaly_of(&self, instance: Instance, fact: &str, reason: String) -> Rune {
        let payload = SagaAnomaly {
            instance,
            state: self.state_of(instance),
            fact: fact.to_string(),
            reason,
        };
        match instance {
            Instance::Session(_) => Rune::Session(SessionRune::Anomaly(payload)),
            Instance::Agent(_) => Rune::Agent(AgentRune::Anomaly(payload)),
            Instance::Turn(_) => Rune::Turn(TurnRune::Anomaly(payload)),
            Instance::Plan(_) => Rune::Plan(PlanRune::Anomaly(payload)),
            Instance::ToolCall(_) => Rune::Tool(ToolRune::Anomaly(payload)),
        }
    }

    fn state_of(&self, instance: Instance) -> String {
        let none = || "none".to_string();
        match instance {
            Instance::Session(_) => self.s.session().map_or_else(none, |s| s.state_name()),
            Instance::Agent(id) => self
                .s
                .agent_state(id)
                .map_or_else(none, |s| s.as_str().to_string()),
            Instance::Turn(id) => self
                .s
                .turns()
                .get(&id)
                .map_or_else(none, |t| t.state_name()),
            Instance::Plan(_) => self.s.plan().map_or_else(none, |p| p.state_name()),
            Instance::ToolCall(id) => self
                .s
                .tool_calls()
                .get(&id)
                .map_or_else(none, |c| c.state_name()),
        }
    }

    /// Arms (or re-arms: one row per instance and kind) a deadline `after` from now.
    fn arm(&mut self, instance: Instance, kind: DeadlineKind, after: Duration, epoch: i64) {
        let due_at = self.now + after;
        self.out.push_deadline(DeadlineOp::Arm(Deadline {
            instance,
            kind,
            due_at,
            epoch,
        }));
    }

    fn disarm(&mut self, instance: Instance, kind: DeadlineKind) {
        self.out
            .push_deadline(DeadlineOp::Disarm { instance, kind });
    }

    fn session_state(&self) -> Option<SessionState> {
        self.s.session().and_then(|s| s.state())
    }

    fn cs(&self) -> Option<ConversationState> {
        self.s.session().and_then(|s| s.conversation_state())
    }

    fn root_id(&self) -> Option<Uuid> {
        self.s.root_agent().and_then(Agent::id)
    }

    /// Moves the FCMP state to `to` when that is a change and an edge.
    fn fcmp(&mut self, to: ConversationState) {
        let from = self.cs();
        if fcmp_edge(from, to) {
            self.session(SessionRune::StateChanged(StateChanged { from, to }));
        }
    }
}
