//! The four ways events leave the service other than HTTP answers, as AsyncAPI channels,
//! each with the operation that sends on it: the JetStream relay (a subject per event
//! type), the wakeup doorbells, the webhook deliveries and the SSE stream.

use serde_json::{json, Map, Value};

use super::headers;
use super::payloads::{reference, Schemas};
use crate::doorbells::Doorbell;

/// A channel and the service's operation on it.
pub struct Channel {
    /// Its key in `channels` (and its operation's in `operations`).
    pub key: String,
    /// The Channel Object.
    pub channel: Value,
    /// The Operation Object.
    pub operation: Value,
}

impl Channel {
    /// A channel whose messages are all sent by one operation of the service.
    fn sent(key: String, mut channel: Value, messages: Map<String, Value>, summary: &str) -> Self {
        let refs: Vec<Value> = messages
            .keys()
            .map(|m| json!({"$ref": format!("#/channels/{key}/messages/{m}")}))
            .collect();
        channel["messages"] = Value::Object(messages);
        let operation = json!({
            "action": "send",
            "channel": {"$ref": format!("#/channels/{key}")},
            "summary": summary,
            "messages": refs,
        });
        Self {
            key,
            channel,
            operation,
        }
    }
}

/// Every channel; `event_types` have their CloudEvent schema in `schemas`.
pub fn all(event_types: &[String], schemas: &mut Schemas) -> Vec<Channel> {
    let mut all: Vec<Channel> = event_types.iter().map(|t| relay(t)).collect();
    all.push(doorbell(schemas));
    all.push(webhooks(event_types));
    all.push(events(event_types, schemas));
    all
}

/// An event message: the event's CloudEvent with `headers`.
fn event_message(event_type: &str, headers: Value) -> Value {
    json!({
        "name": event_type,
        "title": event_type,
        "contentType": "application/json",
        "headers": headers,
        "payload": reference(event_type),
    })
}

/// `<prefix>.<event type>` on JetStream: every fact and rune, in log order, once.
fn relay(event_type: &str) -> Channel {
    let channel = json!({
        "address": format!("{{prefix}}.{event_type}"),
        "title": format!("Relay of {event_type}"),
        "description": "The JetStream stream `PM_NATS_STREAM` (default `PROJECT_MANAGER`, subjects `<prefix>.>`) holds every fact and rune in log order, each once (deduplicated by `Nats-Msg-Id`). Subscribe to `<prefix>.project_manager.>` for the facts, `<prefix>.turn.*` for a machine's runes, `<prefix>.>` for all.",
        "parameters": {
            "prefix": {"default": "pm", "description": "`PM_NATS_SUBJECT_PREFIX`."},
        },
        "servers": [{"$ref": "#/servers/nats"}],
    });
    let mut messages = Map::new();
    messages.insert(
        event_type.to_string(),
        event_message(event_type, headers::relay()),
    );
    Channel::sent(
        format!("relay.{event_type}"),
        channel,
        messages,
        "Publish the event to JetStream once it is in the log.",
    )
}

/// `cmd.agent.<agent_id>.wakeup` on core NATS: a turn of that agent became claimable.
fn doorbell(schemas: &mut Schemas) -> Channel {
    let channel = json!({
        "address": "cmd.agent.{agent_id}.wakeup",
        "title": "Wakeup doorbell",
        "description": "Core NATS (not JetStream): rung when a turn becomes claimable. A hint, never the authority: the worker claims (`POST /v1/turns/claim`) and keeps a fallback poll, as a ring may be missed.",
        "parameters": {"agent_id": {"description": "The agent whose turn it is (a UUID).", "location": "$message.payload#/agent_id"}},
        "servers": [{"$ref": "#/servers/nats"}],
    });
    let mut messages = Map::new();
    messages.insert(
        "wakeup".to_string(),
        json!({
            "name": "wakeup",
            "title": "A turn became claimable",
            "contentType": "application/json",
            "headers": headers::doorbell(),
            "payload": schemas.add::<Doorbell>(),
        }),
    );
    Channel::sent(
        "doorbell".to_string(),
        channel,
        messages,
        "Ring the agent's doorbell.",
    )
}

/// `POST <url>` of each subscription (`POST /v1/webhooks`): the events its filters match.
fn webhooks(event_types: &[String]) -> Channel {
    let channel = json!({
        "address": null,
        "title": "Webhook deliveries",
        "description": "Each subscription's URL, as registered with `POST /v1/webhooks`: the events whose type its filters match, in log order, at least once, signed. Any 2xx answer is success; anything else is retried, then the subscription pauses.",
        "servers": [{"$ref": "#/servers/receiver"}],
    });
    let messages = event_types
        .iter()
        .map(|t| (t.clone(), event_message(t, headers::webhook())))
        .collect();
    let mut webhooks = Channel::sent(
        "webhooks".to_string(),
        channel,
        messages,
        "Deliver a matching event to a subscriber.",
    );
    webhooks.operation["bindings"] = json!({"http": {"method": "POST", "bindingVersion": "0.3.0"}});
    webhooks
}

/// `GET /v1/events` with `Accept: text/event-stream`: the log as Server-Sent Events.
fn events(event_types: &[String], schemas: &mut Schemas) -> Channel {
    let channel = json!({
        "address": "/v1/events",
        "title": "The event stream (SSE)",
        "description": "`GET /v1/events` with `Accept: text/event-stream` and a bearer token: every event the caller may see, in log order, each frame `id: <position>`, `event: <type>`, `data: <CloudEvent JSON>`; with `conversation_id`, first an `event: snapshot` frame without `id`. Filters: `types`, `conversation_id`, `principal`; resume with `Last-Event-ID` or `cursor`. A `: keep-alive` comment every 15 s.",
        "servers": [{"$ref": "#/servers/service"}],
    });
    let mut messages: Map<String, Value> = event_types
        .iter()
        .map(|t| (t.clone(), event_message(t, headers::sse())))
        .collect();
    messages.insert(
        "snapshot".to_string(),
        json!({
            "name": "snapshot",
            "title": "The conversation's session as the stream starts",
            "contentType": "application/json",
            "headers": headers::sse(),
            "payload": schemas.add::<pm_application::views::SessionSnapshot>(),
        }),
    );
    Channel::sent(
        "events".to_string(),
        channel,
        messages,
        "Stream the log to a client.",
    )
}
