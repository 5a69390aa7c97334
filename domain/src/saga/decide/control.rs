//! Operator controls: each is a diagram edge or a refusal that writes nothing.

use super::Step;
use crate::saga::input::{AGENT_TRANSITION_NOT_ALLOWED, SESSION_TRANSITION_NOT_ALLOWED};
use crate::saga::rune::session::{Empty, Reason, SessionRune};
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
}
