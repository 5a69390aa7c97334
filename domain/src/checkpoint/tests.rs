//! Given/when/then tests of the ConversationCheckpoint aggregate (transition
//! `ConversationCheckpointCreated`).

use cqrs_es::test::TestFramework;

use super::*;
use crate::testing::{id, now, text, FakeLookup};
use crate::LookupError;

type Given = TestFramework<ConversationCheckpoint>;

const CONVERSATION: u128 = 10;
const OTHER_CONVERSATION: u128 = 11;
const CHECKPOINT: u128 = 20;

/// The conversation exists.
fn lookup() -> FakeLookup {
    FakeLookup::default().with_conversation(id(CONVERSATION))
}

fn create(t: CheckpointType, summary: &str) -> CreateConversationCheckpoint {
    CreateConversationCheckpoint {
        id: id(CHECKPOINT),
        conversation_id: id(CONVERSATION),
        checkpoint_type: t,
        summary: text(summary),
        now: now(),
    }
}

fn created(t: CheckpointType, summary: &str) -> CheckpointEvent {
    CheckpointEvent::ConversationCheckpointCreated(ConversationCheckpointCreated {
        id: id(CHECKPOINT),
        conversation_id: id(CONVERSATION),
        checkpoint_type: t,
        summary: text(summary),
        created_at: now(),
    })
}

fn sorted_keys(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<_> = value.as_object().expect("object").keys().cloned().collect();
    keys.sort();
    keys
}

// --- Preconditions -------------------------------------------------------------------

#[tokio::test]
async fn given_existing_conversation_when_checkpoint_created_then_checkpoint_created_fact() {
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(create(CheckpointType::BeginWork, "Goal: fix login"))
        .await
        .then_expect_events(vec![created(CheckpointType::BeginWork, "Goal: fix login")]);
}

#[tokio::test]
async fn given_existing_conversation_when_checkpoint_of_each_type_created_then_fact_of_that_type() {
    assert_eq!(CheckpointType::ALL.len(), 5);
    for &t in CheckpointType::ALL {
        let result = Given::with(lookup().services())
            .given_no_previous_events()
            .when_async(create(t, "Summary"))
            .await
            .inspect_result();
        assert_eq!(result, Ok(vec![created(t, "Summary")]), "type {t}");
    }
}

#[tokio::test]
async fn given_no_conversation_when_checkpoint_created_then_conversation_not_found() {
    Given::with(FakeLookup::default().services())
        .given_no_previous_events()
        .when_async(create(CheckpointType::BeginWork, "Goal: fix login"))
        .await
        .then_expect_error(DomainError::ConversationNotFound(id(CONVERSATION)));
}

#[tokio::test]
async fn given_only_another_conversation_when_checkpoint_created_then_conversation_not_found() {
    Given::with(
        FakeLookup::default()
            .with_conversation(id(OTHER_CONVERSATION))
            .services(),
    )
    .given_no_previous_events()
    .when_async(create(CheckpointType::NeedInformation, "Which browser?"))
    .await
    .then_expect_error(DomainError::ConversationNotFound(id(CONVERSATION)));
}

#[tokio::test]
async fn given_unreachable_store_when_checkpoint_created_then_lookup_error_and_no_fact() {
    Given::with(FakeLookup::broken().services())
        .given_no_previous_events()
        .when_async(create(CheckpointType::BeginWork, "Goal: fix login"))
        .await
        .then_expect_error(DomainError::Lookup(LookupError("store unreachable".into())));
}

// --- Invariant: checkpoints are immutable once created ---------------------------------

#[tokio::test]
async fn given_created_checkpoint_when_identical_creation_then_no_new_fact() {
    Given::with(lookup().services())
        .given(vec![created(CheckpointType::BeginWork, "Goal: fix login")])
        .when_async(create(CheckpointType::BeginWork, "Goal: fix login"))
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_created_checkpoint_when_identical_creation_later_then_no_new_fact() {
    let mut cmd = create(CheckpointType::BeginWork, "Goal: fix login");
    cmd.now = now() + chrono::TimeDelta::minutes(5);
    Given::with(lookup().services())
        .given(vec![created(CheckpointType::BeginWork, "Goal: fix login")])
        .when_async(cmd)
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_created_checkpoint_when_created_with_other_content_then_already_exists() {
    let variants = [
        (
            "summary",
            create(CheckpointType::BeginWork, "Another summary"),
        ),
        (
            "checkpoint_type",
            create(CheckpointType::CloseConversation, "Goal: fix login"),
        ),
        ("conversation_id", {
            let mut c = create(CheckpointType::BeginWork, "Goal: fix login");
            c.conversation_id = id(OTHER_CONVERSATION);
            c
        }),
    ];
    for (field, cmd) in variants {
        let result = Given::with(
            lookup()
                .with_conversation(id(OTHER_CONVERSATION))
                .services(),
        )
        .given(vec![created(CheckpointType::BeginWork, "Goal: fix login")])
        .when_async(cmd)
        .await
        .inspect_result();
        assert_eq!(
            result,
            Err(DomainError::AlreadyExists {
                entity: "checkpoint",
                id: id(CHECKPOINT),
            }),
            "a different {field} must be rejected"
        );
    }
}

// --- The fact ---------------------------------------------------------------------------

#[test]
fn given_fact_when_serialized_then_payload_has_exactly_the_listed_fields() {
    let value = serde_json::to_value(created(CheckpointType::BeginWork, "Goal: fix login"))
        .expect("serializes");
    assert_eq!(
        sorted_keys(&value),
        [
            "checkpoint_type",
            "conversation_id",
            "created_at",
            "id",
            "summary"
        ]
    );
    assert_eq!(value["id"], id(CHECKPOINT).to_string());
    assert_eq!(value["conversation_id"], id(CONVERSATION).to_string());
    assert_eq!(value["checkpoint_type"], "BEGIN_WORK");
    assert_eq!(value["summary"], "Goal: fix login");
    assert_eq!(value["created_at"], "2026-11-22T05:35:27.000000Z");
}

#[test]
fn given_each_checkpoint_type_when_serialized_then_wire_name_of_transitions_md() {
    let expected = [
        (CheckpointType::ConversationStarted, "CONVERSATION_STARTED"),
        (CheckpointType::BeginWork, "BEGIN_WORK"),
        (CheckpointType::NeedInformation, "NEED_INFORMATION"),
        (CheckpointType::CloseConversation, "CLOSE_CONVERSATION"),
        (CheckpointType::WorkCompleted, "WORK_COMPLETED"),
    ];
    for (t, wire) in expected {
        let value = serde_json::to_value(created(t, "Summary")).expect("serializes");
        assert_eq!(value["checkpoint_type"], wire);
    }
}

#[test]
fn given_fact_when_event_type_asked_then_conversation_checkpoint_created_version_1_0() {
    let fact = created(CheckpointType::BeginWork, "Goal: fix login");
    assert_eq!(
        fact.event_type(),
        "project_manager.conversation.checkpoint.created"
    );
    assert_eq!(fact.event_version(), "1.0");
}

#[test]
fn given_fact_payload_when_deserialized_then_same_checkpoint_created() {
    for &t in CheckpointType::ALL {
        let fact = created(t, "Goal: fix login");
        let json = serde_json::to_string(&fact).expect("serializes");
        let back: CheckpointEvent = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, fact);
    }
}

#[test]
fn given_payload_with_unknown_field_when_deserialized_then_rejected() {
    let mut value = serde_json::to_value(created(CheckpointType::BeginWork, "Goal: fix login"))
        .expect("serializes");
    value["surprise"] = serde_json::json!(true);
    assert!(serde_json::from_value::<CheckpointEvent>(value).is_err());
}
