//! The ToolCall aggregate: the ECHS Tool lifecycle of one call a worker reported
//! (WORKERS.md "Tools"). Its edges are the three INV-TOOL-* invariants: a result only
//! after the call and only once, progress and a success or error only while executing.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::rune::tool::{ToolResult, ToolRune};
use super::types::{ToolCallState, ToolStatus};
use super::{Machine, SagaError, TOOL_CALL_TYPE};
use crate::tool_policy::{Approver, PolicyAction};

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
    #[serde(default)]
    policy: Option<String>,
    #[serde(default)]
    action: Option<PolicyAction>,
    #[serde(default)]
    reported_by: Option<String>,
    #[serde(default)]
    approvers: Option<Vec<Approver>>,
    #[serde(default)]
    on_behalf_of: Option<Uuid>,
    #[serde(default)]
    comment: Option<String>,
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
    /// The principal that approved or denied it.
    pub fn approver(&self) -> Option<&str> {
        self.approver.as_deref()
    }
    /// The tool policy it was reported under (`default`: none matched); `None` for calls
    /// written before policies.
    pub fn policy(&self) -> Option<&str> {
        self.policy.as_deref()
    }
    /// The principal that reported it.
    pub fn reported_by(&self) -> Option<&str> {
        self.reported_by.as_deref()
    }
    /// Who may approve or deny it while it waits.
    pub fn approvers(&self) -> Vec<Approver> {
        self.approvers.clone().unwrap_or_else(Approver::defaults)
    }
    /// The `human` actor whose decision its approver relayed.
    pub fn on_behalf_of(&self) -> Option<Uuid> {
        self.on_behalf_of
    }
    /// Its approver's comment.
    pub fn comment(&self) -> Option<&str> {
        self.comment.as_deref()
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
            R::Approved(_) => st == Some(S::AwaitingApproval),
            // A policy's denial follows its `tool.call` at once (TRUST.md "Tool policies").
            R::Denied(_) => {
                st == Some(S::AwaitingApproval)
                    || (st == Some(S::PendingCall) && self.action == Some(PolicyAction::Deny))
            }
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
                let denied = r.action == Some(PolicyAction::Deny);
                self.state = Some(if r.requires_approval || denied {
                    S::PendingCall
                } else {
                    S::Executing
                });
                self.policy = r.policy;
                self.action = r.action;
                self.reported_by = r.reported_by;
                self.call_id = Some(r.call_id);
                self.turn_id = Some(r.turn_id);
                self.tool_name = r.tool_name;
                self.arguments = r.arguments;
                self.requires_approval = r.requires_approval;
                self.timeout_ms = r.timeout_ms;
            }
            R::ApprovalRequested(r) => {
                self.policy_reason = r.policy_reason;
                self.approvers = r.approvers;
                self.state = Some(S::AwaitingApproval);
            }
            R::Approved(r) => {
                self.approver = Some(r.approver);
                self.on_behalf_of = r.on_behalf_of;
                self.comment = r.comment;
                self.state = Some(S::Executing);
            }
            R::Denied(r) => {
                self.denial = Some(r.reason);
                self.approver = r.approver;
                self.on_behalf_of = r.on_behalf_of;
                self.comment = r.comment;
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
