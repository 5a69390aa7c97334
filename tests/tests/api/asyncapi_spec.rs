//! The served `/asyncapi.json` is a valid AsyncAPI 3.0.0 document — checked against the
//! official schema vendored in `tests/data/` (no network: it is self-contained, draft-07
//! being bundled with the validator) — that names every event type the service writes
//! (the domain's catalogue) on the relay, the webhooks and the SSE stream, whose every
//! `$ref` points inside it, and whose schemas accept the events a real run writes.

use std::collections::BTreeSet;

use jsonschema::{Draft, Validator};
use pm_tests::{all_tokens, on_both_backends, TestDb, TestService, ADMIN};
use serde_json::{json, Value};

use crate::offline_schema::{errors, validator};
use crate::support::{events, message, wait_events, world};

/// The official AsyncAPI 3.0.0 schema (see `tests/data/README.md`).
const ASYNCAPI_3_0_0: &str = include_str!("../../data/asyncapi-3.0.0-schema.json");

/// A draft-07 validator of the component schema `name`, its `$ref`s resolved in `doc`.
fn component_validator(doc: &Value, name: &str) -> Validator {
    let root = json!({
        "allOf": [{"$ref": format!("#/components/schemas/{name}")}],
        "components": doc["components"],
    });
    validator(&root, Draft::Draft7, &format!("schema {name}"))
}

/// The keys of the messages of channel `channel`.
fn messages_of(doc: &Value, channel: &str) -> BTreeSet<String> {
    doc["channels"][channel]["messages"]
        .as_object()
        .unwrap_or_else(|| panic!("channel {channel} has messages"))
        .keys()
        .cloned()
        .collect()
}

/// Every `$ref` anywhere in `node`.
fn refs(node: &Value, into: &mut Vec<String>) {
    match node {
        Value::Object(fields) => {
            if let Some(Value::String(target)) = fields.get("$ref") {
                into.push(target.clone());
            }
            fields.values().for_each(|v| refs(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, into)),
        _ => {}
    }
}

async fn served_document_is_valid_asyncapi_3_and_names_every_event_type(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let doc = svc.get(None, "/asyncapi.json").await.json;
    let schema: Value = serde_json::from_str(ASYNCAPI_3_0_0).expect("the vendored schema is JSON");
    let asyncapi = validator(&schema, Draft::Draft7, "the AsyncAPI 3.0.0 schema");
    assert!(
        !asyncapi.is_valid(&json!({"asyncapi": "3.0.0", "channels": {}})),
        "the schema requires an info object: it is enforced, not just compiled"
    );
    let errors = errors(&asyncapi, &doc);
    assert!(errors.is_empty(), "not AsyncAPI 3.0.0: {errors:#?}");
    assert_eq!(doc["asyncapi"], "3.0.0");

    let mut targets = Vec::new();
    refs(&doc, &mut targets);
    for target in &targets {
        let pointer = target.strip_prefix('#').unwrap_or("no pointer");
        assert!(doc.pointer(pointer).is_some(), "{target} points nowhere");
    }
    for name in doc["components"]["schemas"]
        .as_object()
        .expect("schemas")
        .keys()
    {
        component_validator(&doc, name);
    }

    let written: BTreeSet<String> = pm_domain::catalogue::event_types()
        .into_iter()
        .map(str::to_string)
        .collect();
    let relayed: BTreeSet<String> = doc["channels"]
        .as_object()
        .expect("channels")
        .keys()
        .filter_map(|k| k.strip_prefix("relay."))
        .map(str::to_string)
        .collect();
    assert_eq!(relayed, written, "a relay channel per event type");
    for event_type in &written {
        let channel = &doc["channels"][format!("relay.{event_type}")];
        assert_eq!(channel["address"], format!("{{prefix}}.{event_type}"));
        assert_eq!(channel["parameters"]["prefix"]["default"], "pm");
        let data = &doc["components"]["schemas"][event_type]["allOf"][1]["properties"]["data"];
        assert!(data["$ref"].is_string(), "{event_type}: no payload schema");
    }
    assert_eq!(messages_of(&doc, "webhooks"), written);
    let mut streamed = written.clone();
    streamed.insert("snapshot".to_string());
    assert_eq!(messages_of(&doc, "events"), streamed);
    assert_eq!(
        doc["channels"]["doorbell"]["address"],
        "cmd.agent.{agent_id}.wakeup"
    );
    let headers = &doc["channels"]["doorbell"]["messages"]["wakeup"]["headers"]["properties"];
    assert!(headers["PM-Turn-Id"].is_object() && headers["PM-Turn-Epoch"].is_object());
    let headers = &doc["channels"]["webhooks"]["messages"]["project_manager.task.created"]
        ["headers"]["properties"];
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        assert!(headers[name].is_object(), "{name}");
    }
    svc.stop().await;
}

/// Every event of a run — facts and the runes the sagas write for them — is valid against
/// its type's CloudEvent schema in the document: the schemas are the log's, not a copy.
async fn events_of_a_run_match_their_schemas(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let doc = svc.get(None, "/asyncapi.json").await.json;
    let w = world(&svc).await;
    message(&svc, &w.conversation, &w.actor, "hello").await;
    wait_events(&svc, "types=turn.*", 1).await;
    // Forgotten texts read `null` with `"forgotten": true`: the schemas say so too.
    for path in [
        format!("/v1/actors/{}/forget", w.actor),
        format!("/v1/conversations/{}/forget", w.conversation),
    ] {
        let r = svc.post(Some(ADMIN), &path, &json!({})).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
    }
    let logged = events(&svc, "").await;
    assert!(
        logged.iter().any(|e| e["data"]["forgotten"] == true),
        "a payload shows its forgotten texts"
    );
    let mut seen = BTreeSet::new();
    for event in &logged {
        let event_type = event["type"].as_str().expect("type");
        let errors = errors(&component_validator(&doc, event_type), event);
        assert!(errors.is_empty(), "{event_type}: {errors:#?}\n{event}");
        seen.insert(event_type.to_string());
    }
    assert!(
        seen.iter().any(|t| t.starts_with("project_manager."))
            && seen.iter().any(|t| t.starts_with("turn.")),
        "facts and runes: {seen:?}"
    );
    svc.stop().await;
}

on_both_backends!(
    served_document_is_valid_asyncapi_3_and_names_every_event_type,
    events_of_a_run_match_their_schemas
);
