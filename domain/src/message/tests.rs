//! Given/when/then tests of the Message aggregate (transition `MessageAdded`).

use chrono::TimeZone;
use cqrs_es::test::TestFramework;

use super::*;
use crate::testing::{id, label, now, text, FakeLookup};
use crate::LookupError;

type Given = TestFramework<Message>;

const ACTOR: u128 = 1;
const CONVERSATION: u128 = 10;
const OTHER_CONVERSATION: u128 = 11;
const TASK: u128 = 30;
const OTHER_TASK: u128 = 31;
const MESSAGE: u128 = 50;

/// The conversation and the actor exist; `TASK` belongs to the conversation, `OTHER_TASK`
/// to another one.
fn lookup() -> FakeLookup {
    FakeLookup::default()
        .with_conversation(id(CONVERSATION))
        .with_conversation(id(OTHER_CONVERSATION))
        .with_actor(id(ACTOR))
        .with_task(id(TASK), id(CONVERSATION))
        .with_task(id(OTHER_TASK), id(OTHER_CONVERSATION))
}

/// A time the client gives, with microseconds, before the server time.
fn written_at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 8, 15, 0)
        .single()
        .expect("valid time")
        + chrono::TimeDelta::microseconds(123_456)
}

fn add(content: &str) -> AddMessage {
    AddMessage {
        id: id(MESSAGE),
        conversation_id: id(CONVERSATION),
        actor_id: id(ACTOR),
        content: text(content),
        task_id: None,
        external_identity: Some(label("slack:msg-1")),
        time: None,
        now: now(),
    }
}

fn added_fact(content: &str) -> MessageAdded {
    MessageAdded {
        id: id(MESSAGE),
        time: now(),
        actor_id: id(ACTOR),
        conversation_id: id(CONVERSATION),
        task_id: None,
        content: text(content),
        external_identity: Some(label("slack:msg-1")),
    }
}

fn added(content: &str) -> MessageEvent {
    MessageEvent::MessageAdded(added_fact(content))
}

/// A message with every optional field set.
fn added_full() -> MessageEvent {
    MessageEvent::MessageAdded(MessageAdded {
        time: written_at(),
        task_id: Some(id(TASK)),
        ..added_fact("Done with the login page")
    })
}

/// A message with no optional field set.
fn added_minimal() -> MessageEvent {
    MessageEvent::MessageAdded(MessageAdded {
        external_identity: None,
        ..added_fact("Hello")
    })
}

fn sorted_keys(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<_> = value.as_object().expect("object").keys().cloned().collect();
    keys.sort();
    keys
}

// --- Preconditions -------------------------------------------------------------------

#[tokio::test]
async fn given_conversation_and_actor_when_message_added_then_message_added_fact() {
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(add("Hello"))
        .await
        .then_expect_events(vec![added("Hello")]);
}

#[tokio::test]
async fn given_conversation_and_actor_when_message_added_without_optional_fields_then_fact_without_them(
) {
    let mut cmd = add("Hello");
    cmd.external_identity = None;
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(cmd)
        .await
        .then_expect_events(vec![added_minimal()]);
}

#[tokio::test]
async fn given_task_of_the_conversation_when_message_added_with_task_id_then_fact_carries_task_id()
{
    let mut cmd = add("Hello");
    cmd.task_id = Some(id(TASK));
    let expected = MessageEvent::MessageAdded(MessageAdded {
        task_id: Some(id(TASK)),
        ..added_fact("Hello")
    });
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(cmd)
        .await
        .then_expect_events(vec![expected]);
}

#[tokio::test]
async fn given_no_conversation_when_message_added_then_conversation_not_found() {
    Given::with(FakeLookup::default().with_actor(id(ACTOR)).services())
        .given_no_previous_events()
        .when_async(add("Hello"))
        .await
        .then_expect_error(DomainError::ConversationNotFound(id(CONVERSATION)));
}

#[tokio::test]
async fn given_no_conversation_and_no_actor_when_message_added_then_conversation_not_found_first() {
    Given::with(FakeLookup::default().services())
        .given_no_previous_events()
        .when_async(add("Hello"))
        .await
        .then_expect_error(DomainError::ConversationNotFound(id(CONVERSATION)));
}

#[tokio::test]
async fn given_unregistered_actor_when_message_added_then_actor_not_found() {
    let mut cmd = add("Hello");
    cmd.actor_id = id(7);
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(cmd)
        .await
        .then_expect_error(DomainError::ActorNotFound(id(7)));
}

#[tokio::test]
async fn given_no_such_task_when_message_added_with_task_id_then_message_task_not_found() {
    let mut cmd = add("Hello");
    cmd.task_id = Some(id(39));
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(cmd)
        .await
        .then_expect_error(DomainError::MessageTaskNotFound(id(39)));
}

#[tokio::test]
async fn given_task_of_another_conversation_when_message_added_with_its_id_then_message_task_not_found(
) {
    let mut cmd = add("Hello");
    cmd.task_id = Some(id(OTHER_TASK));
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(cmd)
        .await
        .then_expect_error(DomainError::MessageTaskNotFound(id(OTHER_TASK)));
}

#[tokio::test]
async fn given_unreachable_store_when_message_added_then_lookup_error_and_no_fact() {
    Given::with(FakeLookup::broken().services())
        .given_no_previous_events()
        .when_async(add("Hello"))
        .await
        .then_expect_error(DomainError::Lookup(LookupError("store unreachable".into())));
}

// --- Time -------------------------------------------------------------------------------

#[tokio::test]
async fn given_no_time_in_command_when_message_added_then_time_is_server_time() {
    let events = Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(add("Hello"))
        .await
        .inspect_result()
        .expect("accepted");
    let [MessageEvent::MessageAdded(fact)] = events.as_slice() else {
        panic!("expected exactly one MessageAdded, got {events:?}");
    };
    assert_eq!(fact.time, now());
}

#[tokio::test]
async fn given_time_in_command_when_message_added_then_given_time_is_kept() {
    let mut cmd = add("Hello");
    cmd.time = Some(written_at());
    let expected = MessageEvent::MessageAdded(MessageAdded {
        time: written_at(),
        ..added_fact("Hello")
    });
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(cmd)
        .await
        .then_expect_events(vec![expected]);
}

// --- Invariant: messages are immutable once created ------------------------------------

#[tokio::test]
async fn given_added_message_when_identical_message_added_then_no_new_fact() {
    Given::with(lookup().services())
        .given(vec![added("Hello")])
        .when_async(add("Hello"))
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_added_message_when_identical_message_added_later_without_time_then_no_new_fact() {
    let mut cmd = add("Hello");
    cmd.now = now() + chrono::TimeDelta::minutes(5);
    Given::with(lookup().services())
        .given(vec![added("Hello")])
        .when_async(cmd)
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_message_with_given_time_when_identical_message_added_with_same_time_then_no_new_fact(
) {
    let mut cmd = add("Done with the login page");
    cmd.task_id = Some(id(TASK));
    cmd.time = Some(written_at());
    Given::with(lookup().services())
        .given(vec![added_full()])
        .when_async(cmd)
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_added_message_when_added_with_other_content_then_already_exists() {
    let variants: Vec<(&str, AddMessage)> = vec![
        ("content", add("Goodbye")),
        ("actor_id", {
            let mut c = add("Hello");
            c.actor_id = id(2);
            c
        }),
        ("conversation_id", {
            let mut c = add("Hello");
            c.conversation_id = id(OTHER_CONVERSATION);
            c
        }),
        ("task_id", {
            let mut c = add("Hello");
            c.task_id = Some(id(TASK));
            c
        }),
        ("external_identity", {
            let mut c = add("Hello");
            c.external_identity = Some(label("slack:msg-2"));
            c
        }),
        ("time", {
            let mut c = add("Hello");
            c.time = Some(written_at());
            c
        }),
    ];
    for (field, cmd) in variants {
        let result = Given::with(lookup().with_actor(id(2)).services())
            .given(vec![added("Hello")])
            .when_async(cmd)
            .await
            .inspect_result();
        assert_eq!(
            result,
            Err(DomainError::AlreadyExists {
                entity: "message",
                id: id(MESSAGE),
            }),
            "a different {field} must be rejected"
        );
    }
}

// --- The fact ---------------------------------------------------------------------------

#[test]
fn given_all_fields_when_fact_serialized_then_payload_has_exactly_the_listed_fields() {
    let value = serde_json::to_value(added_full()).expect("serializes");
    assert_eq!(
        sorted_keys(&value),
        [
            "actor_id",
            "content",
            "conversation_id",
            "external_identity",
            "id",
            "task_id",
            "time"
        ]
    );
    assert_eq!(value["id"], id(MESSAGE).to_string());
    assert_eq!(value["actor_id"], id(ACTOR).to_string());
    assert_eq!(value["conversation_id"], id(CONVERSATION).to_string());
    assert_eq!(value["task_id"], id(TASK).to_string());
    assert_eq!(value["content"], "Done with the login page");
    assert_eq!(value["external_identity"], "slack:msg-1");
    assert_eq!(value["time"], "2026-11-21T08:15:00.123456Z");
}

#[test]
fn given_no_optional_fields_when_fact_serialized_then_optional_fields_are_omitted() {
    let value = serde_json::to_value(added_minimal()).expect("serializes");
    assert_eq!(
        sorted_keys(&value),
        ["actor_id", "content", "conversation_id", "id", "time"]
    );
    assert_eq!(value["time"], "2026-11-22T05:35:27.000000Z");
}

#[test]
fn given_fact_when_event_type_asked_then_project_manager_message_added_version_1_0() {
    let fact = added("Hello");
    assert_eq!(fact.event_type(), "project_manager.message.added");
    assert_eq!(fact.event_version(), "1.0");
}

#[test]
fn given_fact_payload_when_deserialized_then_same_message_added() {
    for fact in [added("Hello"), added_full(), added_minimal()] {
        let json = serde_json::to_string(&fact).expect("serializes");
        let back: MessageEvent = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, fact);
    }
}

#[test]
fn given_payload_with_unknown_field_when_deserialized_then_rejected() {
    let mut value = serde_json::to_value(added("Hello")).expect("serializes");
    value["surprise"] = serde_json::json!(true);
    assert!(serde_json::from_value::<MessageEvent>(value).is_err());
}
