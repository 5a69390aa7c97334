//! Turn and agent moves shared by the decisions: spawn, enqueue, the L0 dispatch rule,
//! start, delta, and the three terminal runes with the L0 delivery contract.

use uuid::Uuid;

use super::Step;
use crate::saga::ids::{self, TurnCause};
use crate::saga::rune::agent::{
    AgentReady, AgentRune, AgentSpawning, TurnDispatched, TurnEnqueued,
};
use crate::saga::rune::turn::{
    AssistantDelta, FinalOutput, MessageCount, TurnCompleted, TurnError, TurnInput,
    TurnInterrupted, TurnLeased, TurnQueued, TurnRune, TurnStarted,
};
use crate::saga::rune::Instance;
use crate::saga::types::TurnKind;
use crate::saga::types::{AgentRole, AgentState, ConversationState, SessionState};
use crate::saga::{DeadlineKind, Turn};

impl Step<'_> {
    /// `agent.spawning` + `agent.ready`.
    pub(super) fn spawn(
        &mut self,
        actor_id: Option<Uuid>,
        role: AgentRole,
        parent_id: Option<Uuid>,
    ) {
        let agent_id = ids::agent_id(self.conv, actor_id);
        let spawning = AgentSpawning {
            agent_id,
            role,
            model: None,
            parent_id,
            conversation_id: self.conv,
            actor_id,
        };
        self.agent(agent_id, AgentRune::Spawning(spawning));
        self.agent(agent_id, AgentRune::Ready(AgentReady { agent_id }));
    }

    /// `turn.queued` + `agent.turn_enqueued`; an anomaly instead when the agent takes no
    /// turns (terminated) or the turn exists (a duplicate fact).
    pub(super) fn enqueue(
        &mut self,
        agent_id: Uuid,
        cause: TurnCause,
        task_id: Option<Uuid>,
        input: TurnInput,
        fact: &str,
    ) {
        let turn_id = ids::turn_id(agent_id, &cause);
        let alive = self.s.agents().get(&agent_id).map(|a| a.is_alive());
        if alive != Some(true) {
            let instance = match alive {
                Some(_) => Instance::Agent(agent_id),
                None => Instance::Session(self.conv),
            };
            let reason = format!(
                "agent {agent_id} takes no turns: {} not enqueued",
                cause.as_key()
            );
            return self.anomaly(instance, fact, reason);
        }
        if self.s.turns().contains_key(&turn_id) {
            let reason = format!("turn for {} already enqueued", cause.as_key());
            return self.anomaly(Instance::Turn(turn_id), fact, reason);
        }
        let kind = if task_id.is_some() {
            TurnKind::Task
        } else {
            TurnKind::Conversation
        };
        let queued = TurnQueued {
            turn_id,
            agent_id,
            conversation_id: self.conv,
            kind,
            task_id,
            input,
        };
        self.turn(turn_id, TurnRune::Queued(queued));
        self.agent(agent_id, AgentRune::TurnEnqueued(TurnEnqueued { turn_id }));
    }

    /// L0 `dispatch_next` for every agent: while the session is active, an idle agent
    /// leases its inbox head (`turn_epoch + 1`) and the watchdog is armed.
    pub(super) fn dispatch_all(&mut self) {
        if self.session_state() != Some(SessionState::Active) {
            return;
        }
        let agent_ids: Vec<Uuid> = self.s.agents().keys().copied().collect();
        for agent_id in agent_ids {
            if self.s.agent_state(agent_id) != Some(AgentState::Idle) {
                continue;
            }
            let Some(agent) = self.s.agents().get(&agent_id) else {
                continue;
            };
            let Some(&turn_id) = agent.inbox().first() else {
                continue;
            };
            let turn_epoch = agent.turn_epoch() + 1;
            let lease = TurnDispatched {
                turn_id,
                turn_epoch,
            };
            self.agent(agent_id, AgentRune::TurnDispatched(lease));
            self.turn(
                turn_id,
                TurnRune::Dispatched(TurnLeased {
                    turn_id,
                    turn_epoch,
                }),
            );
            self.arm_watchdog(turn_id);
            if self
                .s
                .turns()
                .get(&turn_id)
                .is_some_and(Turn::starts_on_dispatch)
            {
                self.start(turn_id);
            }
        }
    }

    pub(super) fn arm_watchdog(&mut self, turn_id: Uuid) {
        let epoch = self.s.turns().get(&turn_id).map_or(0, Turn::watchdog_epoch);
        let after = self.config.turn_timeout;
        self.arm(
            Instance::Turn(turn_id),
            DeadlineKind::TurnTimeout,
            after,
            epoch,
        );
    }

    /// `turn.started` (dispatched → streaming), re-arming the watchdog; a conversation
    /// turn also moves the FCMP state to `running` and the plan out of `goal_received`.
    pub(super) fn start(&mut self, turn_id: Uuid) {
        let Some(turn) = self.s.turns().get(&turn_id) else {
            return;
        };
        let (Some(agent_id), Some(input)) = (turn.agent_id(), turn.input().cloned()) else {
            return;
        };
        let conversation = turn.kind() == Some(TurnKind::Conversation);
        let started = TurnStarted {
            turn_id,
            agent_id,
            input,
        };
        self.turn(turn_id, TurnRune::Started(started));
        self.arm_watchdog(turn_id);
        if conversation {
            self.fcmp(ConversationState::Running);
            self.plan_decompose();
        }
    }

    /// `turn.assistant_delta`, re-arming the watchdog.
    pub(super) fn delta(&mut self, turn_id: Uuid, message_id: Uuid) {
        let delta = AssistantDelta {
            turn_id,
            message_id,
        };
        self.turn(turn_id, TurnRune::AssistantDelta(delta));
        self.arm_watchdog(turn_id);
    }

    fn delivery(&self, turn_id: Uuid) -> (Option<Uuid>, MessageCount) {
        let turn = self.s.turns().get(&turn_id);
        let messages = turn.map_or(0, Turn::messages);
        let usage = turn.and_then(Turn::usage);
        (
            turn.and_then(Turn::last_message_id),
            MessageCount {
                messages,
                input_tokens: usage.map(|(input, _)| input),
                output_tokens: usage.map(|(_, output)| output),
            },
        )
    }

    /// `turn.completed`; the deliverable is the last message, else null with `no_message`.
    pub(super) fn complete(&mut self, turn_id: Uuid, final_output: FinalOutput) {
        self.cancel_calls(turn_id, "turn_completed");
        let (deliverable, usage) = self.delivery(turn_id);
        let leased = self.leased(turn_id);
        let completed = TurnCompleted {
            turn_id,
            final_output,
            usage,
            deliverable,
            deliverable_reason: deliverable.is_none().then(|| "no_message".into()),
        };
        self.turn(turn_id, TurnRune::Completed(completed));
        self.disarm_turn(turn_id, leased);
    }

    /// `turn.interrupted`; `deliverable_reason` is the interruption's reason.
    pub(super) fn interrupt(&mut self, turn_id: Uuid, reason: &str) {
        self.cancel_calls(turn_id, reason);
        let (deliverable, partial_output) = self.delivery(turn_id);
        let armed = self.s.turns().get(&turn_id).is_some_and(Turn::is_running);
        let leased = self.leased(turn_id);
        let interrupted = TurnInterrupted {
            turn_id,
            reason: reason.into(),
            partial_output,
            deliverable,
            deliverable_reason: Some(reason.into()),
        };
        self.turn(turn_id, TurnRune::Interrupted(interrupted));
        if armed {
            self.disarm_turn(turn_id, leased);
        }
    }

    /// `turn.error`; `deliverable_reason` is `why` (`watchdog`, `session_resume_failed`).
    pub(super) fn fail(&mut self, turn_id: Uuid, error_type: &str, message: String, why: &str) {
        self.cancel_calls(turn_id, error_type);
        let (deliverable, _) = self.delivery(turn_id);
        let leased = self.leased(turn_id);
        let error = TurnError {
            turn_id,
            error_type: error_type.into(),
            message,
            deliverable,
            deliverable_reason: Some(why.into()),
        };
        self.turn(turn_id, TurnRune::Error(error));
        self.disarm_turn(turn_id, leased);
    }

    /// Whether a worker holds the turn.
    pub(super) fn leased(&self, turn_id: Uuid) -> bool {
        self.s.turns().get(&turn_id).and_then(Turn::lease).is_some()
    }

    /// A turn that ended keeps no deadline: its watchdog and its worker's lease go.
    fn disarm_turn(&mut self, turn_id: Uuid, leased: bool) {
        self.disarm(Instance::Turn(turn_id), DeadlineKind::TurnTimeout);
        if leased {
            self.disarm(Instance::Turn(turn_id), DeadlineKind::TurnLease);
        }
    }
}
