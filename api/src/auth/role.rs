//! The four roles of API.md: what kind of caller a principal is.

use std::fmt;
use std::str::FromStr;

/// A caller's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Operators: everything.
    Admin,
    /// Ingress services: register actors, start conversations, add messages.
    Ingress,
    /// The LLM service: messages, checkpoints, tasks, task checkpoints.
    Llm,
    /// Analysts: every GET and the event stream.
    Analyst,
}

impl Role {
    /// Every role, in the order a principal's roles are listed.
    pub const ALL: [Role; 4] = [Self::Admin, Self::Ingress, Self::Llm, Self::Analyst];

    /// The role's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Llm => "llm",
            Self::Analyst => "analyst",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ingress" => Ok(Self::Ingress),
            "llm" => Ok(Self::Llm),
            "analyst" => Ok(Self::Analyst),
            "admin" => Ok(Self::Admin),
            other => Err(format!(
                "unknown role {:?} (roles: ingress, llm, analyst, admin)",
                crate::error::clip(other)
            )),
        }
    }
}
