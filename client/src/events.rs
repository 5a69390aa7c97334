//! The global event log, typed: a [`LogEvent`] is a CloudEvent's position and attributes
//! and its content — a domain [`Fact`], the FCMP [`Snapshot`] that opens a conversation's
//! stream, or [`Other`](EventContent::Other) data of event types this client does not
//! know yet (the runes of sagas: `session.*`, `agent.*`, `turn.*`, `plan.*`,
//! `saga.anomaly`).

mod follow;
mod query;
mod raw;
mod sequence;

use chrono::{DateTime, Utc};
use pm_api_types::fact::{Fact, FactError};
use serde::Deserialize;
use serde_json::value::RawValue;
use uuid::Uuid;

pub use query::{EventPage, EventQuery};
pub use raw::RawJson;

use crate::{Error, Position};

/// One event of the log (or the snapshot that opens a conversation's stream).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LogEvent {
    /// Its place in the log: resume after it with [`EventQuery::after`]. For a
    /// [`Snapshot`], the position the events after it follow.
    pub position: Position,
    /// The CloudEvent attributes; `None` only for a [`Snapshot`], which is not a logged
    /// event.
    pub attributes: Option<EventAttributes>,
    /// What happened.
    pub content: EventContent,
}

/// The CloudEvents 1.0 attributes and extensions of a logged event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventAttributes {
    /// `<aggregate_type>:<aggregate_id>:<sequence>`: unique and stable.
    pub id: String,
    /// The fact's or rune's name, e.g. `project_manager.message.added`.
    pub event_type: String,
    /// `/project-manager/<aggregate_type>/<aggregate_id>`.
    pub source: String,
    /// The aggregate id.
    pub subject: String,
    /// When it was recorded (server time).
    pub time: Option<DateTime<Utc>>,
    /// Its sequence in its aggregate's stream (1-based; the `sequence` extension, a
    /// string of digits on the wire).
    pub sequence: i64,
    /// The fact's `event_version`.
    pub event_version: Option<String>,
    /// The correlation id of the request (or event) that caused it.
    pub correlation_id: Option<String>,
    /// What caused it, when something did.
    pub causation_id: Option<String>,
    /// The conversation it belongs to.
    pub conversation_id: Option<Uuid>,
    /// The role of the writer (`ingress`, `llm`, `admin`, `open`).
    pub role: Option<String>,
    /// Who caused it: the principal's name, `system` for what the service did on its own
    /// (deadlines, lease expiry, restart recovery); `None` from a service that predates it.
    pub principal: Option<String>,
    /// The turn a fenced command acted for (the `turnid` extension; WORKERS.md).
    pub turn_id: Option<Uuid>,
    /// The epoch of the claim it acted under (the `turnepoch` extension).
    pub turn_epoch: Option<i64>,
    /// The W3C `traceparent` of what caused it (the CloudEvents distributed-tracing
    /// extension): continue it to put what the event causes in the same trace.
    pub traceparent: Option<String>,
    /// The W3C `tracestate` that came with it.
    pub tracestate: Option<String>,
}

/// What a [`LogEvent`] says. More typed variants will come (the runes of the sagas);
/// until then their data is [`EventContent::Other`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EventContent {
    /// A `project_manager.*` fact.
    Fact(Fact),
    /// The FCMP snapshot a conversation's event stream opens with.
    Snapshot(Snapshot),
    /// An event type this client has no type for.
    Other {
        /// The type, e.g. `turn.started`.
        event_type: String,
        /// Its data as sent.
        data: RawJson,
    },
    /// A known fact type whose data does not parse as that fact (e.g. a newer service
    /// added a field): kept rather than dropped, so a follower never skips an event.
    Unreadable {
        /// The type.
        event_type: String,
        /// Its data as sent.
        data: RawJson,
        /// The parser's message.
        reason: String,
    },
}

/// The state of a conversation's session when its stream opened (FCMP snapshot). The
/// session saga is not built yet, so `session` is `None` for now.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Snapshot {
    /// The conversation.
    pub conversation_id: Uuid,
    /// The log position the stream continues after.
    pub cursor: Position,
    /// The session's state, as sent (it will get a type once the session saga exists).
    #[serde(default)]
    pub session: Option<RawJson>,
}

impl LogEvent {
    /// The event type (`"snapshot"` for the snapshot).
    pub fn event_type(&self) -> &str {
        match (&self.attributes, &self.content) {
            (Some(a), _) => &a.event_type,
            (None, _) => "snapshot",
        }
    }

    /// The fact, when the event is one.
    pub fn fact(&self) -> Option<&Fact> {
        match &self.content {
            EventContent::Fact(f) => Some(f),
            _ => None,
        }
    }

    /// The conversation the event belongs to.
    pub fn conversation_id(&self) -> Option<Uuid> {
        match (&self.attributes, &self.content) {
            (_, EventContent::Snapshot(s)) => Some(s.conversation_id),
            (Some(a), _) => a.conversation_id,
            (None, _) => None,
        }
    }

    /// The CloudEvent id (`None` for the snapshot): pass it as
    /// [`causation_id`](crate::CommandRequest::causation_id) of a command that answers it.
    pub fn id(&self) -> Option<&str> {
        self.attributes.as_ref().map(|a| a.id.as_str())
    }

    /// The correlation id the event carries.
    pub fn correlation_id(&self) -> Option<&str> {
        self.attributes.as_ref()?.correlation_id.as_deref()
    }

    /// Reads a CloudEvent as the service serializes it.
    ///
    /// # Errors
    /// [`Error::Decode`] when `json` is not a CloudEvent of the log.
    pub fn from_cloud_event(json: &str) -> Result<Self, Error> {
        let wire: WireEvent =
            serde_json::from_str(json).map_err(|e| Error::decode("CloudEvent", e))?;
        wire.into_event()
    }

    /// Reads the data of an SSE `snapshot` event.
    ///
    /// # Errors
    /// [`Error::Decode`] when `json` is not a snapshot.
    pub fn from_snapshot(json: &str) -> Result<Self, Error> {
        let snapshot: Snapshot =
            serde_json::from_str(json).map_err(|e| Error::decode("snapshot", e))?;
        Ok(Self {
            position: snapshot.cursor.clone(),
            attributes: None,
            content: EventContent::Snapshot(snapshot),
        })
    }
}

/// A CloudEvent as the service sends it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireEvent {
    id: String,
    source: String,
    #[serde(rename = "type")]
    event_type: String,
    subject: String,
    time: Option<String>,
    data: Box<RawValue>,
    position: Position,
    #[serde(deserialize_with = "sequence::deserialize")]
    sequence: i64,
    eventversion: Option<String>,
    correlationid: Option<String>,
    causationid: Option<String>,
    role: Option<String>,
    #[serde(default)]
    principal: Option<String>,
    conversationid: Option<Uuid>,
    #[serde(default)]
    turnid: Option<Uuid>,
    #[serde(default)]
    turnepoch: Option<i64>,
    #[serde(default)]
    traceparent: Option<String>,
    #[serde(default)]
    tracestate: Option<String>,
}

impl WireEvent {
    pub(crate) fn into_event(self) -> Result<LogEvent, Error> {
        let time = self
            .time
            .map(|t| DateTime::parse_from_rfc3339(&t).map(|t| t.with_timezone(&Utc)))
            .transpose()
            .map_err(|e| Error::decode("CloudEvent time", e))?;
        let content = content(&self.event_type, self.data)?;
        Ok(LogEvent {
            position: self.position,
            attributes: Some(EventAttributes {
                id: self.id,
                event_type: self.event_type,
                source: self.source,
                subject: self.subject,
                time,
                sequence: self.sequence,
                event_version: self.eventversion,
                correlation_id: self.correlationid,
                causation_id: self.causationid,
                conversation_id: self.conversationid,
                role: self.role,
                principal: self.principal,
                turn_id: self.turnid,
                turn_epoch: self.turnepoch,
                traceparent: self.traceparent,
                tracestate: self.tracestate,
            }),
            content,
        })
    }
}

/// Types the data of an event.
fn content(event_type: &str, data: Box<RawValue>) -> Result<EventContent, Error> {
    let data = RawJson(data);
    if !event_type.starts_with("project_manager.") {
        return Ok(other(event_type, data));
    }
    let value: serde_json::Value = data.parse()?;
    Ok(match Fact::parse(event_type, &value) {
        Ok(fact) => EventContent::Fact(fact),
        Err(FactError::Unknown(_)) => other(event_type, data),
        Err(FactError::Malformed { reason, .. }) => EventContent::Unreadable {
            event_type: event_type.to_string(),
            data,
            reason,
        },
    })
}

fn other(event_type: &str, data: RawJson) -> EventContent {
    EventContent::Other {
        event_type: event_type.to_string(),
        data,
    }
}

#[cfg(test)]
mod tests;
