//! Runes of a tool call stream: the ECHS Tool lifecycle, one stream per call (WORKERS.md
//! "Tools"), so each call's `tool.result` is checked against that call's own history
//! (INV-TOOL-TERMINAL, INV-TOOL-CALL-BEFORE-RESULT, INV-TOOL-APPROVAL-BEFORE-EXEC).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{rune_event, SagaAnomaly};
use crate::saga::types::{ToolStatus, ToolStream};
use crate::tool_policy::{Approver, PolicyAction};

/// The names of the tool runes.
pub mod names {
    /// `tool.call` — `[*] → pending_call`, then at once `executing` unless approval is
    /// required.
    pub const TOOL_CALL: &str = "tool.call";
    /// `tool.approval_requested` — `pending_call → awaiting_approval`.
    pub const TOOL_APPROVAL_REQUESTED: &str = "tool.approval_requested";
    /// `tool.approved` — `awaiting_approval → executing`.
    pub const TOOL_APPROVED: &str = "tool.approved";
    /// `tool.denied` — `awaiting_approval → denied` (its `tool.result` follows at once).
    pub const TOOL_DENIED: &str = "tool.denied";
    /// `tool.progress` — `executing → executing`.
    pub const TOOL_PROGRESS: &str = "tool.progress";
    /// `tool.result` — the call's one terminal result.
    pub const TOOL_RESULT: &str = "tool.result";
}

/// `tool.call` {call_id, tool_name, arguments, turn_id, requires_approval, timeout_ms,
/// policy, action, reported_by}.
///
/// `turn_id` is WORKERS.md's and `policy` TRUST.md's; `requires_approval`, `timeout_ms`,
/// `action` and `reported_by` are additions: the call's machine, its execution deadline
/// and who may decide it are folded from its own runes, and the request they come from
/// would otherwise be lost at approval time. Calls written before policies existed have
/// no `policy`, `action` or `reported_by`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolCalled {
    /// The worker's id of the call, unique within the turn.
    pub call_id: String,
    /// The tool.
    pub tool_name: String,
    /// Its arguments, any JSON.
    pub arguments: serde_json::Value,
    /// The turn that asked for it.
    pub turn_id: Uuid,
    /// Whether it waits for an approver before it may run.
    #[serde(default)]
    pub requires_approval: bool,
    /// Its own execution timeout, when the worker gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The tool policy applied: its name, or `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// That policy's action (`deny`: the call ends at once, `denied`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<PolicyAction>,
    /// The principal that reported the call (it never decides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_by: Option<String>,
}

/// `tool.approval_requested` {call_id, policy_reason, approvers}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequested {
    /// The call.
    pub call_id: String,
    /// Why a person is asked: the policy's reason (or name), or the worker's words when
    /// the policy let it ask.
    pub policy_reason: Option<String>,
    /// Who may decide, fixed when the call was reported (a policy changed later does not
    /// move a waiting call); absent on calls written before policies: roles `admin` and
    /// `ingress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<String>>))]
    pub approvers: Option<Vec<Approver>>,
}

/// `tool.approved` {call_id, approver, on_behalf_of, comment}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolApproved {
    /// The call.
    pub call_id: String,
    /// The signed-in principal that approved it.
    pub approver: String,
    /// The `human` actor whose decision the approver relayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<Uuid>,
    /// The approver's comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `tool.denied` {call_id, reason, approver, on_behalf_of, comment}: `approver` absent when
/// the call's policy denied it (`reason` `policy:<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolDenied {
    /// The call.
    pub call_id: String,
    /// Why.
    pub reason: String,
    /// The signed-in principal that denied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    /// The `human` actor whose decision the approver relayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<Uuid>,
    /// The approver's comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `tool.progress` {call_id, stream, chunk}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolProgress {
    /// The call.
    pub call_id: String,
    /// `stdout` or `stderr`.
    pub stream: ToolStream,
    /// The chunk of output.
    pub chunk: String,
}

/// `tool.result` {call_id, status, output | error}, and `reason` for the results the
/// service writes itself (a denial's, a timeout's, a cancellation's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    /// The call.
    pub call_id: String,
    /// How it ended.
    pub status: ToolStatus,
    /// The tool's answer (`success`; the executor may send one with any status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// What went wrong (`error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the service ended it: the denial's reason, `approval_timeout`,
    /// `execution_timeout`, `resume_deadline`, or the cancelling turn's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ToolResult {
    /// Whether `other` reports the same result (a replay only acknowledges, L0 §8).
    pub fn same_as(
        &self,
        status: ToolStatus,
        output: Option<&serde_json::Value>,
        error: Option<&str>,
    ) -> bool {
        self.status == status && self.output.as_ref() == output && self.error.as_deref() == error
    }
}

/// The runes of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "rune")]
pub enum ToolRune {
    /// `tool.call`
    #[serde(rename = "tool.call")]
    Call(ToolCalled),
    /// `tool.approval_requested`
    #[serde(rename = "tool.approval_requested")]
    ApprovalRequested(ApprovalRequested),
    /// `tool.approved`
    #[serde(rename = "tool.approved")]
    Approved(ToolApproved),
    /// `tool.denied`
    #[serde(rename = "tool.denied")]
    Denied(ToolDenied),
    /// `tool.progress`
    #[serde(rename = "tool.progress")]
    Progress(ToolProgress),
    /// `tool.result`
    #[serde(rename = "tool.result")]
    Result(ToolResult),
    /// `saga.anomaly`
    #[serde(rename = "saga.anomaly")]
    Anomaly(SagaAnomaly),
}

impl ToolRune {
    /// Every rune name of the stream, `saga.anomaly` last.
    pub const NAMES: &'static [&'static str] = &[
        names::TOOL_CALL,
        names::TOOL_APPROVAL_REQUESTED,
        names::TOOL_APPROVED,
        names::TOOL_DENIED,
        names::TOOL_PROGRESS,
        names::TOOL_RESULT,
        super::SAGA_ANOMALY,
    ];

    /// The rune's name.
    pub fn name(&self) -> &'static str {
        use names::*;
        match self {
            Self::Call(_) => TOOL_CALL,
            Self::ApprovalRequested(_) => TOOL_APPROVAL_REQUESTED,
            Self::Approved(_) => TOOL_APPROVED,
            Self::Denied(_) => TOOL_DENIED,
            Self::Progress(_) => TOOL_PROGRESS,
            Self::Result(_) => TOOL_RESULT,
            Self::Anomaly(_) => super::SAGA_ANOMALY,
        }
    }

    /// The call the rune is about (`None` for an anomaly).
    pub fn call_id(&self) -> Option<&str> {
        match self {
            Self::Call(r) => Some(&r.call_id),
            Self::ApprovalRequested(r) => Some(&r.call_id),
            Self::Approved(r) => Some(&r.call_id),
            Self::Denied(r) => Some(&r.call_id),
            Self::Progress(r) => Some(&r.call_id),
            Self::Result(r) => Some(&r.call_id),
            Self::Anomaly(_) => None,
        }
    }
}

rune_event!(ToolRune);
