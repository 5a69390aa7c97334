//! Who a request is from (TRUST.md "Principals"): a name the log records, the roles that
//! decide which endpoints it may call, the organizations it may see and the actors it may
//! speak as. Every source of credentials — role tokens, the principals file, an identity
//! provider's JWTs — ends in the same [`Principal`], so no rule downstream asks where a
//! caller came from.

use std::collections::BTreeSet;

/// The organizations a principal may see: the application's scope, where their rule is
/// stated once.
pub use pm_application::scope::Scope;
use pm_application::speaker::Voice;
use serde::Serialize;
use uuid::Uuid;

use super::Role;

/// The name of the principal of everything the service does on its own (deadlines, lease
/// expiry, restart recovery): no credential may claim it.
pub const SYSTEM: &str = pm_application::sagas::SYSTEM_PRINCIPAL;

/// The name of the caller of a service that runs open (no principals configured).
pub const OPEN: &str = "open";

/// The longest principal name, in characters.
pub const MAX_NAME: usize = pm_domain::principal::MAX_NAME;

/// Where a principal's credential came from (`source` of `GET /v1/me`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A bearer token of `PM_AUTH_TOKENS` or the principals file.
    Token,
    /// A JWT of the identity provider.
    Jwt,
    /// Nobody is configured: the service runs open, on loopback only.
    Open,
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    name: String,
    roles: BTreeSet<Role>,
    organizations: Scope,
    actors: Option<BTreeSet<Uuid>>,
    source: Source,
}

impl Principal {
    /// A principal, once its name and roles are acceptable.
    ///
    /// # Errors
    /// A message saying what is wrong with the name or the roles.
    pub fn new(
        name: &str,
        roles: BTreeSet<Role>,
        organizations: Scope,
        actors: Option<BTreeSet<Uuid>>,
        source: Source,
    ) -> Result<Self, String> {
        check_name(name)?;
        if roles.is_empty() {
            return Err(format!("principal {name:?} has no roles"));
        }
        Ok(Self {
            name: name.to_string(),
            roles,
            organizations,
            actors,
            source,
        })
    }

    /// The caller of a service with no principals: every role, every organization.
    pub fn open() -> Self {
        Self {
            name: OPEN.into(),
            roles: Role::ALL.into_iter().collect(),
            organizations: Scope::All,
            actors: None,
            source: Source::Open,
        }
    }

    /// The principal of a `PM_AUTH_TOKENS` token: named after its role, every organization.
    pub fn of_role(role: Role) -> Self {
        Self {
            name: role.as_str().into(),
            roles: BTreeSet::from([role]),
            organizations: Scope::All,
            actors: None,
            source: Source::Token,
        }
    }

    /// The name the log records (`principal`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its roles, in [`Role::ALL`]'s order.
    pub fn roles(&self) -> impl Iterator<Item = Role> + '_ {
        self.roles.iter().copied()
    }

    /// Whether it has `role`.
    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// What the log's `role` records: the one role of a role token as before, `open` in
    /// open mode, the roles joined by commas for a principal with several.
    pub fn role_label(&self) -> String {
        if self.source == Source::Open {
            return OPEN.into();
        }
        self.roles().map(Role::as_str).collect::<Vec<_>>().join(",")
    }

    /// The organizations it may see.
    pub fn organizations(&self) -> &Scope {
        &self.organizations
    }

    /// The actors it may speak as, when limited.
    pub fn actors(&self) -> Option<&BTreeSet<Uuid>> {
        self.actors.as_ref()
    }

    /// What it may speak as, for the application's rule
    /// ([`pm_application::speaker::may_speak_as`]).
    pub fn voice(&self) -> Voice {
        Voice {
            ingress: self.has(Role::Ingress),
            llm: self.has(Role::Llm),
            admin: self.has(Role::Admin),
            actors: self.actors.clone(),
        }
    }

    /// Where its credential came from.
    pub fn source(&self) -> Source {
        self.source
    }
}

/// 1–100 characters of letters, digits and `._:@-`, and not a name the service keeps for
/// itself ([`SYSTEM`], [`OPEN`]) — the log's `principal` must never be forged.
///
/// # Errors
/// A message saying why the name is refused.
pub fn check_name(name: &str) -> Result<(), String> {
    use pm_domain::principal::NameError;
    match pm_domain::principal::check_name(name) {
        Ok(()) => {}
        Err(NameError::Length(length)) => {
            return Err(format!(
                "a principal's name is 1 to {MAX_NAME} characters (got {length})"
            ))
        }
        Err(NameError::Char(bad)) => {
            return Err(format!(
                "principal {:?}: {bad:?} is not a letter, a digit or one of ._:@-",
                crate::error::clip(name)
            ))
        }
    }
    if name == SYSTEM || name == OPEN {
        return Err(format!("the principal name {name:?} is the service's own"));
    }
    Ok(())
}

/// Parses role names.
///
/// # Errors
/// A message naming the unknown role.
pub fn parse_roles<S: AsRef<str>>(names: &[S]) -> Result<BTreeSet<Role>, String> {
    names.iter().map(|r| r.as_ref().parse()).collect()
}

/// Parses actor ids.
///
/// # Errors
/// A message naming the entry that is not a UUID.
pub fn parse_actors<S: AsRef<str>>(ids: &[S]) -> Result<BTreeSet<Uuid>, String> {
    ids.iter()
        .map(|id| {
            Uuid::parse_str(id.as_ref())
                .map_err(|_| format!("actor {:?} is not a UUID", crate::error::clip(id.as_ref())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_names_when_checked_then_only_letters_digits_and_punctuation_of_the_rule_pass() {
        assert!(check_name("svc.github-bridge@acme:1_x").is_ok());
        assert!(check_name("ünïcode").is_ok(), "letters are letters");
        assert!(check_name(&"a".repeat(100)).is_ok());
        assert!(check_name(&"a".repeat(101)).is_err());
        assert!(check_name("").is_err());
        assert!(check_name("two words").is_err());
        assert!(check_name("a/b").is_err());
    }

    #[test]
    fn given_the_services_own_names_when_claimed_then_refused() {
        assert!(check_name("system").is_err());
        assert!(check_name("open").is_err());
    }

    #[test]
    fn given_a_star_when_organizations_parse_then_it_means_all_and_stands_alone() {
        assert_eq!(Scope::parse(&["*"]), Ok(Scope::All));
        assert!(Scope::parse(&["*", "acme"]).is_err());
        let only = Scope::parse(&["globex", "acme"]).expect("valid");
        assert_eq!(only.names(), vec!["acme".to_string(), "globex".to_string()]);
        assert!(Scope::parse(&[" "]).is_err(), "blank");
    }

    #[test]
    fn given_no_roles_when_made_then_refused() {
        let made = Principal::new("x", BTreeSet::new(), Scope::All, None, Source::Token);
        assert!(made.is_err());
    }

    #[test]
    fn given_roles_when_labelled_then_one_role_reads_as_before_and_several_join() {
        assert_eq!(Principal::of_role(Role::Llm).role_label(), "llm");
        assert_eq!(Principal::open().role_label(), "open");
        let two = Principal::new(
            "ops",
            BTreeSet::from([Role::Analyst, Role::Admin]),
            Scope::All,
            None,
            Source::Token,
        )
        .expect("valid");
        assert_eq!(two.role_label(), "admin,analyst");
    }
}
