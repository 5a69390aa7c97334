//! Due deadlines (session timeout → auto-decide, turn watchdog → error and perhaps
//! suspension) and the start-up recovery of FCMP §4. A deadline whose epoch or state
//! moved on does nothing at all (L0 CAS gating).

use super::Step;
use crate::saga::ids::TurnCause;
use crate::saga::rune::session::{
    AutoDecideTimeout, BudgetInfo, Empty, ErrorCode, SessionRune, SessionSuspended,
};
use crate::saga::rune::turn::TurnInput;
use crate::saga::rune::Instance;
use crate::saga::types::{ConversationState, SessionState};
use crate::saga::{Deadline, DeadlineKind};

/// `conversation.failed`'s error when the error threshold suspends the session.
pub(crate) const TURN_ERROR_THRESHOLD: &str = "TURN_ERROR_THRESHOLD";
/// `conversation.failed`'s error when a conversation turn ends in `turn.error` below the
/// error threshold.
pub(crate) const TURN_ERROR: &str = "TURN_ERROR";
/// `conversation.failed`'s error when an operator interrupts a conversation turn.
pub(crate) const TURN_INTERRUPTED: &str = "TURN_INTERRUPTED";
/// The error of `restart.reconcile_failed` and its `conversation.failed`.
pub(crate) const SESSION_RESUME_FAILED: &str = "SESSION_RESUME_FAILED";

impl Step<'_> {
    /// A deadline row fell due.
    pub(super) fn deadline_due(&mut self, deadline: &Deadline) {
        match (deadline.instance, deadline.kind) {
            (Instance::Session(id), DeadlineKind::SessionTimeout) if id == self.conv => {
                self.auto_decide(deadline.epoch);
            }
            (Instance::Turn(turn_id), DeadlineKind::TurnTimeout) => {
                let Some(turn) = self.s.turns().get(&turn_id) else {
                    return;
                };
                if !turn.is_running() || turn.watchdog_epoch() != deadline.epoch {
                    return;
                }
                let secs = self.config.turn_timeout.num_seconds();
                let message = format!("no progress within {secs} s (watchdog)");
                self.fail(turn_id, "timeout", message, "watchdog");
                self.turn_errored(turn_id);
            }
            (Instance::Turn(turn_id), DeadlineKind::TurnLease) => {
                self.lease_due(turn_id, deadline);
            }
            (
                _,
                DeadlineKind::ToolApproval | DeadlineKind::ToolExecution | DeadlineKind::ToolResume,
            ) => self.tool_due(deadline),
            _ => {}
        }
    }

    /// FCMP §3: the wait timed out; the LLM decides without the reply.
    fn auto_decide(&mut self, epoch: i64) {
        let Some(session) = self.s.session() else {
            return;
        };
        let waiting = session.conversation_state() == Some(ConversationState::WaitingUser);
        if !session.is_live() || !waiting || session.wait_epoch() != epoch {
            return;
        }
        let checkpoint_id = session.waiting_checkpoint_id();
        self.session(SessionRune::AutoDecideTimeout(AutoDecideTimeout {
            checkpoint_id,
        }));
        self.fcmp(ConversationState::Queued);
        self.disarm(Instance::Session(self.conv), DeadlineKind::SessionTimeout);
        self.plan_unblock();
        if let Some(root) = self.root_id() {
            let cause = TurnCause::AutoDecide {
                conversation_id: self.conv,
                wait_epoch: epoch,
            };
            let input = TurnInput::AutoDecide { checkpoint_id };
            self.enqueue(
                root,
                cause,
                None,
                input,
                DeadlineKind::SessionTimeout.as_str(),
            );
        }
    }

    /// A turn ended in `turn.error`: at the threshold the session suspends; below it a
    /// conversation turn's end moves the FCMP state ([`Step::conversation_turn_ended`]).
    pub(super) fn turn_errored(&mut self, turn_id: uuid::Uuid) {
        let at_threshold = self.s.consecutive_errors() >= self.config.error_threshold;
        if at_threshold && self.session_state() == Some(SessionState::Active) {
            return self.error_threshold();
        }
        self.conversation_turn_ended(turn_id, TURN_ERROR);
    }

    /// FCMP (flow 1, `turn.failed → failed`) for a conversation turn that ended without
    /// a decision — `turn.error` below the threshold, or an operator's interrupt — so the
    /// session never shows `running` with nothing running: `queued` when the root agent
    /// has another conversation turn waiting (its dispatch follows), else `failed` with
    /// `conversation.failed` (`error`), which the next human message continues from.
    pub(super) fn conversation_turn_ended(&mut self, turn_id: uuid::Uuid, error: &str) {
        let Some(turn) = self.s.turns().get(&turn_id) else {
            return;
        };
        let conversation = turn.kind() == Some(crate::saga::TurnKind::Conversation);
        let moving = matches!(
            self.cs(),
            Some(ConversationState::Queued | ConversationState::Running)
        );
        if !conversation || !moving || self.session_state() != Some(SessionState::Active) {
            return;
        }
        let waiting = self.s.root_agent().is_some_and(|root| {
            root.inbox().iter().any(|t| {
                self.s.turns().get(t).and_then(|t| t.kind())
                    == Some(crate::saga::TurnKind::Conversation)
            })
        });
        if waiting {
            return self.fcmp(ConversationState::Queued);
        }
        self.fcmp(ConversationState::Failed);
        let error = error.to_string();
        self.session(SessionRune::ConversationFailed(ErrorCode { error }));
    }

    /// `error_threshold` consecutive turn errors suspend an active session: FCMP `failed`.
    fn error_threshold(&mut self) {
        let consecutive_errors = self.s.consecutive_errors();
        let threshold = self.config.error_threshold;
        if consecutive_errors < threshold || self.session_state() != Some(SessionState::Active) {
            return;
        }
        let budget_info = BudgetInfo::Errors {
            consecutive_errors,
            threshold,
        };
        let reason = "error_threshold".to_string();
        self.session(SessionRune::Suspended(SessionSuspended {
            reason,
            budget_info,
        }));
        if self.cs() == Some(ConversationState::WaitingUser) {
            self.disarm(Instance::Session(self.conv), DeadlineKind::SessionTimeout);
        }
        self.fcmp(ConversationState::Failed);
        let error = TURN_ERROR_THRESHOLD.to_string();
        self.session(SessionRune::ConversationFailed(ErrorCode { error }));
    }

    /// FCMP §4 at start-up: keep a wait (its deadline fires normally), or fail the
    /// conversation turn whose watchdog fell due while the service was down.
    pub(super) fn restart(&mut self, overdue: &[Deadline]) {
        let Some(session) = self.s.session().filter(|s| s.is_live()) else {
            return;
        };
        let cs = session.conversation_state();
        if cs == Some(ConversationState::WaitingUser) {
            return self.session(SessionRune::PreserveWaiting(Empty {}));
        }
        let Some(turn) = self.root_conversation_turn() else {
            return;
        };
        let (Some(turn_id), epoch) = (turn.id(), turn.watchdog_epoch()) else {
            return;
        };
        let is_overdue = overdue.iter().any(|d| {
            d.instance == Instance::Turn(turn_id)
                && d.kind == DeadlineKind::TurnTimeout
                && d.epoch == epoch
        });
        let resumable = matches!(
            cs,
            Some(ConversationState::Queued | ConversationState::Running)
        );
        if !is_overdue || !resumable {
            return;
        }
        let error = SESSION_RESUME_FAILED.to_string();
        self.session(SessionRune::ReconcileFailed(ErrorCode { error }));
        let message = "the turn's watchdog fell due while the service was down".to_string();
        self.fail(
            turn_id,
            "session_resume_failed",
            message,
            "session_resume_failed",
        );
        self.fcmp(ConversationState::Failed);
        let error = SESSION_RESUME_FAILED.to_string();
        self.session(SessionRune::ConversationFailed(ErrorCode { error }));
    }
}
