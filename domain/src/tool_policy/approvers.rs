//! Who may decide a waiting call (TRUST.md "Approvals"): the approvers its policy listed
//! when it was reported, never the principal that reported it. One rule, [`Decider::may_decide`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// The roles of API.md, as `role:<role>` names them.
const ROLES: [&str; 4] = ["admin", "ingress", "llm", "analyst"];

/// One entry of a policy's `approvers`: a principal by name, or every principal with a
/// role (`role:<role>`). A principal literally named `role:…` cannot be listed by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Approver {
    /// The principal of this name.
    Principal(String),
    /// Every principal with this role.
    Role(String),
}

impl Approver {
    /// The approvers of a call whose policy lists none: roles `admin` and `ingress`.
    pub fn defaults() -> Vec<Self> {
        vec![Self::Role("admin".into()), Self::Role("ingress".into())]
    }
}

impl TryFrom<String> for Approver {
    type Error = String;
    fn try_from(raw: String) -> Result<Self, String> {
        if let Some(role) = raw.strip_prefix("role:") {
            return if ROLES.contains(&role) {
                Ok(Self::Role(role.to_string()))
            } else {
                Err(format!(
                    "{role:?} is not a role (one of {})",
                    ROLES.join(", ")
                ))
            };
        }
        match crate::principal::check_name(&raw) {
            Ok(()) => Ok(Self::Principal(raw)),
            Err(_) => Err(format!(
                "{raw:?} is neither role:<role> nor a principal's name (1 to 100 letters, digits and ._:@-)"
            )),
        }
    }
}

impl From<Approver> for String {
    fn from(a: Approver) -> Self {
        a.to_string()
    }
}

impl fmt::Display for Approver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Principal(name) => f.write_str(name),
            Self::Role(role) => write!(f, "role:{role}"),
        }
    }
}

/// The signed-in principal deciding a call: its name and roles, as authentication found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decider {
    /// The principal's name.
    pub name: String,
    /// Its roles' names.
    pub roles: Vec<String>,
    /// The service runs open (no principals configured, loopback only): every caller is
    /// the same nobody, so "not the reporter" tells no one apart and is not applied.
    pub open_mode: bool,
}

/// Why a principal may not decide a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undecidable {
    /// It reported the call (`self_approval_forbidden`).
    Reporter,
    /// The call's policy does not list it (`approver_forbidden`).
    NotAnApprover,
}

impl Decider {
    /// Whether this principal may approve or deny a call reported by `reporter` that
    /// `approvers` may decide.
    ///
    /// # Errors
    /// Why not: the reporter never decides its own call, whatever the approvers say.
    pub fn may_decide(
        &self,
        reporter: Option<&str>,
        approvers: &[Approver],
    ) -> Result<(), Undecidable> {
        if !self.open_mode && reporter == Some(self.name.as_str()) {
            return Err(Undecidable::Reporter);
        }
        let listed = approvers.iter().any(|a| match a {
            Approver::Principal(name) => *name == self.name,
            Approver::Role(role) => self.roles.iter().any(|r| r == role),
        });
        if listed {
            Ok(())
        } else {
            Err(Undecidable::NotAnApprover)
        }
    }
}
