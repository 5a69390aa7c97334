//! [`EventQuery`]: which events of the log to read, and JSON pages of it
//! ([`Client::events`]).

use serde::Deserialize;
use uuid::Uuid;

use super::{LogEvent, WireEvent};
use crate::http::Call;
use crate::{Client, Error, Position};

/// Which events of the log to read ([`Client::events`]) or follow ([`Client::follow`]).
///
/// ```
/// use pm_client::{EventQuery, Position};
///
/// let query = EventQuery::new()
///     .with_type("project_manager.message.added")
///     .with_type("project_manager.task.*") // a prefix
///     .after(Position::start());
/// assert_eq!(query.types.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventQuery {
    /// Exact event types and `prefix.*` patterns; empty: every type.
    pub types: Vec<String>,
    /// Only the events of this conversation (its facts, checkpoints, messages, tasks and
    /// task checkpoints, and the runes of its session). A followed stream of one
    /// conversation opens with a [`Snapshot`](crate::Snapshot).
    pub conversation_id: Option<Uuid>,
    /// Only the events this principal caused (`system`: what the service did on its own).
    pub principal: Option<String>,
    /// Start after this position; `None` (or [`Position::start`]): from the beginning.
    pub after: Option<Position>,
    /// Events per JSON page (1–500, the service's default 50); not used by the follower.
    pub limit: Option<u32>,
}

impl EventQuery {
    /// Every event from the start of the log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only these types (exact names and `prefix.*`), replacing any given before.
    pub fn types<S: Into<String>>(mut self, types: impl IntoIterator<Item = S>) -> Self {
        self.types = types.into_iter().map(Into::into).collect();
        self
    }

    /// Also this type (an exact name or `prefix.*`).
    pub fn with_type(mut self, event_type: impl Into<String>) -> Self {
        self.types.push(event_type.into());
        self
    }

    /// Only the events of one conversation.
    pub fn conversation(mut self, conversation_id: Uuid) -> Self {
        self.conversation_id = Some(conversation_id);
        self
    }

    /// Only the events one principal caused: an audit of what it did.
    pub fn principal(mut self, name: impl Into<String>) -> Self {
        self.principal = Some(name.into());
        self
    }

    /// Start after `position` (e.g. the last one a consumer processed).
    pub fn after(mut self, position: Position) -> Self {
        self.after = Some(position);
        self
    }

    /// Events per JSON page.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The filters as query parameters (no cursor, no limit).
    pub(crate) fn filters(&self) -> Vec<(&'static str, String)> {
        let mut params = Vec::new();
        if !self.types.is_empty() {
            params.push(("types", self.types.join(",")));
        }
        if let Some(id) = self.conversation_id {
            params.push(("conversation_id", id.to_string()));
        }
        if let Some(principal) = &self.principal {
            params.push(("principal", principal.clone()));
        }
        params
    }
}

/// A JSON page of the log.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EventPage {
    /// The events, in log order.
    pub items: Vec<LogEvent>,
    /// Where the next page starts: the last item's position, or the query's start when
    /// the page is empty (the reader has caught up).
    pub next_cursor: Position,
}

#[derive(Deserialize)]
struct WirePage {
    items: Vec<WireEvent>,
    next_cursor: Position,
}

impl Client {
    /// `GET /v1/events`: one JSON page of the log after `query.after`.
    ///
    /// The log is read in commit-safe order: a fact is readable once no transaction that
    /// could commit before it is still running (on PostgreSQL that can be a moment after
    /// its command answered). An empty page means "caught up for now", not "the end".
    ///
    /// ```no_run
    /// # async fn run(client: pm_client::Client) -> Result<(), pm_client::Error> {
    /// use pm_client::EventQuery;
    ///
    /// let mut query = EventQuery::new().with_type("project_manager.*").limit(500);
    /// loop {
    ///     let page = client.events(&query).await?;
    ///     if page.items.is_empty() {
    ///         break; // caught up
    ///     }
    ///     for event in &page.items {
    ///         println!("{} {}", event.position, event.event_type());
    ///     }
    ///     query = query.after(page.next_cursor);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `400 invalid_parameter` for a bad filter or position, and the [`Error`]s of any
    /// call.
    pub async fn events(&self, query: &EventQuery) -> Result<EventPage, Error> {
        let mut params = query.filters();
        if let Some(after) = &query.after {
            params.push(("cursor", after.as_str().to_string()));
        }
        if let Some(limit) = query.limit {
            params.push(("limit", limit.to_string()));
        }
        let call = Call::get("/v1/events".into(), params);
        let page: WirePage = self.inner.send(&call).await?.json("event page")?;
        Ok(EventPage {
            items: page
                .items
                .into_iter()
                .map(WireEvent::into_event)
                .collect::<Result<_, _>>()?,
            next_cursor: page.next_cursor,
        })
    }
}
