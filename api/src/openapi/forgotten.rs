//! Forgotten texts in the document (TRUST.md "Forgetting a person"): every personal field
//! of the facts the answers show — `pm_domain::personal::PERSONAL` — may be `null`, and
//! the entities carry an optional `"forgotten": true`
//! (`pm_api_types::views::Forgettable`). Done on the facts' schemas before the views that
//! flatten them are merged ([`super::flatten`]), so conversations and tasks inherit it;
//! a command replayed by its `Idempotency-Key` answers the log's `null` texts too.

use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::message::MessageAdded;
use pm_domain::personal::personal_fields;
use pm_domain::task::TaskCreated;
use serde_json::{json, Value};

/// Schemas showing a fact's personal fields: (schema, fact, whether it carries the mark).
const SHOWN: &[(&str, &str, bool)] = &[
    ("ActorRegistered", ActorRegistered::NAME, true),
    ("ConversationStarted", ConversationStarted::NAME, true),
    (
        "ConversationCheckpointCreated",
        ConversationCheckpointCreated::NAME,
        true,
    ),
    ("TaskCreated", TaskCreated::NAME, true),
    ("MessageAdded", MessageAdded::NAME, true),
    // A conversation's latest checkpoint: its conversation carries the mark.
    (
        "LatestCheckpoint",
        ConversationCheckpointCreated::NAME,
        false,
    ),
];

/// `schema` that also admits `null` (as the document writes an `Option`).
fn nullable(schema: Value) -> Value {
    let admits_null = |s: &Value| {
        s["type"] == "null"
            || s["type"]
                .as_array()
                .is_some_and(|t| t.contains(&json!("null")))
    };
    if admits_null(&schema)
        || schema["oneOf"]
            .as_array()
            .is_some_and(|o| o.iter().any(admits_null))
    {
        return schema;
    }
    let mut inner = schema;
    let description = inner.as_object_mut().and_then(|o| o.remove("description"));
    let mut one_of = json!({"oneOf": [{"type": "null"}, inner]});
    if let Some(d) = description {
        one_of["description"] = d;
    }
    one_of
}

/// Makes the personal fields of `fact` in `schema` nullable, and adds `forgotten` when
/// `marked`.
fn describe_one(schema: Option<&mut Value>, fact: &str, marked: bool) {
    let Some(properties) = schema
        .and_then(|s| s.get_mut("properties"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for personal in personal_fields(fact) {
        if let Some(p) = properties.get_mut(personal.field) {
            *p = nullable(p.take());
        }
    }
    if marked {
        properties.insert(
            "forgotten".into(),
            json!({"type": "boolean", "const": true,
                "description": "Present when its party was forgotten: its personal texts read null."}),
        );
    }
}

/// Makes the personal fields of [`SHOWN`] schemas nullable and adds `forgotten` — in
/// their components and in the copies the pages of them hold (`Page_<name>`: a generic
/// page's items are written out, not referred to).
pub fn describe(schemas: &mut Value) {
    for (name, fact, marked) in SHOWN {
        describe_one(schemas.get_mut(*name), fact, *marked);
        let item = schemas
            .get_mut(format!("Page_{name}"))
            .and_then(|page| page.pointer_mut("/properties/items/items"));
        describe_one(item, fact, *marked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_the_document_then_personal_fields_are_nullable_and_entities_may_be_forgotten() {
        let doc = crate::openapi::document();
        let schemas = &doc["components"]["schemas"];
        for (name, field) in [
            ("ActorRegistered", "display_name"),
            ("MessageAdded", "content"),
            ("ConversationView", "title"),
            ("TaskView", "instructions"),
            ("TaskDetail", "instructions"),
            ("ConversationCheckpointCreated", "summary"),
            ("LatestCheckpoint", "summary"),
        ] {
            let p = &schemas[name]["properties"][field];
            assert_eq!(
                p["oneOf"][0],
                json!({"type": "null"}),
                "{name}.{field}: {p}"
            );
        }
        for name in [
            "ActorRegistered",
            "MessageAdded",
            "ConversationView",
            "TaskDetail",
        ] {
            assert_eq!(
                schemas[name]["properties"]["forgotten"]["type"], "boolean",
                "{name}"
            );
        }
        assert!(schemas["LatestCheckpoint"]["properties"]["forgotten"].is_null());
        for page in ["Page_MessageAdded", "Page_ConversationCheckpointCreated"] {
            let item = &schemas[page]["properties"]["items"]["items"]["properties"];
            assert_eq!(item["forgotten"]["type"], "boolean", "{page}");
        }
    }
}
