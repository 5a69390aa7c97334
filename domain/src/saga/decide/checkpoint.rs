//! `conversation.checkpoint.created`: it ends the root agent's conversation turn (starting
//! it first when only dispatched), then moves the session by its type.

use super::plan::Review;
use super::Step;
use crate::checkpoint::ConversationCheckpointCreated;
use crate::saga::input::CHECKPOINT_CREATED;
use crate::saga::rune::plan::{PlanRune, PlanStopped};
use crate::saga::rune::session::{Empty, ErrorCode, SessionRune, UserInputRequired};
use crate::saga::rune::turn::FinalOutput;
use crate::saga::rune::Instance;
use crate::saga::types::{ConversationState, PlanState, TurnState};
use crate::saga::DeadlineKind;
use crate::types::CheckpointType;

/// `conversation.failed`'s error when a `CLOSE_CONVERSATION` cancels the conversation.
pub(crate) const CONVERSATION_CANCELED: &str = "CONVERSATION_CANCELED";

impl Step<'_> {
    /// A conversation checkpoint (only the LLM creates them).
    pub(super) fn checkpoint_created(&mut self, fact: &ConversationCheckpointCreated) {
        let kind = fact.checkpoint_type;
        let state = self.session_state();
        let Some(state) = state.filter(|s| s.is_open()) else {
            let state = state.map_or("no", |s| s.as_str());
            let reason = format!("checkpoint {} ({kind}) on a {state} session", fact.id);
            return self.anomaly(Instance::Session(self.conv), CHECKPOINT_CREATED, reason);
        };
        if state == crate::saga::SessionState::Created
            && kind == CheckpointType::ConversationStarted
        {
            return;
        }
        self.activate();
        self.end_conversation_turn(fact);
        let session = Instance::Session(self.conv);
        match kind {
            CheckpointType::ConversationStarted => {}
            CheckpointType::NeedInformation => {
                self.fcmp(ConversationState::WaitingUser);
                let checkpoint_id = fact.id;
                self.session(SessionRune::UserInputRequired(UserInputRequired {
                    checkpoint_id,
                }));
                let epoch = self.s.session().map_or(0, |s| s.wait_epoch());
                let after = self.config.session_timeout;
                self.arm(session, DeadlineKind::SessionTimeout, after, epoch);
                if self.plan_state() == Some(PlanState::Executing) {
                    self.plan_move(PlanState::Blocked, "all_runnable_blocked");
                }
            }
            CheckpointType::BeginWork => {
                if self.cs() == Some(ConversationState::WaitingUser) {
                    self.disarm(session, DeadlineKind::SessionTimeout);
                }
                self.fcmp(ConversationState::Running);
                self.plan_execute("plan_approved", Review::Replan);
            }
            CheckpointType::WorkCompleted => {
                self.fcmp(ConversationState::Succeeded);
                self.session(SessionRune::ConversationCompleted(Empty {}));
                self.plan_goal_met("work_completed");
                self.close("work_completed");
            }
            CheckpointType::CloseConversation => {
                self.fcmp(ConversationState::Canceled);
                let error = CONVERSATION_CANCELED.to_string();
                self.session(SessionRune::ConversationFailed(ErrorCode { error }));
                let stoppable = [
                    PlanState::Planning,
                    PlanState::Executing,
                    PlanState::Blocked,
                ];
                if self.plan_state().is_some_and(|s| stoppable.contains(&s)) {
                    let reason = "user_cancel".to_string();
                    self.plan(PlanRune::Stopped(PlanStopped { reason }));
                }
                self.close("close_conversation");
            }
        }
    }

    /// The root agent's conversation turn: dispatched → started; streaming → completed
    /// with the checkpoint as its final output. No conversation turn: nothing.
    fn end_conversation_turn(&mut self, fact: &ConversationCheckpointCreated) {
        if let Some(turn_id) = self.fence {
            return self.end_fenced_turn(turn_id, fact);
        }
        let Some(turn) = self.root_conversation_turn() else {
            return;
        };
        let (Some(turn_id), state) = (turn.id(), turn.state()) else {
            return;
        };
        if state == Some(TurnState::Dispatched) {
            self.start(turn_id);
        }
        let running = self.s.turns().get(&turn_id).and_then(|t| t.state());
        if matches!(
            running,
            Some(TurnState::Streaming | TurnState::ToolExecuting)
        ) {
            let output = FinalOutput::ConversationCheckpoint {
                checkpoint_id: fact.id,
                checkpoint_type: fact.checkpoint_type,
            };
            self.complete(turn_id, output);
        }
    }

    /// A fenced checkpoint ends the conversation turn it names — or, that turn not running
    /// when the sagas reach it, is an anomaly on it and moves the session only.
    fn end_fenced_turn(&mut self, turn_id: uuid::Uuid, fact: &ConversationCheckpointCreated) {
        let turn = self.s.turns().get(&turn_id);
        let state = turn.and_then(|t| t.state());
        let conversation = turn.and_then(|t| t.kind()) == Some(crate::saga::TurnKind::Conversation);
        if conversation && matches!(state, Some(TurnState::Streaming | TurnState::ToolExecuting)) {
            let output = FinalOutput::ConversationCheckpoint {
                checkpoint_id: fact.id,
                checkpoint_type: fact.checkpoint_type,
            };
            return self.complete(turn_id, output);
        }
        let state = state.map_or("unknown", TurnState::as_str);
        let reason = format!(
            "checkpoint {} fenced to turn {turn_id}, which is a {state} {} turn",
            fact.id,
            if conversation { "conversation" } else { "task" }
        );
        self.fenced_anomaly(turn_id, CHECKPOINT_CREATED, reason);
    }
}
