//! Workers' requests on turns (WORKERS.md): claim, release, error, usage, tool calls
//! (decided in `tools`), and the operator's interrupt; and the lease deadline. A request the turn's machine has no edge
//! for is refused (nothing written); the reports are fenced by their claim's epoch.

use chrono::Duration;
use uuid::Uuid;

use super::Step;
use crate::saga::input::{TURN_FENCED, TURN_NOT_CLAIMABLE, TURN_TRANSITION_NOT_ALLOWED};
use crate::saga::rune::turn::{LeaseExpired, TurnClaimed, TurnReleased, TurnRune, UsageReported};
use crate::saga::rune::Instance;
use crate::saga::types::{SessionState, TurnState};
use crate::saga::{ControlError, Deadline, DeadlineKind, LeaseHeld, Turn, WorkerOp};

/// `turn.error`'s `error_type` (and `deliverable_reason`) when the claims ran out.
pub(crate) const LEASE_EXPIRED: &str = "lease_expired";

impl Step<'_> {
    /// A worker's request on `turn_id`.
    pub(super) fn worker(&mut self, turn_id: Uuid, op: WorkerOp) -> Result<(), ControlError> {
        let turn = self
            .s
            .turns()
            .get(&turn_id)
            .filter(|t| t.state().is_some())
            .cloned()
            .ok_or(ControlError::TurnNotFound)?;
        match op {
            WorkerOp::Claim { worker, lease } => self.claim(turn_id, worker, lease),
            WorkerOp::Interrupt { reason } => {
                let state = turn.state().unwrap_or(TurnState::Queued);
                if !turn.is_running() {
                    return Err(not_allowed(
                        TURN_TRANSITION_NOT_ALLOWED,
                        format!("the turn is {state}: only a running turn can be interrupted"),
                    ));
                }
                if let Some(lease) = turn.lease() {
                    // A fenced completion that ended the lease wins the race.
                    self.out.leases.push(LeaseHeld {
                        turn_id,
                        turn_epoch: lease.turn_epoch,
                        live_at: None,
                    });
                }
                self.interrupt(turn_id, &reason);
                self.conversation_turn_ended(turn_id, super::timers::TURN_INTERRUPTED);
                Ok(())
            }
            WorkerOp::Release { turn_epoch, reason } => {
                self.fenced(&turn, turn_id, turn_epoch)?;
                self.turn(
                    turn_id,
                    TurnRune::Released(TurnReleased {
                        turn_id,
                        turn_epoch,
                        reason,
                    }),
                );
                self.disarm(Instance::Turn(turn_id), DeadlineKind::TurnLease);
                Ok(())
            }
            WorkerOp::Error {
                turn_epoch,
                error_type,
                message,
            } => {
                self.fenced(&turn, turn_id, turn_epoch)?;
                self.fail(turn_id, &error_type, message, "stream_error");
                self.turn_errored(turn_id);
                Ok(())
            }
            WorkerOp::Usage {
                turn_epoch,
                input_tokens,
                output_tokens,
            } => {
                self.fenced(&turn, turn_id, turn_epoch)?;
                self.turn(
                    turn_id,
                    TurnRune::UsageReported(UsageReported {
                        turn_id,
                        input_tokens,
                        output_tokens,
                    }),
                );
                self.check_budget();
                Ok(())
            }
            WorkerOp::ToolCalls {
                turn_epoch,
                calls,
                resume_deadline,
                rules,
                reporter,
            } => self.report_calls(&turn, turn_epoch, calls, resume_deadline, &rules, &reporter),
            WorkerOp::Tool { call_id, op } => self.tool_op(turn_id, &call_id, op),
        }
    }

    /// The report's claim must hold the turn (its runes say so here; the store checks the
    /// lease is still live when the outcome is written).
    pub(super) fn fenced(
        &mut self,
        turn: &Turn,
        turn_id: Uuid,
        turn_epoch: i64,
    ) -> Result<(), ControlError> {
        turn.fence(turn_epoch)
            .map_err(|why| not_allowed(TURN_FENCED, why.to_string()))?;
        self.out.leases.push(LeaseHeld {
            turn_id,
            turn_epoch,
            live_at: Some(self.now),
        });
        Ok(())
    }

    /// A new lease under the next epoch; the turn's first claim starts it.
    fn claim(
        &mut self,
        turn_id: Uuid,
        worker: String,
        lease: Duration,
    ) -> Result<(), ControlError> {
        let session = self.session_state();
        if session != Some(SessionState::Active) {
            let session = session.map_or("none", SessionState::as_str);
            return Err(not_allowed(
                TURN_NOT_CLAIMABLE,
                format!("the session is {session}"),
            ));
        }
        let Some(turn) = self.s.turns().get(&turn_id).filter(|t| t.is_claimable()) else {
            let state = self.state_of(Instance::Turn(turn_id));
            return Err(not_allowed(
                TURN_NOT_CLAIMABLE,
                format!("the turn is {state} and held or not runnable"),
            ));
        };
        if turn.state() == Some(TurnState::Dispatched) {
            self.start(turn_id);
        }
        let turn_epoch = self
            .s
            .turns()
            .get(&turn_id)
            .and_then(Turn::turn_epoch)
            .unwrap_or(0)
            + 1;
        let lease_expires_at = self.now + lease;
        self.turn(
            turn_id,
            TurnRune::Claimed(TurnClaimed {
                turn_id,
                turn_epoch,
                worker,
                lease_expires_at,
            }),
        );
        self.arm(
            Instance::Turn(turn_id),
            DeadlineKind::TurnLease,
            lease,
            turn_epoch,
        );
        Ok(())
    }

    /// The lease deadline of `deadline.epoch` fell due: the claim is fenced off, and the
    /// turn is claimable again — or, its claims spent, ends in `turn.error`.
    pub(super) fn lease_due(&mut self, turn_id: Uuid, deadline: &Deadline) {
        let Some(turn) = self.s.turns().get(&turn_id) else {
            return;
        };
        let Some(lease) = turn.lease().filter(|l| l.turn_epoch == deadline.epoch) else {
            return;
        };
        let worker = lease.worker.clone();
        self.turn(
            turn_id,
            TurnRune::LeaseExpired(LeaseExpired {
                turn_id,
                turn_epoch: deadline.epoch,
                worker,
            }),
        );
        let expired = self.s.turns().get(&turn_id).map_or(0, Turn::expired_claims);
        let max = self.config.max_claims;
        if expired >= max {
            let message = format!("{expired} claims of the turn expired (at most {max})");
            self.fail(turn_id, LEASE_EXPIRED, message, LEASE_EXPIRED);
            self.turn_errored(turn_id);
        }
    }
}

pub(super) fn not_allowed(code: &'static str, detail: String) -> ControlError {
    ControlError::NotAllowed { code, detail }
}
