use serde_json::{json, Value};

use super::*;

/// Every fact's name and a payload of it as the log stores it.
fn facts() -> Vec<(&'static str, Value)> {
    let id = "01a2105c-e5d8-777e-9cc1-f0db33b1e7d0";
    let at = "2026-11-28T10:00:00.000000Z";
    fn logged<T: serde::de::DeserializeOwned + serde::Serialize>(v: Value) -> Value {
        let fact: T = serde_json::from_value(v).expect("a payload of the fact");
        serde_json::to_value(fact).expect("serializes")
    }
    vec![
        (
            crate::actor::ActorRegistered::NAME,
            logged::<crate::actor::ActorRegistered>(json!({"id": id, "kind": "human",
                "display_name": "Alice", "external_identity": "github:alice", "created_at": at})),
        ),
        (
            crate::message::MessageAdded::NAME,
            logged::<crate::message::MessageAdded>(json!({"id": id, "time": at, "actor_id": id,
                "conversation_id": id, "task_id": id, "content": "hello",
                "external_identity": "github:comment/1"})),
        ),
        (
            crate::conversation::ConversationStarted::NAME,
            logged::<crate::conversation::ConversationStarted>(json!({"id": id, "actor_ids": [id],
                "title": "a bug", "external_id": "gh-1", "external_source": "github",
                "status": "open", "organization": "acme", "created_at": at, "updated_at": at})),
        ),
        (
            crate::checkpoint::ConversationCheckpointCreated::NAME,
            logged::<crate::checkpoint::ConversationCheckpointCreated>(json!({"id": id,
                "conversation_id": id, "checkpoint_type": "BEGIN_WORK", "summary": "fix it",
                "created_at": at})),
        ),
        (
            crate::task::TaskCreated::NAME,
            logged::<crate::task::TaskCreated>(json!({"id": id, "conversation_id": id,
                "checkpoint_id": id, "instructions": "do it", "assigned_to": id, "created_at": at})),
        ),
    ]
}

/// The fields of facts that are the history's shape, not anyone's words: ids, kinds, times,
/// and the labels an ingress sets to file a conversation (its source's id and status, its
/// organization).
const SHAPE: &[&str] = &[
    "id",
    "kind",
    "created_at",
    "updated_at",
    "time",
    "actor_id",
    "conversation_id",
    "task_id",
    "actor_ids",
    "checkpoint_id",
    "checkpoint_type",
    "assigned_to",
    "external_id",
    "external_source",
    "status",
    "organization",
];

#[test]
fn every_field_of_every_fact_is_personal_or_the_historys_shape() {
    for (name, payload) in facts() {
        let Value::Object(fields) = payload else {
            panic!("{name}: an object");
        };
        for field in fields.keys() {
            let personal = personal_fields(name).iter().any(|p| p.field == field);
            assert!(
                personal || SHAPE.contains(&field.as_str()),
                "{name}.{field} is neither personal nor listed as the history's shape"
            );
        }
        for p in personal_fields(name) {
            assert!(
                fields.contains_key(p.field),
                "{name} has no field {}",
                p.field
            );
        }
    }
}

#[test]
fn every_event_type_named_is_a_fact_or_a_rune_the_service_writes() {
    let written = crate::catalogue::event_types();
    for (name, fields) in PERSONAL {
        assert!(written.contains(name), "{name} is written by nobody");
        assert!(!fields.is_empty(), "{name} lists no field");
    }
}

#[test]
fn given_a_message_then_its_texts_need_its_authors_and_its_conversations_keys() {
    let fields = personal_fields(crate::message::MessageAdded::NAME);
    for f in fields {
        assert_eq!(
            f.keys,
            [KeyOf::ActorNamedBy("actor_id"), KeyOf::Conversation]
        );
    }
    let names: Vec<&str> = fields.iter().map(|f| f.field).collect();
    assert_eq!(names, ["content", "external_identity"]);
}

#[test]
fn given_an_actor_then_its_name_and_identity_need_its_own_key_alone() {
    let fields = personal_fields(crate::actor::ActorRegistered::NAME);
    assert!(fields.iter().all(|f| f.keys == [KeyOf::TheActor]));
    assert_eq!(fields.len(), 2);
}

#[test]
fn given_what_tools_were_given_and_gave_back_then_the_conversations_key_seals_it() {
    for (name, field) in [
        ("tool.call", "arguments"),
        ("tool.progress", "chunk"),
        ("tool.result", "output"),
        ("tool.result", "error"),
    ] {
        assert!(
            personal_fields(name)
                .iter()
                .any(|f| f.field == field && f.keys == [KeyOf::Conversation]),
            "{name}.{field}"
        );
    }
}

#[test]
fn given_an_event_type_without_texts_then_no_personal_field() {
    assert!(personal_fields("turn.claimed").is_empty());
    assert!(personal_fields(crate::task::TaskCheckpointCreated::NAME).is_empty());
    assert!(personal_fields("no.such.event").is_empty());
}
