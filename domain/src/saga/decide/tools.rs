//! Tool calls (WORKERS.md "Tools", ECHS Tool lifecycle, L0 §3.3–3.6): a claimed turn
//! reports a batch and suspends; approvers and executors move each call to its one
//! result; the deadlines time calls out; the last result resumes the turn, claimable again.
//! A turn that ends while calls are open cancels them first ([`Step::cancel_calls`]).

use chrono::Duration;
use uuid::Uuid;

use super::Step;
use crate::saga::ids;
use crate::saga::input::{
    APPROVER_FORBIDDEN, SELF_APPROVAL_FORBIDDEN, TOOL_CALL_EXISTS, TOOL_CALL_NOT_AWAITING_APPROVAL,
    TOOL_CALL_NOT_EXECUTING, TOOL_CALL_TERMINAL,
};
use crate::saga::rune::tool::{
    ApprovalRequested, ToolApproved, ToolCalled, ToolDenied, ToolProgress, ToolResult, ToolRune,
};
use crate::saga::rune::turn::{ToolCallsReceived, ToolSummary, ToolsFinished, TurnRune};
use crate::saga::rune::Instance;
use crate::saga::types::{ToolCallState, ToolStatus, TurnState};
use crate::saga::{
    ControlError, Deadline, DeadlineKind, Decision, NewToolCall, ToolCall, ToolOp, Turn,
};
use crate::tool_policy::{Applied, PolicyRules, Undecidable, Verdict, DEFAULT_POLICY};

/// `tool.result`'s `reason` when nobody approved in time.
pub(crate) const APPROVAL_TIMEOUT: &str = "approval_timeout";
/// `tool.result`'s `reason` when the call ran longer than its timeout.
pub(crate) const EXECUTION_TIMEOUT: &str = "execution_timeout";
/// `tool.result`'s `reason` when the batch's `resume_deadline` passed.
pub(crate) const RESUME_DEADLINE: &str = "resume_deadline";

impl Step<'_> {
    /// `POST /v1/turns/{id}/tool-calls`: the same batch again changes nothing; a used
    /// `call_id` is refused; otherwise the claim must hold the turn, which suspends, and
    /// each call goes as its tool policy says.
    pub(super) fn report_calls(
        &mut self,
        turn: &Turn,
        turn_epoch: i64,
        calls: Vec<NewToolCall>,
        resume_deadline: Option<Duration>,
        rules: &PolicyRules,
        reporter: &str,
    ) -> Result<(), ControlError> {
        let turn_id = turn.id().ok_or(ControlError::TurnNotFound)?;
        let known: Vec<Option<&ToolCall>> = calls
            .iter()
            .map(|c| self.s.tool_call(turn_id, &c.call_id))
            .collect();
        if !calls.is_empty() && known.iter().all(Option::is_some) {
            // The same calls again: a worker asking for approval where its call runs
            // unapproved asks for something else; the other way round its policy already
            // asked for more care than it does now.
            let same = calls.iter().zip(&known).all(|(new, old)| {
                old.is_some_and(|old| {
                    old.tool_name() == new.tool_name
                        && *old.arguments() == new.arguments
                        && (old.requires_approval() || !new.requires_approval)
                        && old.timeout_ms() == new.timeout_ms
                })
            });
            if same {
                return Ok(());
            }
        }
        if let Some((call, _)) = calls.iter().zip(&known).find(|(_, old)| old.is_some()) {
            return Err(super::worker::not_allowed(
                TOOL_CALL_EXISTS,
                format!("the turn already has a call {}", call.call_id),
            ));
        }
        self.fenced(turn, turn_id, turn_epoch)?;
        let call_ids = calls.iter().map(|c| c.call_id.clone()).collect();
        self.turn(
            turn_id,
            TurnRune::ToolCallsReceived(ToolCallsReceived { turn_id, call_ids }),
        );
        self.disarm(Instance::Turn(turn_id), DeadlineKind::TurnLease);
        // While suspended the calls' own deadlines bound the turn; the watchdog is armed
        // again when it resumes.
        self.disarm(Instance::Turn(turn_id), DeadlineKind::TurnTimeout);
        // Denials end their calls only once the whole batch is called: the last result
        // of a batch resumes the turn, which must not happen before its other calls exist.
        let mut denials = Vec::new();
        for call in calls {
            let applied = rules.decide(&call.tool_name);
            denials.extend(self.call(turn_id, call, &applied, reporter));
        }
        for (id, call_id, reason) in denials {
            let denied = ToolDenied {
                call_id: call_id.clone(),
                reason: reason.clone(),
                approver: None,
                on_behalf_of: None,
                comment: None,
            };
            self.tool(id, ToolRune::Denied(denied));
            self.end_call(id, call_id, ToolStatus::Denied, Some(reason));
        }
        if let Some(after) = resume_deadline {
            let batch = self.s.turns().get(&turn_id).map_or(0, Turn::batches);
            self.arm(
                Instance::Turn(turn_id),
                DeadlineKind::ToolResume,
                after,
                batch,
            );
        }
        Ok(())
    }

    /// `tool.call` under its policy, then as the policy's verdict says: executing (its
    /// execution deadline armed) or `tool.approval_requested` (its approval deadline
    /// armed); a denied call is answered (its id, `call_id` and reason) for the caller to
    /// end once the batch is called.
    fn call(
        &mut self,
        turn_id: Uuid,
        call: NewToolCall,
        applied: &Applied,
        reporter: &str,
    ) -> Option<(Uuid, String, String)> {
        let id = ids::tool_call_id(turn_id, &call.call_id);
        let call_id = call.call_id.clone();
        let verdict = applied.verdict(call.requires_approval, call.policy_reason);
        self.tool(
            id,
            ToolRune::Call(ToolCalled {
                call_id: call.call_id,
                tool_name: call.tool_name,
                arguments: call.arguments,
                turn_id,
                requires_approval: matches!(verdict, Verdict::Approve { .. }),
                timeout_ms: call.timeout_ms,
                policy: Some(applied.policy.clone()),
                action: Some(applied.action),
                reported_by: Some(reporter.to_string()),
            }),
        );
        match verdict {
            Verdict::Run => self.arm_execution(id),
            Verdict::Approve { reason, approvers } => {
                let requested = ApprovalRequested {
                    call_id,
                    policy_reason: reason,
                    approvers: Some(approvers),
                };
                self.tool(id, ToolRune::ApprovalRequested(requested));
                let after = self.config.tool_approval_timeout;
                self.arm(Instance::ToolCall(id), DeadlineKind::ToolApproval, after, 0);
            }
            Verdict::Deny { reason } => return Some((id, call_id, reason)),
        }
        None
    }

    fn arm_execution(&mut self, id: Uuid) {
        let own = self.s.tool_calls().get(&id).and_then(ToolCall::timeout_ms);
        let after = own
            .and_then(|ms| i64::try_from(ms).ok())
            .map_or(self.config.tool_timeout, Duration::milliseconds);
        self.arm(
            Instance::ToolCall(id),
            DeadlineKind::ToolExecution,
            after,
            0,
        );
    }

    /// A request on one call: approve, deny, progress, result.
    pub(super) fn tool_op(
        &mut self,
        turn_id: Uuid,
        call_id: &str,
        op: ToolOp,
    ) -> Result<(), ControlError> {
        let id = ids::tool_call_id(turn_id, call_id);
        let call = self
            .s
            .tool_calls()
            .get(&id)
            .cloned()
            .ok_or_else(|| ControlError::ToolCallNotFound(call_id.to_string()))?;
        let state = call.state().unwrap_or(ToolCallState::PendingCall);
        let refuse = |code, what: &str| {
            Err(super::worker::not_allowed(
                code,
                format!("call {call_id} is {state}: {what}"),
            ))
        };
        let call_id = call_id.to_string();
        match op {
            ToolOp::Approve { decision } => {
                if state != ToolCallState::AwaitingApproval {
                    return refuse(
                        TOOL_CALL_NOT_AWAITING_APPROVAL,
                        "only a waiting call is approved",
                    );
                }
                may_decide(&call, &decision)?;
                let approved = ToolApproved {
                    call_id,
                    approver: decision.by.name,
                    on_behalf_of: decision.on_behalf_of,
                    comment: decision.comment,
                };
                self.tool(id, ToolRune::Approved(approved));
                self.disarm(Instance::ToolCall(id), DeadlineKind::ToolApproval);
                self.arm_execution(id);
            }
            ToolOp::Deny { reason, decision } => {
                if state != ToolCallState::AwaitingApproval {
                    return refuse(
                        TOOL_CALL_NOT_AWAITING_APPROVAL,
                        "only a waiting call is denied",
                    );
                }
                may_decide(&call, &decision)?;
                let denied = ToolDenied {
                    call_id: call_id.clone(),
                    reason: reason.clone(),
                    approver: Some(decision.by.name),
                    on_behalf_of: decision.on_behalf_of,
                    comment: decision.comment,
                };
                self.tool(id, ToolRune::Denied(denied));
                self.end_call(id, call_id, ToolStatus::Denied, Some(reason));
            }
            ToolOp::Progress { stream, chunk } => {
                if state.is_terminal() {
                    return refuse(TOOL_CALL_TERMINAL, "it has its result");
                }
                if state != ToolCallState::Executing {
                    return refuse(TOOL_CALL_NOT_EXECUTING, "approval comes first");
                }
                let progress = ToolProgress {
                    call_id,
                    stream,
                    chunk,
                };
                self.tool(id, ToolRune::Progress(progress));
            }
            ToolOp::Result {
                status,
                output,
                error,
            } => {
                if let Some(result) = call.result() {
                    if result.same_as(status, output.as_ref(), error.as_deref()) {
                        return Ok(());
                    }
                    return refuse(TOOL_CALL_TERMINAL, "it has another result");
                }
                if state != ToolCallState::Executing {
                    return refuse(TOOL_CALL_NOT_EXECUTING, "approval comes first");
                }
                let result = ToolResult {
                    call_id,
                    status,
                    output,
                    error,
                    reason: None,
                };
                self.tool(id, ToolRune::Result(result));
                self.disarm(Instance::ToolCall(id), DeadlineKind::ToolExecution);
                self.resume_if_done(turn_id);
            }
        }
        Ok(())
    }

    /// A result the service writes itself (denied, timeout, cancelled), its call's
    /// deadlines disarmed; the turn resumes if it was the last one open.
    fn end_call(&mut self, id: Uuid, call_id: String, status: ToolStatus, reason: Option<String>) {
        let result = ToolResult {
            call_id,
            status,
            output: None,
            error: None,
            reason,
        };
        self.tool(id, ToolRune::Result(result));
        self.disarm(Instance::ToolCall(id), DeadlineKind::ToolApproval);
        self.disarm(Instance::ToolCall(id), DeadlineKind::ToolExecution);
        let turn = self.s.tool_calls().get(&id).and_then(ToolCall::turn_id);
        if let Some(turn_id) = turn {
            self.resume_if_done(turn_id);
        }
    }

    /// `turn.tools_finished` once every call of the waiting batch has its result: the
    /// turn streams again, unleased, under its watchdog — claimable.
    fn resume_if_done(&mut self, turn_id: Uuid) {
        let Some(turn) = self.s.turns().get(&turn_id) else {
            return;
        };
        if turn.state() != Some(TurnState::ToolExecuting) || !self.s.open_calls(turn_id).is_empty()
        {
            return;
        }
        let results = turn
            .batch()
            .iter()
            .filter_map(|call_id| {
                let result = self.s.tool_call(turn_id, call_id)?.result()?;
                Some(ToolSummary {
                    call_id: call_id.clone(),
                    status: result.status,
                })
            })
            .collect();
        self.turn(
            turn_id,
            TurnRune::ToolsFinished(ToolsFinished { turn_id, results }),
        );
        self.disarm(Instance::Turn(turn_id), DeadlineKind::ToolResume);
        self.arm_watchdog(turn_id);
    }

    /// Every open call of a turn that is ending gets `tool.result` `cancelled` with the
    /// turn's reason (INV-TOOL-TERMINAL), before the turn's terminal rune.
    pub(super) fn cancel_calls(&mut self, turn_id: Uuid, reason: &str) {
        for call_id in self.s.open_calls(turn_id) {
            let id = ids::tool_call_id(turn_id, &call_id);
            let result = ToolResult {
                call_id,
                status: ToolStatus::Cancelled,
                output: None,
                error: None,
                reason: Some(reason.to_string()),
            };
            self.tool(id, ToolRune::Result(result));
            self.disarm(Instance::ToolCall(id), DeadlineKind::ToolApproval);
            self.disarm(Instance::ToolCall(id), DeadlineKind::ToolExecution);
        }
        self.disarm(Instance::Turn(turn_id), DeadlineKind::ToolResume);
    }

    /// A tool deadline fell due: the call (or, for `tool_resume`, every open call of the
    /// batch it was armed for) times out — unless it already moved on.
    pub(super) fn tool_due(&mut self, deadline: &Deadline) {
        match (deadline.instance, deadline.kind) {
            (Instance::ToolCall(id), kind) => {
                let waiting = match kind {
                    DeadlineKind::ToolApproval => ToolCallState::AwaitingApproval,
                    _ => ToolCallState::Executing,
                };
                let Some(call) = self.s.tool_calls().get(&id) else {
                    return;
                };
                let Some(call_id) = call.call_id().map(str::to_string) else {
                    return;
                };
                if call.state() != Some(waiting) {
                    return;
                }
                let reason = match kind {
                    DeadlineKind::ToolApproval => APPROVAL_TIMEOUT,
                    _ => EXECUTION_TIMEOUT,
                };
                self.end_call(id, call_id, ToolStatus::Timeout, Some(reason.into()));
            }
            (Instance::Turn(turn_id), DeadlineKind::ToolResume) => {
                let Some(turn) = self.s.turns().get(&turn_id) else {
                    return;
                };
                let current = turn.state() == Some(TurnState::ToolExecuting)
                    && turn.batches() == deadline.epoch;
                if !current {
                    return;
                }
                for call_id in self.s.open_calls(turn_id) {
                    let id = ids::tool_call_id(turn_id, &call_id);
                    let reason = Some(RESUME_DEADLINE.to_string());
                    self.end_call(id, call_id, ToolStatus::Timeout, reason);
                }
            }
            _ => {}
        }
    }
}

/// Whether the decision's principal may approve or deny `call` (TRUST.md "Approvals").
fn may_decide(call: &ToolCall, decision: &Decision) -> Result<(), ControlError> {
    let call_id = call.call_id().unwrap_or_default();
    decision
        .by
        .may_decide(call.reported_by(), &call.approvers())
        .map_err(|why| match why {
            Undecidable::Reporter => ControlError::Forbidden {
                code: SELF_APPROVAL_FORBIDDEN,
                detail: format!(
                    "{} reported call {call_id}: another approver decides it",
                    decision.by.name
                ),
            },
            Undecidable::NotAnApprover => ControlError::Forbidden {
                code: APPROVER_FORBIDDEN,
                detail: format!(
                    "call {call_id}'s policy ({}) lets {} decide it, not {}",
                    call.policy().unwrap_or(DEFAULT_POLICY),
                    call.approvers()
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    decision.by.name
                ),
            },
        })
}
