use std::collections::HashMap;

use serde_json::{json, Value};

use super::*;

/// [`seal_fields`] on a parsed payload: the tests write and compare `Value`s.
fn seal<E: std::fmt::Display>(
    place: &Place<'_>,
    payload: &mut Value,
    key: impl FnMut(Scope, Uuid) -> Result<Option<Key>, E>,
) -> Result<(), SealError> {
    let text = payload.to_string();
    let Some(mut fields) = Fields::parse(&text).expect("JSON") else {
        return Ok(());
    };
    if seal_fields(place, &mut fields, key)? {
        *payload = serde_json::from_str(&fields.text()).expect("sealed JSON");
    }
    Ok(())
}

/// [`open_fields`] on a parsed payload.
fn open(
    place: &Place<'_>,
    payload: &mut Value,
    key: impl FnMut(Scope, Uuid) -> Option<Key>,
    unreadable: Unreadable,
) -> Opened {
    let text = payload.to_string();
    let Some(mut fields) = Fields::parse(&text).expect("JSON") else {
        return Opened::default();
    };
    let (opened, changed) = open_fields(place, &mut fields, key, unreadable);
    if changed {
        *payload = serde_json::from_str(&fields.text()).expect("opened JSON");
    }
    opened
}

const ALICE: Uuid = Uuid::from_u128(0xA1);
const CONVERSATION: Uuid = Uuid::from_u128(0xC1);

/// Keys by owner; a removed one is destroyed.
struct Keys(HashMap<(Scope, Uuid), Key>);

impl Keys {
    fn new() -> Self {
        Self(HashMap::new())
    }

    fn made(&mut self, scope: Scope, id: Uuid) -> Result<Option<Key>, String> {
        Ok(Some(
            self.0
                .entry((scope, id))
                .or_insert_with(|| Key::generate().expect("random"))
                .clone(),
        ))
    }

    fn get(&self, scope: Scope, id: Uuid) -> Option<Key> {
        self.0.get(&(scope, id)).cloned()
    }

    /// Opens `payload` as the message at `sequence`, with the keys left.
    fn open_message(&self, payload: &mut Value, sequence: i64) -> Opened {
        open(
            &message_place(sequence),
            payload,
            |s, id| self.get(s, id),
            Unreadable::Null,
        )
    }
}

fn message_place(sequence: i64) -> Place<'static> {
    Place {
        event_type: "project_manager.message.added",
        aggregate_type: "message",
        aggregate_id: "01a2105c-e5d8-777e-9cc1-f0db33b1e7d0",
        sequence,
        conversation_id: Some(CONVERSATION),
    }
}

fn message() -> Value {
    json!({"id": "01a2105c-e5d8-777e-9cc1-f0db33b1e7d0", "actor_id": ALICE,
           "conversation_id": CONVERSATION, "content": "Alice's secret plan",
           "external_identity": null, "time": "2026-11-28T10:00:00.000000Z"})
}

fn sealed_message(keys: &mut Keys) -> Value {
    let mut payload = message();
    seal(&message_place(1), &mut payload, |s, id| keys.made(s, id)).expect("sealed");
    payload
}

#[test]
fn given_a_message_when_sealed_then_its_text_is_not_in_the_payload_and_the_rest_is() {
    let mut keys = Keys::new();
    let payload = sealed_message(&mut keys);
    let text = payload.to_string();
    assert!(!text.contains("secret"), "{text}");
    assert_eq!(payload["actor_id"], json!(ALICE));
    assert_eq!(payload["external_identity"], Value::Null, "null stays null");
    assert_eq!(
        payload["content"]["keys"],
        json!([
            format!("actor:{ALICE}"),
            format!("conversation:{CONVERSATION}")
        ])
    );
}

#[test]
fn given_a_sealed_message_when_opened_with_its_keys_then_it_reads_as_written() {
    let mut keys = Keys::new();
    let mut payload = sealed_message(&mut keys);
    let opened = keys.open_message(&mut payload, 1);
    assert_eq!(opened, Opened::default());
    assert_eq!(payload, message());
}

#[test]
fn given_its_authors_or_its_conversations_key_destroyed_when_opened_then_null_and_forgotten() {
    for destroyed in [(Scope::Actor, ALICE), (Scope::Conversation, CONVERSATION)] {
        let mut keys = Keys::new();
        let mut payload = sealed_message(&mut keys);
        keys.0.remove(&destroyed);
        let opened = keys.open_message(&mut payload, 1);
        assert_eq!(opened.forgotten, 1, "{destroyed:?}");
        assert_eq!(payload["content"], Value::Null);
        assert_eq!(payload[FORGOTTEN], json!(true));
        assert_eq!(
            payload["actor_id"],
            json!(ALICE),
            "the history's shape stays"
        );
    }
}

#[test]
fn given_a_sealed_text_copied_onto_another_event_when_opened_then_null_and_refused() {
    let mut keys = Keys::new();
    let sealed = sealed_message(&mut keys);
    let mut other = message();
    other["content"] = sealed["content"].clone();
    let opened = keys.open_message(&mut other, 2);
    assert_eq!(
        opened,
        Opened {
            forgotten: 0,
            refused: 1
        }
    );
    assert_eq!(other["content"], Value::Null);
    assert!(other.get(FORGOTTEN).is_none(), "refused, not forgotten");
}

#[test]
fn given_a_sealed_text_altered_when_opened_then_null_and_refused() {
    let mut keys = Keys::new();
    let mut payload = sealed_message(&mut keys);
    payload["content"]["sealed"] = json!("AAAA");
    let opened = keys.open_message(&mut payload, 1);
    assert_eq!(opened.refused, 1);
    assert_eq!(payload["content"], Value::Null);
}

#[test]
fn given_an_actors_registration_then_its_name_is_sealed_under_its_own_key() {
    let mut keys = Keys::new();
    let place = Place {
        event_type: "project_manager.actor.registered",
        aggregate_type: "actor",
        aggregate_id: "00000000-0000-0000-0000-0000000000a1",
        sequence: 1,
        conversation_id: None,
    };
    let mut payload = json!({"id": ALICE, "kind": "human", "display_name": "Alice",
                             "external_identity": "github:alice"});
    seal(&place, &mut payload, |s, id| keys.made(s, id)).expect("sealed");
    assert!(!payload.to_string().contains("alice") && !payload.to_string().contains("Alice"));
    assert_eq!(
        payload["display_name"]["keys"],
        json!([format!("actor:{ALICE}")])
    );
    let mut read = payload.clone();
    open(&place, &mut read, |s, id| keys.get(s, id), Unreadable::Null);
    assert_eq!(read["display_name"], json!("Alice"));
}

#[test]
fn given_any_json_in_a_tools_arguments_then_it_is_sealed_whole_and_read_back() {
    let mut keys = Keys::new();
    let place = Place {
        event_type: "tool.call",
        aggregate_type: "tool_call",
        aggregate_id: "00000000-0000-0000-0000-0000000000b1",
        sequence: 1,
        conversation_id: Some(CONVERSATION),
    };
    let arguments = json!({"path": "/home/alice", "lines": [1, 2]});
    let mut payload = json!({"call_id": "c1", "tool_name": "read", "arguments": arguments});
    seal(&place, &mut payload, |s, id| keys.made(s, id)).expect("sealed");
    assert!(!payload.to_string().contains("alice"));
    assert_eq!(payload["tool_name"], json!("read"));
    open(
        &place,
        &mut payload,
        |s, id| keys.get(s, id),
        Unreadable::Null,
    );
    assert_eq!(payload["arguments"], arguments);
}

#[test]
fn given_a_conversation_text_without_a_conversation_then_it_is_not_stored() {
    let place = Place {
        conversation_id: None,
        ..message_place(1)
    };
    let mut payload = message();
    let refused = seal(&place, &mut payload, |s, id| Keys::new().made(s, id));
    assert!(matches!(
        refused,
        Err(SealError::NoOwner {
            what: "conversation",
            ..
        })
    ));
}

#[test]
fn given_an_event_without_personal_fields_then_sealing_and_opening_change_nothing() {
    let place = Place {
        event_type: "turn.claimed",
        ..message_place(1)
    };
    let original = json!({"turn_id": ALICE, "worker": "w1"});
    let mut payload = original.clone();
    seal(&place, &mut payload, |s, id| Keys::new().made(s, id)).expect("nothing to seal");
    assert_eq!(payload, original);
    assert_eq!(
        open(&place, &mut payload, |_, _| None, Unreadable::Null),
        Opened::default()
    );
    assert_eq!(payload, original);
}

#[test]
fn given_a_payload_written_in_the_clear_when_opened_then_it_reads_as_it_is() {
    let mut payload = message();
    let opened = open(
        &message_place(1),
        &mut payload,
        |_, _| None,
        Unreadable::Null,
    );
    assert_eq!(opened, Opened::default());
    assert_eq!(payload, message());
}

#[test]
fn given_a_message_then_sealing_takes_its_authors_and_its_conversations_keys_and_opening_the_same()
{
    let mut keys = Keys::new();
    let wanted = vec![(Scope::Actor, ALICE), (Scope::Conversation, CONVERSATION)];
    let clear = message().to_string();
    let clear = Fields::parse(&clear).expect("JSON").expect("an object");
    assert_eq!(
        keys_to_seal(&message_place(1), &clear).expect("owners"),
        wanted
    );
    let sealed = sealed_message(&mut keys).to_string();
    let sealed = Fields::parse(&sealed).expect("JSON").expect("an object");
    assert_eq!(
        keys_to_open("project_manager.message.added", &sealed),
        wanted
    );
    assert!(
        keys_to_open("project_manager.message.added", &clear).is_empty(),
        "nothing sealed, nothing to fetch"
    );
}

#[test]
fn given_a_sealed_payload_then_may_be_sealed_says_so_and_not_for_other_types_or_clear_text() {
    let mut keys = Keys::new();
    let text = sealed_message(&mut keys).to_string();
    assert!(may_be_sealed("project_manager.message.added", &text));
    assert!(!may_be_sealed(
        "project_manager.message.added",
        &message().to_string()
    ));
    assert!(!may_be_sealed("project_manager.task.completed", &text));
}

#[test]
fn given_a_destroyed_key_when_sealing_then_the_text_is_stored_as_null_and_marked_forgotten() {
    let mut payload = message();
    seal(&message_place(1), &mut payload, |scope, _| {
        Ok::<_, String>(match scope {
            Scope::Actor => None,
            Scope::Conversation => Some(Key::generate().expect("random")),
        })
    })
    .expect("sealed");
    assert_eq!(payload["content"], Value::Null);
    assert_eq!(payload[FORGOTTEN], json!(true));
    assert!(!payload.to_string().contains("secret"));
}

#[test]
fn given_an_unreadable_text_when_opened_for_a_state_then_it_holds_the_stand_in_and_no_mark() {
    let mut keys = Keys::new();
    let mut payload = sealed_message(&mut keys);
    keys.0.remove(&(Scope::Actor, ALICE));
    let opened = open(
        &message_place(1),
        &mut payload,
        |s, id| keys.get(s, id),
        Unreadable::StandIn,
    );
    assert_eq!(opened.forgotten, 1);
    assert_eq!(payload["content"], json!(STAND_IN));
    assert!(payload.get(FORGOTTEN).is_none(), "{payload}");
}

#[test]
fn given_a_payload_written_after_forgetting_when_opened_for_a_state_then_its_nulls_are_stand_ins() {
    let mut payload = message();
    payload["content"] = Value::Null;
    payload[FORGOTTEN] = json!(true);
    let mut read = payload.clone();
    open(&message_place(1), &mut read, |_, _| None, Unreadable::Null);
    assert_eq!(read, payload, "a reader of the log sees it as stored");
    open(
        &message_place(1),
        &mut payload,
        |_, _| None,
        Unreadable::StandIn,
    );
    assert_eq!(payload["content"], json!(STAND_IN));
    assert!(payload.get(FORGOTTEN).is_none());
}

#[test]
fn given_a_sealed_payload_when_reduced_to_its_shape_then_texts_are_stand_ins_and_ids_stay() {
    let mut keys = Keys::new();
    let text = sealed_message(&mut keys).to_string();
    let shape = shape_only("project_manager.message.added", &text).expect("JSON");
    let payload: Value = serde_json::from_str(&shape).expect("JSON");
    assert_eq!(payload["content"], json!(STAND_IN));
    assert_eq!(payload["actor_id"], json!(ALICE));
}

mod any_payload {
    use proptest::collection::{btree_map, vec};
    use proptest::prelude::*;

    use super::*;

    /// Texts with what JSON escapes: quotes, backslashes, control and non-ASCII characters.
    fn text() -> impl Strategy<Value = String> {
        "[a-z\"\\\\\n\u{1}é]{0,6}"
    }

    /// A JSON document (integers only: a float's text need not read back to the same bits).
    fn document() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            text().prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Value::Array),
                btree_map(text(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn call_place() -> Place<'static> {
        Place {
            event_type: "tool.call",
            aggregate_type: "tool_call",
            aggregate_id: "00000000-0000-0000-0000-0000000000b1",
            sequence: 3,
            conversation_id: Some(CONVERSATION),
        }
    }

    proptest! {
        #[test]
        fn given_any_arguments_and_other_fields_when_sealed_and_opened_then_the_payload_reads_as_written(
            arguments in document(),
            others in btree_map(text(), document(), 0..4),
        ) {
            let mut payload: serde_json::Map<String, Value> = others.into_iter().collect();
            payload.insert("arguments".into(), arguments.clone());
            payload.remove(FORGOTTEN);
            let written = Value::Object(payload);
            let mut keys = Keys::new();
            let mut stored = written.clone();
            seal(&call_place(), &mut stored, |s, id| keys.made(s, id)).expect("sealed");
            if !arguments.is_null() {
                prop_assert_eq!(&stored["arguments"]["keys"], &json!([format!("conversation:{CONVERSATION}")]));
            }
            for (name, value) in written.as_object().into_iter().flatten() {
                if name != "arguments" {
                    prop_assert_eq!(&stored[name], value, "only the personal field is sealed");
                }
            }
            let opened = open(&call_place(), &mut stored, |s, id| keys.get(s, id), Unreadable::Null);
            prop_assert_eq!(opened, Opened::default());
            prop_assert_eq!(stored, written);
        }
    }
}
