//! Each event as it travels — on the relay, in a webhook delivery, on the SSE stream: the
//! CloudEvent envelope of `/openapi.json` (`CloudEvent`), its `type` the event's name and
//! its `data` the event's payload. One component per event type, named by the type.

use pm_application::views::CloudEvent;
use serde_json::json;

use super::payloads::Schemas;

/// Adds the envelope and, for every event type with a payload, its CloudEvent schema
/// (component `<event type>`); answers the event types, in name order.
pub fn add_all(schemas: &mut Schemas) -> Vec<String> {
    let envelope = schemas.add::<CloudEvent>();
    let mut event_types = Vec::with_capacity(schemas.payloads.len());
    for (event_type, payload) in &schemas.payloads {
        let schema = json!({
            "title": event_type,
            "description": format!("The CloudEvent of `{event_type}`: its `data` is the payload."),
            "allOf": [
                envelope,
                {
                    "type": "object",
                    "required": ["type", "data"],
                    "properties": {"type": {"const": event_type}, "data": payload},
                },
            ],
        });
        schemas.components.insert(event_type.clone(), schema);
        event_types.push(event_type.clone());
    }
    event_types
}
