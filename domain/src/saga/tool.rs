//! The ToolCall aggregate: the ECHS Tool lifecycle of one call a worker reported
//! (WORKERS.md "Tools"). Its edges are the three INV-TOOL-* invariants: a result only
//! after the call and only once, progress and a success or error only while executing.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::rune::tool::{ToolResult, ToolRune};
use super::types::{ToolCallState, ToolStatus};
use super::{Machine, SagaError, TOOL_CALL_TYPE};

/// A tool call (id = [`super::ids::tool_call_id`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    call_id: Option<String>,
    turn_id: Option<Uuid>,
    tool_name: String,
    arguments: serde_json::Value,
    requires_approval: bool,
    timeout_ms: Option<u64>,
    policy_reason: Option<String>,
    state: Option<ToolCallState>,
    approver: Option<String>,
    denial: Option<String>,
    progress: u32,
    result: Option<ToolResult>,
    anomalies: u32,
}

impl ToolCall {
    /// The worker's id of the call; `None` before `tool.call`.
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }
    /// The turn that asked for it.
    pub fn turn_id(&self) -> Option<Uuid> {
        self.turn_id
    }
    /// The tool.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }
    /// Its arguments.
    pub fn arguments(&self) -> &serde_json::Value {
        &self.arguments
    }
    /// Whether it needed an approver.
    pub fn requires_approval(&self) -> bool {
        self.requires_approval
    }
    /// Its own execution timeout, if the worker gave one.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.timeout_ms
    }
    /// Why the policy asked a person.
    pub fn policy_reason(&self) -> Option<&str> {
        self.policy_reason.as_deref()
    }
    /// Its state; `None` before `tool.call`.
    pub fn state(&self) -> Option<ToolCallState> {
        self.state
    }
    /// Who approved it.
    pub fn approver(&self) -> Option<&str> {
        self.approver.as_deref()
    }
    /// `tool.progress` runes recorded.
    pub fn progress(&self) -> u32 {
        self.progress
    }
    /// Its one result, once it has it.
    pub fn result(&self) -> Option<&ToolResult> {
        self.result.as_ref()
    }
    /// `saga.anomaly` runes recorded on it.
    pub fn anomalies(&self) -> u32 {
        self.anomalies
    }
    /// Whether it was called and has no result yet (INV-TOOL-TERMINAL still owes one).
    pub fn is_open(&self) -> bool {
        self.state.is_some() && self.result.is_none()
    }
    /// The state's name, `none` before `tool.call`.
    pub fn state_name(&self) -> String {
        self.state.map_or("none", ToolCallState::as_str).to_string()
    }
}

impl Machine for ToolCall {
    type Rune = ToolRune;

    fn check(&self, rune: &ToolRune) -> Result<(), SagaError> {
        use ToolCallState as S;
        use ToolRune as R;
        if let (Some(expected), Some(got)) = (self.call_id.as_deref(), rune.call_id()) {
            if expected != got {
                return Err(SagaError::Guard {
                    rune: rune.name(),
                    reason: format!("call {got} is not call {expected}"),
                });
            }
        }
        let st = self.state;
        let edge = match rune {
            R::Call(_) => st.is_none(),
            R::ApprovalRequested(_) => st == Some(S::PendingCall),
            R::Approved(_) | R::Denied(_) => st == Some(S::AwaitingApproval),
            R::Progress(_) => st == Some(S::Executing),
            R::Result(r) => {
                self.result.is_none()
                    && match r.status {
                        ToolStatus::Success | ToolStatus::Error => st == Some(S::Executing),
                        ToolStatus::Timeout | ToolStatus::Cancelled => {
                            matches!(st, Some(S::AwaitingApproval | S::Executing))
                        }
                        ToolStatus::Denied => st == Some(S::Denied),
                    }
            }
            R::Anomaly(_) => true,
        };
        if edge {
            Ok(())
        } else {
            Err(SagaError::NoEdge {
                machine: TOOL_CALL_TYPE,
                state: self.state_name(),
                rune: rune.name(),
            })
        }
    }

    fn fold(&mut self, rune: ToolRune) {
        use ToolCallState as S;
        use ToolRune as R;
        match rune {
            R::Call(r) => {
                self.state = Some(if r.requires_approval {
                    S::PendingCall
                } else {
                    S::Executing
                });
                self.call_id = Some(r.call_id);
                self.turn_id = Some(r.turn_id);
                self.tool_name = r.tool_name;
                self.arguments = r.arguments;
                self.requires_approval = r.requires_approval;
                self.timeout_ms = r.timeout_ms;
            }
            R::ApprovalRequested(r) => {
                self.policy_reason = r.policy_reason;
                self.state = Some(S::AwaitingApproval);
            }
            R::Approved(r) => {
                self.approver = Some(r.approver);
                self.state = Some(S::Executing);
            }
            R::Denied(r) => {
                self.denial = Some(r.reason);
                self.state = Some(S::Denied);
            }
            R::Progress(_) => self.progress += 1,
            R::Result(r) => {
                self.state = Some(r.status.state());
                self.result = Some(r);
            }
            R::Anomaly(_) => self.anomalies += 1,
        }
    }
}

super::saga_aggregate!(ToolCall, ToolRune, TOOL_CALL_TYPE, no_conversation);

impl crate::PmAggregate for ToolCall {
    /// Written by the saga processor only: there is no creation fact to answer with.
    fn creation(&self) -> Option<ToolRune> {
        None
    }
    /// A call's conversation is its turn's: its runes do not repeat it.
    fn conversation_id(&self) -> Option<Uuid> {
        None
    }
}
