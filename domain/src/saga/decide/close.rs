//! Ending agents and sessions: terminate an agent (its open turns interrupted, each with
//! its terminal rune) and close the session once every agent is terminated.

use uuid::Uuid;

use super::Step;
use crate::saga::rune::agent::{AgentRune, AgentStats, AgentTerminated};
use crate::saga::rune::session::{FinalStats, Reason, SessionClosed, SessionRune, TurnCounts};
use crate::saga::rune::Instance;
use crate::saga::types::{AgentState, TurnState};
use crate::saga::{DeadlineKind, Turn};

impl Step<'_> {
    /// Ends every open turn of an agent (its running turn with `running_reason`, each
    /// queued one with `queued_reason`), then `agent.terminated`.
    pub(super) fn terminate(
        &mut self,
        agent_id: Uuid,
        reason: &str,
        running_reason: &str,
        queued_reason: &str,
    ) {
        if let Some(turn_id) = self.s.active_turn(agent_id).and_then(Turn::id) {
            self.interrupt(turn_id, running_reason);
        }
        let inbox = self
            .s
            .agents()
            .get(&agent_id)
            .map(|a| a.inbox().to_vec())
            .unwrap_or_default();
        for turn_id in inbox {
            let queued =
                self.s.turns().get(&turn_id).and_then(Turn::state) == Some(TurnState::Queued);
            if queued {
                self.interrupt(turn_id, queued_reason);
            }
        }
        let stats = AgentStats {
            turn_epoch: self.s.agents().get(&agent_id).map_or(0, |a| a.turn_epoch()),
            turns: self.count(|t| t.agent_id() == Some(agent_id)),
        };
        let terminated = AgentTerminated {
            agent_id,
            reason: reason.into(),
            stats,
        };
        self.agent(agent_id, AgentRune::Terminated(terminated));
    }

    fn count(&self, filter: impl Fn(&Turn) -> bool) -> TurnCounts {
        let mut counts = TurnCounts::default();
        for turn in self.s.turns().values().filter(|t| filter(t)) {
            match turn.state() {
                Some(TurnState::Completed) => counts.completed += 1,
                Some(TurnState::Interrupted) => counts.interrupted += 1,
                Some(TurnState::Error) => counts.error += 1,
                _ => {}
            }
        }
        counts
    }

    /// `session.closing`, every live agent terminated (its open turns interrupted with
    /// `session_closed`), deadlines disarmed, `session.closed`.
    pub(super) fn close(&mut self, reason: &str) {
        self.session(SessionRune::Closing(Reason {
            reason: reason.into(),
        }));
        let agent_ids: Vec<Uuid> = self.s.agents().keys().copied().collect();
        for agent_id in agent_ids {
            let live = matches!(
                self.s.agents().get(&agent_id).and_then(|a| a.state()),
                Some(AgentState::Idle | AgentState::RunningTurn)
            );
            if live {
                let why = "session_closed";
                self.terminate(agent_id, why, why, why);
            }
        }
        self.disarm(Instance::Session(self.conv), DeadlineKind::SessionTimeout);
        let final_stats = FinalStats {
            agents: u32::try_from(self.s.agents().len()).unwrap_or(u32::MAX),
            turns: self.count(|_| true),
            assistant_messages: self.s.turns().values().map(Turn::messages).sum(),
        };
        self.session(SessionRune::Closed(SessionClosed { final_stats }));
    }
}
