//! The global event log: every fact in one total, gap-free order that is safe to follow
//! while writers commit concurrently.

use std::fmt;
use std::future::Future;
use std::str::FromStr;

use uuid::Uuid;

use crate::scope::Scope;
use crate::AppError;

mod json;
#[cfg(test)]
pub(crate) mod memory;
mod metadata;
pub mod tail;

pub use json::Json;
pub use metadata::LoggedMetadata;

/// An event's place in the global log: a number that grows in commit order (appends take
/// one lock until they commit, so the number each row is given is also the order in which
/// rows become visible — a reader can never see a later position before an earlier one).
/// Clients see it as an opaque token of digits; `"0"` is the start of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LogPosition(pub i64);

impl LogPosition {
    /// The position before the first event.
    pub const START: Self = Self(0);

    /// The number.
    pub fn value(self) -> i64 {
        self.0
    }

    /// How many positions lie after `earlier` up to this one (0 when it is not later).
    pub fn distance_from(self, earlier: Self) -> i64 {
        (self.0 - earlier.0).max(0)
    }
}

impl fmt::Display for LogPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A position token that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid position {0:?}: expected digits")]
pub struct InvalidPosition(pub String);

impl FromStr for LogPosition {
    type Err = InvalidPosition;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        if raw.is_empty() || raw.len() > 18 || !raw.bytes().all(|b| b.is_ascii_digit()) {
            return Err(InvalidPosition(clip(raw)));
        }
        raw.parse()
            .map(Self)
            .map_err(|_| InvalidPosition(clip(raw)))
    }
}

/// At most 32 characters of a token, for an error message.
fn clip(raw: &str) -> String {
    raw.chars().take(32).collect()
}

/// One event as the log holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedEvent {
    /// Its place in the log.
    pub position: LogPosition,
    /// The aggregate type (`conversation`, `task`, ...).
    pub aggregate_type: String,
    /// The aggregate id.
    pub aggregate_id: String,
    /// Its sequence number in the aggregate's stream (1-based).
    pub sequence: i64,
    /// The fact's name (`project_manager.task.created`).
    pub event_type: String,
    /// The fact's version (`1.0`).
    pub event_version: String,
    /// The fact's payload: exactly the fields TRANSITIONS.md lists. Shared: an event is
    /// read once by the log tail and handed to every processor of the process, each of
    /// which takes its own copy of the event; parsed when first read ([`Json`]).
    pub payload: Json,
    /// Correlation id, causation id, role, principal, server time (as `payload`); read
    /// through [`LoggedEvent::meta`].
    pub metadata: Json,
    /// The conversation the event belongs to, if any.
    pub conversation_id: Option<Uuid>,
    /// That conversation's organization (read with the event from the log-derived
    /// `conversation_organizations`): `None` for a conversation without one and for an
    /// event of no conversation. Decides who may see the event ([`EventFilter::scope`]).
    pub organization: Option<std::sync::Arc<str>>,
}

impl LoggedEvent {
    /// Its metadata, read by the types of its fields.
    pub fn meta(&self) -> LoggedMetadata<'_> {
        LoggedMetadata::new(&self.metadata)
    }

    /// The server time the event was recorded at (its metadata's `recorded_at`).
    pub fn recorded_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.meta().recorded_at()
    }

    /// The principal its metadata names (TRUST.md "The log says who"); `None` for an
    /// event written before events recorded one.
    pub fn principal(&self) -> Option<&str> {
        self.meta().principal()
    }
}

/// Which events a reader wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Exact event types; empty together with `type_prefixes` means all.
    pub types: Vec<String>,
    /// Event type prefixes (from `prefix.*`, kept with the trailing dot).
    pub type_prefixes: Vec<String>,
    /// Only events of this conversation.
    pub conversation_id: Option<Uuid>,
    /// Only events caused by this principal (metadata `principal`): an audit asks what
    /// one caller did. Events that name no principal never pass it.
    pub principal: Option<String>,
    /// Only events the reader may see: those of its organizations' conversations (every
    /// event for [`Scope::All`], the default of the service's own readers).
    pub scope: Scope,
}

impl EventFilter {
    /// Parses `types=a.b,c.*`: exact names and `prefix.*` patterns.
    pub fn with_types(mut self, spec: &str) -> Self {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.strip_suffix('*') {
                Some(prefix) => self.type_prefixes.push(prefix.to_string()),
                None => self.types.push(part.to_string()),
            }
        }
        self
    }

    /// Whether `event` passes the filter (the same rule the stores apply in SQL).
    pub fn matches(&self, event: &LoggedEvent) -> bool {
        let event_type = event.event_type.as_str();
        let type_ok = (self.types.is_empty() && self.type_prefixes.is_empty())
            || self.types.iter().any(|t| t == event_type)
            || self.type_prefixes.iter().any(|p| event_type.starts_with(p));
        let conversation_ok =
            self.conversation_id.is_none() || self.conversation_id == event.conversation_id;
        let scope_ok = self.scope.is_all()
            || (event.conversation_id.is_some()
                && self.scope.permits(event.organization.as_deref()));
        // Asked last and only when filtered on: it parses the event's metadata.
        type_ok
            && conversation_ok
            && scope_ok
            && self
                .principal
                .as_deref()
                .is_none_or(|p| event.principal() == Some(p))
    }
}

/// Read access to the global log.
///
/// # Errors
/// Every method fails with [`AppError::Unavailable`] when the store cannot be read.
pub trait LogReader: Send + Sync + 'static {
    /// Up to `limit` events after `after` that pass `filter`, in log order. Never returns
    /// an event whose transaction could still be followed by an earlier-ordered commit.
    fn read_after(
        &self,
        after: LogPosition,
        filter: &EventFilter,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<LoggedEvent>, AppError>> + Send;

    /// The event at `position`, however recent: a position handed to a client is of a
    /// committed event, which readers following the log may not be shown yet.
    fn event_at(
        &self,
        position: LogPosition,
    ) -> impl Future<Output = Result<Option<LoggedEvent>, AppError>> + Send;

    /// The position of the newest event readers may see (`START` when the log is empty):
    /// where a reader that wants only what comes next starts.
    fn head(&self) -> impl Future<Output = Result<LogPosition, AppError>> + Send;

    /// The newest committed position, at or after [`head`](LogReader::head): an append
    /// that started earlier may still be committing below it.
    fn end(&self) -> impl Future<Output = Result<LogPosition, AppError>> + Send;

    /// How long the oldest append in progress has been running (readers cannot pass what
    /// it appends until it ends), or `None` when no append is in progress or the store
    /// cannot tell.
    fn held_back(
        &self,
    ) -> impl Future<Output = Result<Option<std::time::Duration>, AppError>> + Send;

    /// A receiver that changes whenever new events may be readable (a doorbell: waking
    /// does not guarantee an event, and readers also poll).
    fn doorbell(&self) -> tokio::sync::watch::Receiver<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_as_tokens() {
        for token in ["0", "17", "100000000"] {
            let p: LogPosition = token.parse().expect("valid");
            assert_eq!(p.to_string(), token);
        }
        for bad in [
            "",
            "1.2",
            "1234.5",
            "-1",
            "+1",
            "abc",
            "9999999999999999999",
        ] {
            assert!(bad.parse::<LogPosition>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn positions_order_numerically_across_powers_of_ten() {
        let before: LogPosition = "99999999".parse().expect("valid");
        let after: LogPosition = "100000000".parse().expect("valid");
        assert!(before < after);
        assert!(LogPosition::START < before);
        assert_eq!(after.distance_from(before), 1);
        assert_eq!(before.distance_from(after), 0);
    }

    #[test]
    fn type_filter_takes_exact_names_and_prefixes() {
        let f = EventFilter::default().with_types("project_manager.task.*, session.created");
        let passes = |t: &str| f.matches(&memory::event(1, t));
        assert!(passes("project_manager.task.checkpoint.created"));
        assert!(passes("session.created"));
        assert!(!passes("session.closed"));
        assert!(!passes("project_manager.message.added"));
        assert!(EventFilter::default().matches(&memory::event(1, "anything")));
    }

    /// An event of `event_type` whose metadata names `principal`, if any.
    fn by(principal: Option<&str>, event_type: &str) -> LoggedEvent {
        LoggedEvent {
            metadata: match principal {
                Some(p) => serde_json::json!({"role": "ingress", "principal": p}),
                None => serde_json::json!({"role": "ingress"}),
            }
            .into(),
            ..memory::event(1, event_type)
        }
    }

    #[test]
    fn given_a_principal_filter_when_matched_then_only_that_principals_events_pass() {
        let alice = EventFilter {
            principal: Some("alice".into()),
            ..EventFilter::default()
        };
        assert!(alice.matches(&by(Some("alice"), "session.created")));
        assert!(!alice.matches(&by(Some("bob"), "session.created")));
        assert!(!alice.matches(&by(Some("alice-2"), "session.created")));
        // Written before events recorded their principal: nobody's.
        assert!(!alice.matches(&by(None, "session.created")));
        // Without the filter, every principal passes, and none.
        assert!(EventFilter::default().matches(&by(Some("bob"), "x")));
        assert!(EventFilter::default().matches(&by(None, "x")));
        assert_eq!(by(Some("alice"), "x").principal(), Some("alice"));
        assert_eq!(by(None, "x").principal(), None);
    }

    /// An event of conversation `conversation` whose organization is `organization`.
    fn of(conversation: Option<Uuid>, organization: Option<&str>) -> LoggedEvent {
        LoggedEvent {
            conversation_id: conversation,
            organization: organization.map(Into::into),
            ..memory::event(1, "project_manager.message.added")
        }
    }

    #[test]
    fn given_a_scope_when_matched_then_only_its_organizations_events_pass() {
        let acme = EventFilter {
            scope: Scope::only(["acme"]),
            ..EventFilter::default()
        };
        let conversation = Some(Uuid::nil());
        assert!(acme.matches(&of(conversation, Some("acme"))));
        assert!(!acme.matches(&of(conversation, Some("globex"))));
        // A conversation without an organization, and an event of none (an actor's
        // registration): only every-organization readers.
        assert!(!acme.matches(&of(conversation, None)));
        assert!(!acme.matches(&of(None, None)));
        let all = EventFilter::default();
        assert!(all.matches(&of(conversation, Some("globex"))));
        assert!(all.matches(&of(None, None)));
    }

    #[test]
    fn given_a_principal_and_types_when_matched_then_both_must_pass() {
        let f = EventFilter {
            principal: Some("alice".into()),
            ..EventFilter::default().with_types("session.*")
        };
        assert!(f.matches(&by(Some("alice"), "session.created")));
        assert!(!f.matches(&by(Some("alice"), "turn.started")));
        assert!(!f.matches(&by(Some("bob"), "session.created")));
    }
}
