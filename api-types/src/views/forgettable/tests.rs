//! Given/when/then tests of the one rule forgotten entities are shown by.

use serde_json::json;

use super::*;

fn message() -> MessageAdded {
    serde_json::from_value(json!({
        "id": "00000000-0000-0000-0000-000000000001",
        "time": "2026-11-22T00:00:00.000000Z",
        "actor_id": "00000000-0000-0000-0000-000000000002",
        "conversation_id": "00000000-0000-0000-0000-000000000003",
        "content": "hello",
        "external_identity": "m-1"
    }))
    .expect("a message")
}

fn conversation(latest: Value) -> ConversationView {
    serde_json::from_value(json!({
        "id": "00000000-0000-0000-0000-000000000003",
        "actor_ids": ["00000000-0000-0000-0000-000000000002"],
        "title": "Fix it",
        "created_at": "2026-11-22T00:00:00.000000Z",
        "updated_at": "2026-11-22T00:00:00.000000Z",
        "latest_checkpoint": latest,
        "checkpoint_count": 1, "message_count": 0, "task_count": 0,
        "task_counts": {}
    }))
    .expect("a conversation")
}

#[test]
fn given_an_entity_not_forgotten_when_serialized_then_exactly_the_entity() {
    let shown = serde_json::to_value(Forgettable::new(message(), false)).expect("serializes");
    assert_eq!(shown, serde_json::to_value(message()).expect("serializes"));
    assert!(shown.get(FORGOTTEN).is_none());
}

#[test]
fn given_a_forgotten_message_when_serialized_then_its_texts_are_null_and_it_is_marked() {
    let shown = serde_json::to_value(Forgettable::new(message(), true)).expect("serializes");
    assert_eq!(shown["content"], Value::Null);
    assert_eq!(shown["external_identity"], Value::Null);
    assert_eq!(shown[FORGOTTEN], json!(true));
    assert_eq!(
        shown["actor_id"],
        json!("00000000-0000-0000-0000-000000000002")
    );
}

#[test]
fn given_a_forgotten_conversation_when_serialized_then_title_and_latest_summary_are_null() {
    let latest = json!({"id": "00000000-0000-0000-0000-000000000004",
        "checkpoint_type": "BEGIN_WORK", "summary": "go",
        "created_at": "2026-11-22T00:00:00.000000Z"});
    let shown =
        serde_json::to_value(Forgettable::new(conversation(latest), true)).expect("serializes");
    assert_eq!(shown["title"], Value::Null);
    assert_eq!(shown["latest_checkpoint"]["summary"], Value::Null);
    assert_eq!(
        shown["latest_checkpoint"]["checkpoint_type"],
        json!("BEGIN_WORK")
    );
    assert_eq!(shown[FORGOTTEN], json!(true));
    let without = serde_json::to_value(Forgettable::new(conversation(Value::Null), true))
        .expect("serializes");
    assert_eq!(without["latest_checkpoint"], Value::Null);
}

#[test]
fn given_a_forgotten_answer_when_read_back_then_stand_ins_and_the_mark() {
    let shown = serde_json::to_value(Forgettable::new(message(), true)).expect("serializes");
    let read: Forgettable<MessageAdded> = serde_json::from_value(shown).expect("reads");
    assert!(read.forgotten);
    assert_eq!(read.entity.content.as_str(), STAND_IN);
    let plain: Forgettable<MessageAdded> =
        serde_json::from_value(serde_json::to_value(message()).expect("serializes"))
            .expect("reads");
    assert_eq!(plain, Forgettable::new(message(), false));
}
