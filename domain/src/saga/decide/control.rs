//! Operator controls: each is a diagram edge or a refusal that writes nothing.

use super::Step;
use crate::saga::input::{AGENT_TRANSITION_NOT_ALLOWED, SESSION_TRANSITION_NOT_ALLOWED};
use crate::saga::rune::session::{
    BudgetAdded, BudgetInfo, Empty, Reason, SessionRune, SessionSuspended,
};
use crate::saga::session::BUDGET_EXHAUSTED;
use crate::saga::types::{AgentState, SessionState};
use crate::saga::{Control, ControlError};

impl Step<'_> {
    /// Pause (`active → paused`), Resume (`paused → active` or `suspended → active`),
    /// Archive (`closed → archived`), Kill (`idle | running_turn → terminated`).
    pub(super) fn control(&mut self, control: Control) -> Result<(), ControlError> {
        if let Control::Kill { agent_id } = control {
            let state = self
                .s
                .agent_state(agent_id)
                .ok_or(ControlError::AgentNotFound)?;
            if !matches!(state, AgentState::Idle | AgentState::RunningTurn) {
                return Err(ControlError::NotAllowed {
                    code: AGENT_TRANSITION_NOT_ALLOWED,
                    detail: format!("agent {agent_id} is {state}: it cannot be killed"),
                });
            }
            self.terminate(agent_id, "killed", "killed", "agent_terminated");
            return Ok(());
        }
        let state = self.session_state().ok_or(ControlError::SessionNotFound)?;
        if let Control::AddBudget { add_tokens } = control {
            return self.add_budget(state, add_tokens);
        }
        if control == Control::Resume && self.s.session().is_some_and(|s| s.budget_exhausted()) {
            return Err(ControlError::NotAllowed {
                code: SESSION_TRANSITION_NOT_ALLOWED,
                detail: "the session is suspended because its token budget ran out: only \
                         POST /v1/sessions/{id}/budget lifts that"
                    .into(),
            });
        }
        let rune = match (&control, state) {
            (Control::Pause { reason }, SessionState::Active) => SessionRune::Paused(Reason {
                reason: reason.clone(),
            }),
            (Control::Resume, SessionState::Paused) => SessionRune::Resumed(Empty {}),
            (Control::Resume, SessionState::Suspended) => SessionRune::Unsuspended(Empty {}),
            (Control::Archive, SessionState::Closed) => SessionRune::Archived(Empty {}),
            _ => {
                let name = match control {
                    Control::Pause { .. } => "pause",
                    Control::Resume => "resume",
                    Control::Archive => "archive",
                    Control::Kill { .. } => "kill",
                    Control::AddBudget { .. } => "add budget",
                };
                return Err(ControlError::NotAllowed {
                    code: SESSION_TRANSITION_NOT_ALLOWED,
                    detail: format!("the session is {state}: it cannot {name}"),
                });
            }
        };
        self.session(rune);
        Ok(())
    }

    /// `session.budget_added`, then `session.unsuspended` when the new budget covers what
    /// a budget-suspended session used.
    fn add_budget(&mut self, state: SessionState, add_tokens: u64) -> Result<(), ControlError> {
        let session = self.s.session().ok_or(ControlError::SessionNotFound)?;
        let refuse = |detail: String| {
            Err(ControlError::NotAllowed {
                code: SESSION_TRANSITION_NOT_ALLOWED,
                detail,
            })
        };
        if !state.is_open() {
            return refuse(format!("the session is {state}: it takes no budget"));
        }
        let Some(budget) = session.token_budget() else {
            return refuse(
                "the session has no token budget (PM_SESSION_TOKEN_BUDGET was unset when it \
                 was created): its tokens are unlimited"
                    .into(),
            );
        };
        let exhausted = session.budget_exhausted();
        let token_budget = budget.saturating_add(add_tokens);
        self.session(SessionRune::BudgetAdded(BudgetAdded {
            add_tokens,
            token_budget,
        }));
        if exhausted && self.s.tokens_used() < token_budget {
            self.session(SessionRune::Unsuspended(Empty {}));
        }
        Ok(())
    }

    /// After usage was reported: an active session whose turns used its whole token budget
    /// is suspended (`budget_exhausted`); the running turn may finish, nothing new is
    /// dispatched.
    pub(super) fn check_budget(&mut self) {
        let Some(token_budget) = self.s.session().and_then(|s| s.token_budget()) else {
            return;
        };
        let tokens_used = self.s.tokens_used();
        if tokens_used < token_budget || self.session_state() != Some(SessionState::Active) {
            return;
        }
        self.session(SessionRune::Suspended(SessionSuspended {
            reason: BUDGET_EXHAUSTED.into(),
            budget_info: BudgetInfo::Tokens {
                tokens_used,
                token_budget,
            },
        }));
    }
}
