//! The headers each channel's messages carry (for the SSE stream, the fields of its
//! frames), as schemas: what a consumer reads besides the body.

use serde_json::{json, Value};

use crate::doorbells::{TURN_EPOCH_HEADER, TURN_ID_HEADER};

/// The relay's: JetStream's deduplication id.
pub fn relay() -> Value {
    json!({
        "type": "object",
        "required": ["Nats-Msg-Id"],
        "properties": {
            "Nats-Msg-Id": {
                "type": "string",
                "description": "The CloudEvent `id` (`<aggregate_type>:<aggregate_id>:<sequence>`): JetStream drops a message it stored within the hour, consumers deduplicate by it.",
            },
            "traceparent": traceparent(),
            "tracestate": tracestate(),
        },
    })
}

/// The W3C `traceparent` of what caused an event (its CloudEvent extension of the same
/// name), as a relayed message or a webhook delivery carries it.
fn traceparent() -> Value {
    json!({
        "type": "string",
        "pattern": "^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$",
        "description": "The W3C trace context of what caused the event (the CloudEvent's `traceparent` extension): continue it, and what the consumer does joins that trace. Absent on events written before events recorded one.",
    })
}

/// The W3C `tracestate` that came with it.
fn tracestate() -> Value {
    json!({
        "type": "string",
        "description": "The W3C `tracestate` the trace's caller sent, when it sent one.",
    })
}

/// A doorbell's: the turn that became claimable, and its epoch when known.
pub fn doorbell() -> Value {
    json!({
        "type": "object",
        "required": [TURN_ID_HEADER],
        "properties": {
            TURN_ID_HEADER: {"type": "string", "format": "uuid", "description": "The turn that became claimable."},
            TURN_EPOCH_HEADER: {
                "type": "string",
                "pattern": "^[0-9]+$",
                "description": "Its epoch then: a hint, the next claim gets a higher one.",
            },
        },
    })
}

/// A webhook delivery's: the Standard Webhooks headers.
pub fn webhook() -> Value {
    json!({
        "type": "object",
        "required": ["content-type", "webhook-id", "webhook-timestamp", "webhook-signature"],
        "properties": {
            "content-type": {"const": "application/json"},
            "webhook-id": {
                "type": "string",
                "description": "The CloudEvent `id`, the same on every retry: deduplicate by it.",
            },
            "webhook-timestamp": {
                "type": "string",
                "pattern": "^[0-9]+$",
                "description": "Unix seconds of this attempt.",
            },
            "webhook-signature": {
                "type": "string",
                "pattern": "^v1,[A-Za-z0-9+/]+={0,2}$",
                "description": "`v1,<base64 HMAC-SHA256 of \"<webhook-id>.<webhook-timestamp>.<body>\">`, keyed with the base64-decoded part of the subscription's secret after `whsec_`.",
            },
            "traceparent": traceparent(),
            "tracestate": tracestate(),
        },
    })
}

/// An SSE frame's fields (not HTTP headers): `id` and `event`; the message's payload is
/// the frame's `data`.
pub fn sse() -> Value {
    json!({
        "type": "object",
        "description": "The fields of a Server-Sent Events frame (not HTTP headers); its `data` is the payload.",
        "required": ["event"],
        "properties": {
            "id": {
                "type": "string",
                "pattern": "^[0-9]+([.][0-9]+)?$",
                "description": "The event's log position: send it back as `Last-Event-ID` (or `cursor`) to resume. Absent on the snapshot.",
            },
            "event": {"type": "string", "description": "The event's type, or `snapshot`."},
        },
    })
}
