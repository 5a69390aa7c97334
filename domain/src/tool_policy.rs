//! Tool policies (TRUST.md "Tool policies"): the service, not the worker, decides which tool
//! calls run, wait for a person, or never run. A policy is a fact of its own
//! (`project_manager.tool_policy.set` / `.removed`, a service addition like
//! `actor.registered`); [`PolicyRules::decide`] is the one matching rule, and
//! [`Applied::verdict`] what the tool machine does with a call under it.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{DomainError, PmAggregate, Services, EVENT_VERSION};

mod approvers;
pub use approvers::{Approver, Decider, Undecidable};

wire_enum! {
    /// What a policy does with the calls it matches.
    PolicyAction {
        /// The worker's `requires_approval` decides (it may ask for more care, never less).
        Allow = "allow",
        /// A person the policy names approves first, whatever the worker said.
        RequireApproval = "require_approval",
        /// The call ends at once, `denied`.
        Deny = "deny",
    }
}

/// The name `tool.call` records when no policy matched (so no policy may take it).
pub const DEFAULT_POLICY: &str = "default";
/// The longest policy name, in characters.
pub const MAX_NAME: usize = 100;
/// The longest `tools` pattern, in characters.
pub const MAX_PATTERN: usize = 200;
/// The longest `reason`, in characters.
pub const MAX_REASON: usize = 1_000;
/// The most `approvers` and `organizations` a policy lists.
pub const MAX_LIST: usize = 100;

/// The `UUIDv5` of a policy's stream: policies are named by people, streams by ids.
pub fn policy_id(name: &str) -> Uuid {
    Uuid::new_v5(
        &crate::ids::NAMESPACE,
        format!("tool_policy\n{name}").as_bytes(),
    )
}

/// Fact `project_manager.tool_policy.set`; also the policy as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolPolicySet {
    /// The policy's name (its path segment).
    pub name: String,
    /// A glob over tool names: `*` any run of characters, `?` one character.
    pub tools: String,
    /// What it does with the calls it matches.
    pub action: PolicyAction,
    /// Who may approve (`require_approval`): principal names and `role:<role>`; absent,
    /// roles `admin` and `ingress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<String>>))]
    pub approvers: Option<Vec<Approver>>,
    /// The organizations whose conversations it applies to; absent, every conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organizations: Option<Vec<String>>,
    /// Shown to approvers as the call's `policy_reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was set.
    #[serde(with = "crate::time")]
    pub set_at: DateTime<Utc>,
}

impl ToolPolicySet {
    /// The fact's name.
    pub const NAME: &'static str = "project_manager.tool_policy.set";

    /// Whether `other` says the same (its time aside).
    fn same(&self, other: &SetToolPolicy) -> bool {
        self.name == other.name
            && self.tools == other.tools
            && self.action == other.action
            && self.approvers == other.approvers
            && self.organizations == other.organizations
            && self.reason == other.reason
    }
}

/// Fact `project_manager.tool_policy.removed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolPolicyRemoved {
    /// The policy's name.
    pub name: String,
    /// When it was removed.
    #[serde(with = "crate::time")]
    pub removed_at: DateTime<Utc>,
}

impl ToolPolicyRemoved {
    /// The fact's name.
    pub const NAME: &'static str = "project_manager.tool_policy.removed";
}

/// The facts of a policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolPolicyEvent {
    /// `project_manager.tool_policy.set`
    Set(ToolPolicySet),
    /// `project_manager.tool_policy.removed`
    Removed(ToolPolicyRemoved),
}

impl DomainEvent for ToolPolicyEvent {
    fn event_type(&self) -> String {
        match self {
            Self::Set(_) => ToolPolicySet::NAME,
            Self::Removed(_) => ToolPolicyRemoved::NAME,
        }
        .into()
    }
    fn event_version(&self) -> String {
        EVENT_VERSION.into()
    }
}

/// Command: create or replace a policy (`PUT /v1/tool-policies/{name}`).
#[derive(Debug, Clone, PartialEq)]
pub struct SetToolPolicy {
    /// Checked by [`SetToolPolicy::new`].
    name: String,
    tools: String,
    action: PolicyAction,
    approvers: Option<Vec<Approver>>,
    organizations: Option<Vec<String>>,
    reason: Option<String>,
    now: DateTime<Utc>,
}

/// A field of a policy that breaks its rule: `(field, why)`.
pub type PolicyFieldError = (&'static str, String);

impl SetToolPolicy {
    /// A policy, each field checked against its rule.
    ///
    /// # Errors
    /// The first field that breaks its rule, and why.
    pub fn new(
        name: &str,
        tools: String,
        action: PolicyAction,
        approvers: Option<Vec<Approver>>,
        organizations: Option<Vec<String>>,
        reason: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<Self, PolicyFieldError> {
        check_name(name).map_err(|e| ("name", e))?;
        let length = tools.chars().count();
        if length == 0 || length > MAX_PATTERN || tools.chars().any(char::is_control) {
            return Err((
                "tools",
                format!("must be 1 to {MAX_PATTERN} characters, without control characters"),
            ));
        }
        match &approvers {
            Some(_) if action != PolicyAction::RequireApproval => {
                return Err((
                    "approvers",
                    "only a require_approval policy has approvers".into(),
                ))
            }
            Some(list) if list.is_empty() || list.len() > MAX_LIST => {
                return Err((
                    "approvers",
                    format!("must list 1 to {MAX_LIST} approvers (to refuse every call, use deny)"),
                ))
            }
            _ => {}
        }
        if let Some(list) = &organizations {
            let bad = |o: &String| o.trim().is_empty() || o.contains('\0') || o == "*";
            if list.is_empty() || list.len() > MAX_LIST || list.iter().any(bad) {
                return Err((
                    "organizations",
                    format!("must list 1 to {MAX_LIST} organization names (absent: every one)"),
                ));
            }
        }
        if let Some(reason) = &reason {
            if reason.trim().is_empty()
                || reason.chars().count() > MAX_REASON
                || reason.contains('\0')
            {
                return Err((
                    "reason",
                    format!("must be 1 to {MAX_REASON} characters, without NUL"),
                ));
            }
        }
        Ok(Self {
            name: name.to_string(),
            tools,
            action,
            approvers,
            organizations,
            reason,
            now,
        })
    }
}

/// A policy's name: 1–100 letters, digits and `._-`, not [`DEFAULT_POLICY`].
///
/// # Errors
/// Why the name is refused.
pub fn check_name(name: &str) -> Result<(), String> {
    let length = name.chars().count();
    if length == 0 || length > MAX_NAME {
        return Err(format!("must be 1 to {MAX_NAME} characters"));
    }
    if name
        .chars()
        .any(|c| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
    {
        return Err("must hold only letters, digits and ._-".into());
    }
    if name == DEFAULT_POLICY {
        return Err(format!("{DEFAULT_POLICY:?} names the absence of a policy"));
    }
    Ok(())
}

/// Commands of a policy.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolPolicyCommand {
    /// `PUT`.
    Set(SetToolPolicy),
    /// `DELETE` of the named policy, at the given time.
    Remove {
        /// The policy's name.
        name: String,
        /// Server time.
        now: DateTime<Utc>,
    },
}

/// The ToolPolicy aggregate: the policy now in force under one name, if any.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolPolicy {
    current: Option<ToolPolicySet>,
}

impl ToolPolicy {
    /// The policy in force; `None` before it is set and after it is removed.
    pub fn current(&self) -> Option<&ToolPolicySet> {
        self.current.as_ref()
    }
}

impl Aggregate for ToolPolicy {
    const TYPE: &'static str = "tool_policy";
    type Command = ToolPolicyCommand;
    type Event = ToolPolicyEvent;
    type Error = DomainError;
    type Services = Services;

    async fn handle(
        &mut self,
        cmd: ToolPolicyCommand,
        _services: &Services,
        sink: &EventSink<Self>,
    ) -> Result<(), DomainError> {
        match cmd {
            ToolPolicyCommand::Set(set) => {
                if self.current.as_ref().is_some_and(|c| c.same(&set)) {
                    return Ok(());
                }
                let fact = ToolPolicySet {
                    name: set.name,
                    tools: set.tools,
                    action: set.action,
                    approvers: set.approvers,
                    organizations: set.organizations,
                    reason: set.reason,
                    set_at: set.now,
                };
                sink.write(ToolPolicyEvent::Set(fact), self).await;
            }
            ToolPolicyCommand::Remove { name, now } => {
                if self.current.is_none() {
                    return Err(DomainError::ToolPolicyNotFound(name));
                }
                let fact = ToolPolicyRemoved {
                    name,
                    removed_at: now,
                };
                sink.write(ToolPolicyEvent::Removed(fact), self).await;
            }
        }
        Ok(())
    }

    fn apply(&mut self, event: ToolPolicyEvent) {
        self.current = match event {
            ToolPolicyEvent::Set(fact) => Some(fact),
            ToolPolicyEvent::Removed(_) => None,
        };
    }
}

impl PmAggregate for ToolPolicy {
    fn creation(&self) -> Option<ToolPolicyEvent> {
        self.current.clone().map(ToolPolicyEvent::Set)
    }
    fn conversation_id(&self) -> Option<Uuid> {
        None
    }
}

/// What decides a reported batch: the policies in force, the conversation's organization,
/// and `PM_TOOL_DEFAULT_ACTION` for a call no policy matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRules {
    /// Every policy in force.
    pub policies: Arc<[ToolPolicySet]>,
    /// The organization of the calls' conversation.
    pub organization: Option<String>,
    /// The action when none matches.
    pub default_action: PolicyAction,
}

/// The policy a call was reported under, as `tool.call` and the approval record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The policy's name, or [`DEFAULT_POLICY`].
    pub policy: String,
    /// Its action.
    pub action: PolicyAction,
    /// Who may approve (the default when the policy lists none).
    pub approvers: Vec<Approver>,
    /// The policy's reason, or its name.
    pub reason: String,
}

/// What happens to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It executes now.
    Run,
    /// It waits for one of `approvers`; approvers are shown `reason`.
    Approve {
        /// Shown to approvers (`tool.approval_requested.policy_reason`).
        reason: Option<String>,
        /// Who may decide.
        approvers: Vec<Approver>,
    },
    /// It ends at once, `denied`, for `reason` (`policy:<name>`).
    Deny {
        /// `tool.denied.reason`.
        reason: String,
    },
}

impl PolicyRules {
    /// The policy of a call to `tool_name`: among the policies whose `tools` matches it and
    /// whose `organizations`, when given, include the conversation's, the one with the
    /// fewest wildcards, then the longest pattern, then the first name; none, the default.
    pub fn decide(&self, tool_name: &str) -> Applied {
        let applies = |p: &&ToolPolicySet| {
            wildmatch::WildMatch::new(&p.tools).matches(tool_name)
                && p.organizations.as_ref().is_none_or(|list| {
                    self.organization
                        .as_ref()
                        .is_some_and(|own| list.contains(own))
                })
        };
        let rank = |p: &ToolPolicySet| {
            let wildcards = p.tools.chars().filter(|c| matches!(c, '*' | '?')).count();
            (wildcards, std::cmp::Reverse(p.tools.chars().count()))
        };
        let chosen = self
            .policies
            .iter()
            .filter(applies)
            .min_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.name.cmp(&b.name)));
        match chosen {
            Some(p) => Applied {
                policy: p.name.clone(),
                action: p.action,
                approvers: p.approvers.clone().unwrap_or_else(Approver::defaults),
                reason: p.reason.clone().unwrap_or_else(|| p.name.clone()),
            },
            None => Applied {
                policy: DEFAULT_POLICY.into(),
                action: self.default_action,
                approvers: Approver::defaults(),
                reason: DEFAULT_POLICY.into(),
            },
        }
    }
}

impl Applied {
    /// What happens to a call under this policy when its worker asked for approval
    /// (`worker_asks`, with `worker_reason`): `deny` ends it, `require_approval` asks the
    /// policy's approvers whatever the worker said, `allow` lets the worker ask for more
    /// care — never for less.
    pub fn verdict(&self, worker_asks: bool, worker_reason: Option<String>) -> Verdict {
        match self.action {
            PolicyAction::Deny => Verdict::Deny {
                reason: format!("policy:{}", self.policy),
            },
            PolicyAction::RequireApproval => Verdict::Approve {
                reason: Some(self.reason.clone()),
                approvers: self.approvers.clone(),
            },
            PolicyAction::Allow if worker_asks => Verdict::Approve {
                reason: worker_reason,
                approvers: self.approvers.clone(),
            },
            PolicyAction::Allow => Verdict::Run,
        }
    }
}

#[cfg(test)]
mod tests;
