//! [`LoggedMetadata`]: a logged event's metadata read by its fields' types — the reading
//! of what [`EventMetadata`](crate::bus::EventMetadata) writes, stated once, so no reader
//! spells a key of its own.
//!
//! The metadata is read leniently, field by field: an event written before a field was
//! recorded (facts that name no principal) or with a field of another type reads as
//! `None` for that field, never as an error for the whole event — the log keeps every
//! event ever written, and a reader must not stop at an old one.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::trace::TraceContext;

/// The keys [`EventMetadata`](crate::bus::EventMetadata) is stored under (its serde names).
const CORRELATION_ID: &str = "correlation_id";
const CAUSATION_ID: &str = "causation_id";
const ROLE: &str = "role";
const PRINCIPAL: &str = "principal";
const RECORDED_AT: &str = "recorded_at";
const TURN_ID: &str = "turn_id";
const TURN_EPOCH: &str = "turn_epoch";
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// A logged event's metadata (borrowed from the event's parsed JSON, which is parsed once
/// and shared by every reader of the event).
#[derive(Debug, Clone, Copy)]
pub struct LoggedMetadata<'a>(&'a Value);

impl<'a> LoggedMetadata<'a> {
    /// The reading of `metadata`, the JSON an event's metadata is stored as.
    pub fn new(metadata: &'a Value) -> Self {
        Self(metadata)
    }

    fn text(self, key: &str) -> Option<&'a str> {
        self.0.get(key)?.as_str()
    }

    /// What ties together everything one request caused.
    pub fn correlation_id(self) -> Option<&'a str> {
        self.text(CORRELATION_ID)
    }

    /// The position or id of what caused the event.
    pub fn causation_id(self) -> Option<&'a str> {
        self.text(CAUSATION_ID)
    }

    /// The writer's role.
    pub fn role(self) -> Option<&'a str> {
        self.text(ROLE)
    }

    /// Who caused it (TRUST.md "The log says who"); `None` for an event written before
    /// events recorded one.
    pub fn principal(self) -> Option<&'a str> {
        self.text(PRINCIPAL)
    }

    /// The server time it was recorded at.
    pub fn recorded_at(self) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(self.text(RECORDED_AT)?)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// The turn a fenced fact was written for (WORKERS.md): the worker's claim that wrote
    /// it; `None` for a fact no claim fenced.
    pub fn turn_id(self) -> Option<Uuid> {
        Uuid::parse_str(self.text(TURN_ID)?).ok()
    }

    /// The epoch of the claim a fenced fact was written under.
    pub fn turn_epoch(self) -> Option<i64> {
        self.0.get(TURN_EPOCH)?.as_i64()
    }

    /// The trace of what caused it (issue 34); `None` for an event written before events
    /// recorded one.
    pub fn trace(self) -> Option<TraceContext> {
        Some(TraceContext {
            traceparent: self.text(TRACEPARENT)?.to_string(),
            tracestate: self.text(TRACESTATE).map(str::to_string),
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::SubsecRound;
    use serde_json::json;

    use super::*;
    use crate::bus::{EventMetadata, TurnRef};

    #[test]
    fn given_metadata_a_command_wrote_when_read_then_every_field_reads_back() {
        let written = EventMetadata {
            correlation_id: "corr".into(),
            causation_id: Some("17".into()),
            role: "worker".into(),
            principal: "alice".into(),
            recorded_at: Utc::now().trunc_subsecs(6),
            turn: Some(TurnRef {
                turn_id: Uuid::new_v4(),
                turn_epoch: 3,
            }),
            trace: Some(TraceContext::root()),
        };
        let stored = serde_json::to_value(&written).expect("serializes");

        let read = LoggedMetadata::new(&stored);

        assert_eq!(read.correlation_id(), Some("corr"));
        assert_eq!(read.causation_id(), Some("17"));
        assert_eq!(read.role(), Some("worker"));
        assert_eq!(read.principal(), Some("alice"));
        assert_eq!(read.recorded_at(), Some(written.recorded_at));
        assert_eq!(read.turn_id(), written.turn.map(|t| t.turn_id));
        assert_eq!(read.turn_epoch(), Some(3));
        assert_eq!(read.trace(), written.trace);
    }

    #[test]
    fn given_old_or_odd_metadata_when_read_then_the_fields_it_lacks_are_none_and_the_rest_read() {
        let stored = json!({
            "recorded_at": "2026-01-02T03:04:05.000006Z",
            "principal": 7,
            "turn_id": "not a uuid",
            "turn_epoch": "3",
        });

        let read = LoggedMetadata::new(&stored);

        assert!(read.recorded_at().is_some());
        assert_eq!(read.correlation_id(), None);
        assert_eq!(read.causation_id(), None);
        assert_eq!(read.role(), None);
        assert_eq!(read.principal(), None);
        assert_eq!(read.turn_id(), None);
        assert_eq!(read.turn_epoch(), None);
        assert_eq!(read.trace(), None);
        assert_eq!(LoggedMetadata::new(&Value::Null).recorded_at(), None);
    }
}
