//! `conversation.started` and `message.added`.

use uuid::Uuid;

use super::Step;
use crate::conversation::ConversationStarted;
use crate::message::MessageAdded;
use crate::saga::ids::TurnCause;
use crate::saga::input::{CONVERSATION_STARTED, MESSAGE_ADDED};
use crate::saga::rune::plan::{GoalReceived, PlanRune};
use crate::saga::rune::session::{
    Empty, ReplyAccepted, SessionActivated, SessionCreated, SessionRune, SessionSettings,
};
use crate::saga::rune::turn::TurnInput;
use crate::saga::rune::Instance;
use crate::saga::types::{AgentRole, ConversationState, SessionState, TurnKind, TurnState};
use crate::saga::Turn;
use crate::types::ActorKind;

impl Step<'_> {
    /// `session.created`, the root agent spawned and ready, `plan.goal_received`.
    pub(super) fn conversation_started(&mut self, fact: &ConversationStarted, ai_actors: &[Uuid]) {
        if self.session_state().is_some() {
            let reason = format!("conversation {} already started", fact.id);
            return self.anomaly(Instance::Session(self.conv), CONVERSATION_STARTED, reason);
        }
        let config = SessionSettings {
            session_timeout_secs: self.config.session_timeout.num_seconds(),
            turn_timeout_secs: self.config.turn_timeout.num_seconds(),
            error_threshold: self.config.error_threshold,
            token_budget: self.config.token_budget,
        };
        let conversation_id = self.conv;
        self.session(SessionRune::Created(SessionCreated {
            conversation_id,
            config,
        }));
        let llm = fact
            .actor_ids
            .iter()
            .copied()
            .find(|a| ai_actors.contains(a));
        self.spawn(llm.or(self.config.default_llm_actor), AgentRole::Root, None);
        self.plan(PlanRune::GoalReceived(GoalReceived {
            conversation_id,
            goal_description: fact.title.as_str().to_string(),
        }));
    }

    /// `created → active` on the first message or decision (`session.activated`).
    pub(super) fn activate(&mut self) {
        if self.session_state() == Some(SessionState::Created) {
            if let Some(root_agent_id) = self.root_id() {
                self.session(SessionRune::Activated(SessionActivated { root_agent_id }));
            }
        }
    }

    /// A message: a task turn's delta, the root agent speaking, or a human's input.
    pub(super) fn message_added(&mut self, fact: &MessageAdded, author: ActorKind) {
        let Some(state) = self.session_state() else {
            let reason = format!("message {}: no session", fact.id);
            return self.anomaly(Instance::Session(self.conv), MESSAGE_ADDED, reason);
        };
        let root = self.s.root_agent();
        let speaks = root.is_some_and(|r| match r.actor_id() {
            Some(actor) => actor == fact.actor_id,
            None => author == ActorKind::Ai,
        });
        let human = author == ActorKind::Human && !speaks;
        if !state.is_open() {
            if human {
                let reason = format!("human message {} on a {state} session", fact.id);
                self.anomaly(Instance::Session(self.conv), MESSAGE_ADDED, reason);
            }
            return;
        }
        self.activate();
        if let Some(turn_id) = self.fence {
            return self.fenced_delta(turn_id, fact.id);
        }
        if let Some(turn_id) = fact
            .task_id
            .and_then(|t| self.streaming_task_turn(t, fact.actor_id))
        {
            return self.delta(turn_id, fact.id);
        }
        if speaks {
            self.root_spoke(fact.id);
        } else if human {
            self.human_message(fact);
        }
    }

    /// A fenced message is its turn's output, or — its turn no longer streaming when the
    /// sagas reach it — an anomaly on that turn; never another turn's output.
    fn fenced_delta(&mut self, turn_id: Uuid, message_id: Uuid) {
        let state = self.s.turns().get(&turn_id).and_then(Turn::state);
        if state == Some(TurnState::Streaming) {
            return self.delta(turn_id, message_id);
        }
        let state = state.map_or("unknown", TurnState::as_str);
        let reason = format!("message {message_id} fenced to turn {turn_id}, which is {state}");
        self.fenced_anomaly(turn_id, MESSAGE_ADDED, reason);
    }

    /// A fenced fact that moves no turn: an anomaly on the turn it names — on the session
    /// when this conversation has no such turn (a turn is never made up by an anomaly).
    pub(super) fn fenced_anomaly(&mut self, turn_id: Uuid, fact: &str, reason: String) {
        let known = self
            .s
            .turns()
            .get(&turn_id)
            .is_some_and(|t| t.state().is_some());
        let instance = if known {
            Instance::Turn(turn_id)
        } else {
            Instance::Session(self.conv)
        };
        self.anomaly(instance, fact, reason);
    }

    /// The task's last turn, when it streams and `actor` is its agent's actor.
    fn streaming_task_turn(&self, task_id: Uuid, actor: Uuid) -> Option<Uuid> {
        let turn_id = *self.s.task_turns(task_id).last()?;
        let turn = self.s.turns().get(&turn_id)?;
        let agent = self.s.agents().get(&turn.agent_id()?)?;
        (turn.state() == Some(TurnState::Streaming) && agent.actor_id() == Some(actor))
            .then_some(turn_id)
    }

    /// The root agent's running conversation turn.
    pub(super) fn root_conversation_turn(&self) -> Option<&Turn> {
        let turn = self.s.active_turn(self.root_id()?)?;
        (turn.kind() == Some(TurnKind::Conversation)).then_some(turn)
    }

    /// The root agent's message: starts its dispatched conversation turn, or is a delta
    /// of the streaming one; with no conversation turn running it is no turn's input.
    fn root_spoke(&mut self, message_id: Uuid) {
        let Some(turn) = self.root_conversation_turn() else {
            return;
        };
        let (Some(turn_id), state) = (turn.id(), turn.state()) else {
            return;
        };
        match state {
            Some(TurnState::Dispatched) => {
                self.start(turn_id);
                self.delta(turn_id, message_id);
            }
            Some(TurnState::Streaming) => self.delta(turn_id, message_id),
            _ => {}
        }
    }

    /// A human's input: unsuspend, end the wait or steer, queue a conversation turn.
    fn human_message(&mut self, fact: &MessageAdded) {
        // A human message lifts an error-threshold suspension, never a budget one.
        let suspended = self
            .s
            .session()
            .filter(|s| s.state() == Some(SessionState::Suspended));
        if suspended.is_some_and(|s| !s.budget_exhausted()) {
            self.session(SessionRune::Unsuspended(Empty {}));
        }
        if self.cs() == Some(ConversationState::WaitingUser) {
            let message_id = fact.id;
            self.session(SessionRune::ReplyAccepted(ReplyAccepted { message_id }));
            self.disarm(
                Instance::Session(self.conv),
                crate::saga::DeadlineKind::SessionTimeout,
            );
        } else if let Some(turn) = self.root_conversation_turn() {
            let steer = matches!(
                turn.state(),
                Some(TurnState::Streaming | TurnState::ToolExecuting)
            );
            if let (true, Some(turn_id)) = (steer, turn.id()) {
                self.interrupt(turn_id, "steer");
            }
        }
        self.fcmp(ConversationState::Queued);
        self.plan_unblock();
        if let Some(root) = self.root_id() {
            let input = TurnInput::Message {
                message_id: fact.id,
            };
            self.enqueue(
                root,
                TurnCause::Message(fact.id),
                None,
                input,
                MESSAGE_ADDED,
            );
        }
    }
}
