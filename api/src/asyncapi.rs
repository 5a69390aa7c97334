//! The AsyncAPI 3.0 document of what the service sends outside HTTP request and response
//! (DELIVERY.md): the JetStream relay, the wakeup doorbells, the webhook deliveries and
//! the SSE stream. Served at `/asyncapi.json` for code generators and catalogues, as
//! `/openapi.json` is for the HTTP API — and built from the same types (the CloudEvent
//! envelope, every fact's and rune's payload), so the two cannot drift apart.

mod channels;
mod envelopes;
mod forgettable;
mod headers;
mod payloads;

use serde_json::{json, Map, Value};

/// The document as JSON.
pub fn document() -> Value {
    let mut schemas = payloads::Schemas::of_the_log();
    let event_types = envelopes::add_all(&mut schemas);
    let mut channels = Map::new();
    let mut operations = Map::new();
    for channel in channels::all(&event_types, &mut schemas) {
        channels.insert(channel.key.clone(), channel.channel);
        operations.insert(channel.key, channel.operation);
    }
    json!({
        "asyncapi": "3.0.0",
        "info": {
            "title": "project-manager",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "What the service sends besides HTTP answers: every fact and rune of its log as a CloudEvent on JetStream, to webhook subscribers and on the SSE stream, and a doorbell on core NATS when a turn becomes claimable. The HTTP API is /openapi.json; the settings and guarantees are in docs/DELIVERY.md.",
        },
        "defaultContentType": "application/json",
        "servers": servers(),
        "channels": channels,
        "operations": operations,
        "components": {
            "schemas": schemas.components,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A role token or a JWT, as for the HTTP API.",
                },
            },
        },
    })
}

/// Where the channels are: NATS (`PM_NATS_URL`), the service itself (its SSE stream) and
/// each webhook subscriber's receiver.
fn servers() -> Value {
    let host = |default: &str, description: &str| json!({"host": {"default": default, "description": description}});
    json!({
        "nats": {
            "host": "{host}",
            "protocol": "nats",
            "description": "The NATS of `PM_NATS_URL` (unset: no relay, no doorbells). The relay's stream is JetStream's `PM_NATS_STREAM`; doorbells are core NATS.",
            "variables": host("127.0.0.1:4222", "`PM_NATS_URL`'s host and port."),
        },
        "service": {
            "host": "{host}",
            "protocol": "http",
            "description": "The service itself (`PM_BIND`).",
            "variables": host("127.0.0.1:8080", "Where the service listens."),
            "security": [{"$ref": "#/components/securitySchemes/bearer"}],
        },
        "receiver": {
            "host": "{host}",
            "protocol": "https",
            "description": "A webhook subscriber's receiver: the URL given to `POST /v1/webhooks` (http or https, allowed by `PM_WEBHOOK_ALLOWED_HOSTS`).",
            "variables": host("hooks.example.com", "The subscription URL's host."),
        },
    })
}
