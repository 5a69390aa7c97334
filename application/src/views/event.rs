//! An event of the global log as `GET /v1/events` serves it: a CloudEvents 1.0 JSON object.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::log::LoggedEvent;

/// A CloudEvents 1.0 event of the global log: a fact or a rune.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CloudEvent {
    /// `1.0`.
    pub specversion: String,
    /// `<aggregate_type>:<aggregate_id>:<sequence>`: unique and stable.
    pub id: String,
    /// `/project-manager/<aggregate_type>/<aggregate_id>`.
    pub source: String,
    /// The fact's or rune's name.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The aggregate id.
    pub subject: String,
    /// When it was recorded (server time).
    pub time: Option<String>,
    /// `application/json`.
    pub datacontenttype: String,
    /// The payload: exactly the fields TRANSITIONS.md (or the seed's rune table) lists.
    pub data: Value,
    /// Its position in the log (pass it back as `cursor` or `Last-Event-ID`).
    pub position: String,
    /// Its sequence in its aggregate's stream (1-based), as a string of digits: the
    /// CloudEvents sequence extension is a string.
    pub sequence: String,
    /// The fact's `event_version`.
    pub eventversion: String,
    /// The correlation id of the request (or fact) that caused it.
    pub correlationid: Option<String>,
    /// What caused it, when something did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causationid: Option<String>,
    /// The role of the writer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Who caused it: the principal's name, `system` for the service's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The conversation it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversationid: Option<String>,
    /// The turn a fenced command acted for (WORKERS.md; metadata `turn_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnid: Option<String>,
    /// The epoch of the claim it acted under (metadata `turn_epoch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnepoch: Option<i64>,
    /// The W3C `traceparent` of what caused it (the CloudEvents distributed-tracing
    /// extension): the span of the request that wrote it, or of the request whose fact the
    /// sagas decided on. Absent on events written before events recorded one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The W3C `tracestate` that came with it, when the caller sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl From<&LoggedEvent> for CloudEvent {
    fn from(e: &LoggedEvent) -> Self {
        let meta = |key: &str| {
            e.metadata
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Self {
            specversion: "1.0".into(),
            id: format!("{}:{}:{}", e.aggregate_type, e.aggregate_id, e.sequence),
            source: format!("/project-manager/{}/{}", e.aggregate_type, e.aggregate_id),
            event_type: e.event_type.clone(),
            subject: e.aggregate_id.clone(),
            time: meta("recorded_at"),
            datacontenttype: "application/json".into(),
            data: Value::clone(&e.payload),
            position: e.position.to_string(),
            sequence: e.sequence.to_string(),
            eventversion: e.event_version.clone(),
            correlationid: meta("correlation_id"),
            causationid: meta("causation_id"),
            role: meta("role"),
            principal: meta("principal"),
            conversationid: e.conversation_id.map(|c| c.to_string()),
            turnid: meta("turn_id"),
            turnepoch: e.metadata.get("turn_epoch").and_then(Value::as_i64),
            traceparent: meta("traceparent"),
            tracestate: meta("tracestate"),
        }
    }
}
