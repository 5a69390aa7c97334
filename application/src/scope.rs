//! What a principal may see and touch (TRUST.md "Organizations"): everything that belongs
//! to a conversation belongs to its organization, and a principal whose organizations are
//! not `*` sees only those. The rule is stated here once; the stores apply it in SQL
//! (through the log-derived `conversation_organizations` table), the log tail in memory
//! ([`crate::log::EventFilter::matches`]), and the HTTP layer to what a path names.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use pm_domain::text::Label;
use uuid::Uuid;

use crate::AppError;

/// The organizations a principal may see.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Scope {
    /// `["*"]`: every organization, the conversations without one, and what belongs to no
    /// conversation (actors' registrations, the service's own operations).
    #[default]
    All,
    /// Only conversations of these organizations (none: nothing at all).
    Only(Arc<BTreeSet<String>>),
}

/// Why a principal may not start a conversation with the organization it asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartRefused {
    /// A scoped principal must name one of its organizations.
    #[error("a conversation started by this principal must name one of its organizations")]
    OrganizationRequired,
    /// The organization is not one of the principal's.
    #[error("organization {0:?} is not one of this principal's organizations")]
    OrganizationForbidden(String),
}

impl Scope {
    /// Only `names`.
    pub fn only<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Self::Only(Arc::new(names.into_iter().map(Into::into).collect()))
    }

    /// Parses a list of organization names, where `*` alone means every organization.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        if names.iter().any(|n| n.as_ref() == "*") {
            return match names.len() {
                1 => Ok(Self::All),
                _ => Err("\"*\" stands alone: it already means every organization".into()),
            };
        }
        names
            .iter()
            .map(|n| {
                Label::parse(n.as_ref())
                    .map(|l| l.as_str().to_string())
                    .map_err(|e| {
                        let shown: String = n.as_ref().chars().take(64).collect();
                        format!("organization {shown:?}: {e}")
                    })
            })
            .collect::<Result<BTreeSet<_>, _>>()
            .map(|names| Self::Only(Arc::new(names)))
    }

    /// The names as `GET /v1/me` lists them (`["*"]` for every organization).
    pub fn names(&self) -> Vec<String> {
        match self {
            Self::All => vec!["*".into()],
            Self::Only(names) => names.iter().cloned().collect(),
        }
    }

    /// Whether this scope is every organization (nothing to filter).
    pub fn is_all(&self) -> bool {
        matches!(self, Self::All)
    }

    /// The organizations to filter by; `None` for every organization.
    pub fn organizations(&self) -> Option<&BTreeSet<String>> {
        match self {
            Self::All => None,
            Self::Only(names) => Some(names),
        }
    }

    /// Whether something of a conversation of `organization` (`None`: a conversation
    /// without one, or something of no conversation) is visible.
    pub fn permits(&self, organization: Option<&str>) -> bool {
        match self {
            Self::All => true,
            Self::Only(names) => organization.is_some_and(|o| names.contains(o)),
        }
    }

    /// Whether everything `other` may see, this scope may see too (a webhook registered
    /// by `other` is then this principal's to see, delete or resume).
    pub fn covers(&self, other: &Scope) -> bool {
        match (self, other) {
            (Self::All, _) => true,
            (Self::Only(_), Self::All) => false,
            (Self::Only(mine), Self::Only(theirs)) => theirs.is_subset(mine),
        }
    }

    /// Whether a conversation may be started with `organization`.
    ///
    /// # Errors
    /// [`StartRefused`] for a scoped principal naming none or another organization.
    pub fn may_start(&self, organization: Option<&str>) -> Result<(), StartRefused> {
        match (self, organization) {
            (Self::All, _) => Ok(()),
            (Self::Only(_), None) => Err(StartRefused::OrganizationRequired),
            (Self::Only(names), Some(o)) if names.contains(o) => Ok(()),
            (Self::Only(_), Some(o)) => Err(StartRefused::OrganizationForbidden(o.to_string())),
        }
    }
}

/// The kind of thing a request's path names, whose organization decides whether the
/// caller may see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A conversation (and its session, which shares its id).
    Conversation,
    /// A task.
    Task,
    /// An agent.
    Agent,
    /// A turn (and its tool calls).
    Turn,
    /// An actor: seen by a scoped principal once it takes part in a conversation of one
    /// of its organizations (an actor belongs to no organization of its own).
    Actor,
}

/// Whether a caller may see the thing a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// It does not exist: the endpoint answers its own `404`.
    Missing,
    /// It exists and is in the caller's scope.
    Visible,
    /// It exists outside the caller's scope: answered exactly as [`Visibility::Missing`].
    Hidden,
}

/// Where the organization of what a path names is looked up.
///
/// # Errors
/// [`AppError::Unavailable`] when the store cannot be read.
pub trait OwnerStore: Send + Sync + 'static {
    /// Whether `scope` may see `target` `id`.
    fn visibility(
        &self,
        scope: &Scope,
        target: Target,
        id: Uuid,
    ) -> impl Future<Output = Result<Visibility, AppError>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_every_organization_when_asked_then_everything_is_permitted() {
        let all = Scope::All;
        assert!(all.permits(Some("acme")));
        assert!(all.permits(None));
        assert!(all.is_all());
        assert_eq!(all.organizations(), None);
        assert_eq!(all.may_start(None), Ok(()));
        assert_eq!(all.may_start(Some("globex")), Ok(()));
    }

    #[test]
    fn given_a_scope_when_asked_then_only_its_organizations_are_permitted() {
        let acme = Scope::only(["acme"]);
        assert!(acme.permits(Some("acme")));
        assert!(!acme.permits(Some("globex")));
        assert!(!acme.permits(Some("acm")));
        // A conversation without an organization, or no conversation at all: `*` only.
        assert!(!acme.permits(None));
        assert!(!acme.is_all());
    }

    #[test]
    fn given_no_organizations_when_asked_then_nothing_is_permitted() {
        let none = Scope::only(Vec::<String>::new());
        assert!(!none.permits(Some("acme")));
        assert!(!none.permits(None));
        assert_eq!(
            none.may_start(Some("acme")),
            Err(StartRefused::OrganizationForbidden("acme".into()))
        );
    }

    #[test]
    fn given_a_scope_when_starting_then_the_organization_must_be_one_of_its_own() {
        let acme = Scope::only(["acme", "initech"]);
        assert_eq!(acme.may_start(Some("initech")), Ok(()));
        assert_eq!(
            acme.may_start(None),
            Err(StartRefused::OrganizationRequired)
        );
        assert_eq!(
            acme.may_start(Some("globex")),
            Err(StartRefused::OrganizationForbidden("globex".into()))
        );
    }

    #[test]
    fn given_two_scopes_when_compared_then_one_covers_what_it_contains() {
        let acme = Scope::only(["acme"]);
        let both = Scope::only(["acme", "globex"]);
        assert!(Scope::All.covers(&both));
        assert!(Scope::All.covers(&Scope::All));
        assert!(both.covers(&acme));
        assert!(acme.covers(&acme));
        assert!(!acme.covers(&both));
        assert!(!both.covers(&Scope::All));
    }

    #[test]
    fn given_names_when_parsed_then_star_stands_alone_and_labels_are_checked() {
        assert_eq!(Scope::parse(&["*"]), Ok(Scope::All));
        assert!(Scope::parse(&["*", "acme"]).is_err());
        assert_eq!(Scope::parse(&["b", "a"]), Ok(Scope::only(["a", "b"])));
        assert_eq!(Scope::only(["b", "a"]).names(), vec!["a", "b"]);
        assert_eq!(Scope::All.names(), vec!["*"]);
        assert!(Scope::parse(&[""]).is_err());
    }
}
