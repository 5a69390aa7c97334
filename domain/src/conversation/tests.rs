//! Given/when/then tests of the Conversation aggregate (transition `ConversationStarted`).

use cqrs_es::test::TestFramework;

use super::*;
use crate::forgetting::Forgotten;
use crate::testing::{id, label, now, text, FakeLookup};
use crate::LookupError;

type Given = TestFramework<Conversation>;

const CONVERSATION: u128 = 10;
const ALICE: u128 = 1;
const BOT: u128 = 2;

/// Alice and the bot are registered.
fn lookup() -> FakeLookup {
    FakeLookup::default()
        .with_actor(id(ALICE))
        .with_actor(id(BOT))
}

fn start(title: &str) -> StartConversation {
    StartConversation {
        id: id(CONVERSATION),
        actor_ids: vec![id(ALICE), id(BOT)],
        title: text(title),
        external_id: Some(label("issue/1")),
        external_source: Some(label("github")),
        status: Some(label("Todo")),
        organization: Some(label("acme")),
        now: now(),
    }
}

fn started(title: &str) -> ConversationEvent {
    ConversationEvent::ConversationStarted(ConversationStarted {
        id: id(CONVERSATION),
        actor_ids: vec![id(ALICE), id(BOT)],
        title: text(title),
        external_id: Some(label("issue/1")),
        external_source: Some(label("github")),
        status: Some(label("Todo")),
        organization: Some(label("acme")),
        created_at: now(),
        updated_at: now(),
    })
}

fn start_minimal() -> StartConversation {
    StartConversation {
        id: id(CONVERSATION),
        actor_ids: vec![id(ALICE)],
        title: text("Minimal"),
        external_id: None,
        external_source: None,
        status: None,
        organization: None,
        now: now(),
    }
}

fn started_minimal() -> ConversationEvent {
    ConversationEvent::ConversationStarted(ConversationStarted {
        id: id(CONVERSATION),
        actor_ids: vec![id(ALICE)],
        title: text("Minimal"),
        external_id: None,
        external_source: None,
        status: None,
        organization: None,
        created_at: now(),
        updated_at: now(),
    })
}

fn sorted_keys(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<_> = value.as_object().expect("object").keys().cloned().collect();
    keys.sort();
    keys
}

// --- Preconditions -------------------------------------------------------------------

#[tokio::test]
async fn given_no_conversation_and_registered_actors_when_started_then_conversation_started_fact() {
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(ConversationCommand::Start(start("Fix the login page")))
        .await
        .then_expect_events(vec![started("Fix the login page")]);
}

#[tokio::test]
async fn given_no_conversation_when_started_without_optional_fields_then_fact_without_them() {
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(ConversationCommand::Start(start_minimal()))
        .await
        .then_expect_events(vec![started_minimal()]);
}

#[tokio::test]
async fn given_no_conversation_when_started_then_created_at_and_updated_at_are_server_time() {
    let events = Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(ConversationCommand::Start(start("Times")))
        .await
        .inspect_result()
        .expect("accepted");
    let [ConversationEvent::ConversationStarted(fact)] = events.as_slice() else {
        panic!("expected exactly one ConversationStarted, got {events:?}");
    };
    assert_eq!(fact.created_at, now());
    assert_eq!(fact.updated_at, now());
}

#[tokio::test]
async fn given_no_conversation_when_started_without_actor_ids_then_validation_error_on_actor_ids() {
    let mut cmd = start("No actors");
    cmd.actor_ids.clear();
    let result = Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(ConversationCommand::Start(cmd))
        .await
        .inspect_result();
    assert_refused_on_actor_ids(&result);
}

#[tokio::test]
async fn given_an_unregistered_actor_when_started_then_actor_not_found() {
    Given::with(FakeLookup::default().with_actor(id(ALICE)).services())
        .given_no_previous_events()
        .when_async(ConversationCommand::Start(start("Bot is missing")))
        .await
        .then_expect_error(DomainError::ActorNotFound(id(BOT)));
}

#[tokio::test]
async fn given_several_unregistered_actors_when_started_then_actor_not_found_names_the_first_missing(
) {
    let mut cmd = start("Many missing");
    cmd.actor_ids = vec![id(ALICE), id(7), id(BOT), id(8)];
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(ConversationCommand::Start(cmd))
        .await
        .then_expect_error(DomainError::ActorNotFound(id(7)));
}

#[tokio::test]
async fn given_no_registered_actor_when_started_then_actor_not_found_names_the_first_actor() {
    Given::with(FakeLookup::default().services())
        .given_no_previous_events()
        .when_async(ConversationCommand::Start(start("Nobody")))
        .await
        .then_expect_error(DomainError::ActorNotFound(id(ALICE)));
}

#[tokio::test]
async fn given_unreachable_store_when_started_then_lookup_error_and_no_fact() {
    Given::with(FakeLookup::broken().services())
        .given_no_previous_events()
        .when_async(ConversationCommand::Start(start("Store down")))
        .await
        .then_expect_error(DomainError::Lookup(LookupError("store unreachable".into())));
}

// --- Invariant: a conversation is created at most once per id --------------------------

#[tokio::test]
async fn given_started_conversation_when_identical_start_then_no_new_fact() {
    Given::with(lookup().services())
        .given(vec![started("Fix the login page")])
        .when_async(ConversationCommand::Start(start("Fix the login page")))
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_started_conversation_when_identical_start_later_then_no_new_fact() {
    let mut cmd = start("Fix the login page");
    cmd.now = now() + chrono::TimeDelta::minutes(5);
    Given::with(lookup().services())
        .given(vec![started("Fix the login page")])
        .when_async(ConversationCommand::Start(cmd))
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_started_conversation_without_optional_fields_when_identical_start_then_no_new_fact()
{
    Given::with(lookup().services())
        .given(vec![started_minimal()])
        .when_async(ConversationCommand::Start(start_minimal()))
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_started_conversation_when_started_with_other_content_then_conversation_exists() {
    let variants: Vec<(&str, StartConversation)> = vec![
        ("title", start("Another title")),
        ("actor_ids", {
            let mut c = start("Fix the login page");
            c.actor_ids = vec![id(ALICE)];
            c
        }),
        ("external_id", {
            let mut c = start("Fix the login page");
            c.external_id = Some(label("issue/2"));
            c
        }),
        ("external_source", {
            let mut c = start("Fix the login page");
            c.external_source = None;
            c
        }),
        ("status", {
            let mut c = start("Fix the login page");
            c.status = Some(label("Done"));
            c
        }),
        ("organization", {
            let mut c = start("Fix the login page");
            c.organization = None;
            c
        }),
    ];
    for (field, cmd) in variants {
        let result = Given::with(lookup().services())
            .given(vec![started("Fix the login page")])
            .when_async(ConversationCommand::Start(cmd))
            .await
            .inspect_result();
        assert_eq!(
            result,
            Err(DomainError::ConversationExists(id(CONVERSATION))),
            "a different {field} must be rejected"
        );
    }
}

// --- The fact ---------------------------------------------------------------------------

#[test]
fn given_all_fields_when_fact_serialized_then_payload_has_exactly_the_listed_fields() {
    let value = serde_json::to_value(started("Fix the login page")).expect("serializes");
    assert_eq!(
        sorted_keys(&value),
        [
            "actor_ids",
            "created_at",
            "external_id",
            "external_source",
            "id",
            "organization",
            "status",
            "title",
            "updated_at",
        ]
    );
    assert_eq!(value["id"], id(CONVERSATION).to_string());
    assert_eq!(
        value["actor_ids"],
        serde_json::json!([id(ALICE).to_string(), id(BOT).to_string()])
    );
    assert_eq!(value["title"], "Fix the login page");
    assert_eq!(value["external_id"], "issue/1");
    assert_eq!(value["external_source"], "github");
    assert_eq!(value["status"], "Todo");
    assert_eq!(value["organization"], "acme");
    assert_eq!(value["created_at"], "2026-11-22T05:35:27.000000Z");
    assert_eq!(value["updated_at"], "2026-11-22T05:35:27.000000Z");
}

#[test]
fn given_no_optional_fields_when_fact_serialized_then_optional_fields_are_omitted() {
    let value = serde_json::to_value(started_minimal()).expect("serializes");
    assert_eq!(
        sorted_keys(&value),
        ["actor_ids", "created_at", "id", "title", "updated_at"]
    );
}

#[test]
fn given_fact_when_event_type_asked_then_project_manager_conversation_started_version_1_0() {
    let fact = started("Fix the login page");
    assert_eq!(fact.event_type(), "project_manager.conversation.started");
    assert_eq!(fact.event_version(), "1.0");
}

#[test]
fn given_fact_payload_when_deserialized_then_same_conversation_started() {
    for fact in [started("Fix the login page"), started_minimal()] {
        let json = serde_json::to_string(&fact).expect("serializes");
        let back: ConversationEvent = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, fact);
    }
}

#[test]
fn given_payload_with_unknown_field_when_deserialized_then_rejected() {
    let mut value = serde_json::to_value(started("Fix the login page")).expect("serializes");
    value["surprise"] = serde_json::json!(true);
    assert!(serde_json::from_value::<ConversationEvent>(value).is_err());
}

#[tokio::test]
async fn given_no_conversation_when_started_with_more_actors_than_the_limit_then_validation_error_on_actor_ids(
) {
    // Each id is a lookup: a body of ids must not become thousands of them (TRUST.md).
    let mut cmd = start("Crowded");
    cmd.actor_ids = (0..=Conversation::MAX_ACTORS as u128)
        .map(|n| id(1000 + n))
        .collect();
    let result = Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(ConversationCommand::Start(cmd))
        .await
        .inspect_result();
    assert_refused_on_actor_ids(&result);
}

fn assert_refused_on_actor_ids<T: std::fmt::Debug>(result: &Result<T, DomainError>) {
    assert!(
        matches!(
            result,
            Err(DomainError::Validation {
                field: "actor_ids",
                ..
            })
        ),
        "expected a validation error on actor_ids, got {result:?}"
    );
}

fn forget() -> ConversationCommand {
    ConversationCommand::Forget {
        id: id(CONVERSATION),
        now: now(),
    }
}

fn forgotten() -> ConversationEvent {
    ConversationEvent::ConversationForgotten(Forgotten {
        id: id(CONVERSATION),
        forgotten_at: now(),
    })
}

#[tokio::test]
async fn given_a_started_conversation_when_forgotten_then_conversation_forgotten_fact() {
    Given::with(lookup().services())
        .given(vec![started("Fix the login page")])
        .when_async(forget())
        .await
        .then_expect_events(vec![forgotten()]);
}

#[tokio::test]
async fn given_a_forgotten_conversation_when_forgotten_again_then_no_new_fact() {
    Given::with(lookup().services())
        .given(vec![started("Fix the login page"), forgotten()])
        .when_async(forget())
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_no_conversation_when_forgotten_then_conversation_not_found() {
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(forget())
        .await
        .then_expect_error(DomainError::ConversationNotFound(id(CONVERSATION)));
}

#[tokio::test]
async fn given_a_forgotten_conversation_when_its_start_is_repeated_then_conversation_exists() {
    Given::with(lookup().services())
        .given(vec![started("Fix the login page"), forgotten()])
        .when_async(ConversationCommand::Start(start("Fix the login page")))
        .await
        .then_expect_error(DomainError::ConversationExists(id(CONVERSATION)));
}

#[test]
fn given_a_forgotten_conversation_when_a_forgetting_is_repeated_then_it_answers_the_first() {
    let mut conversation = Conversation::default();
    conversation.apply(started("Fix the login page"));
    conversation.apply(forgotten());
    let later = ConversationCommand::Forget {
        id: id(CONVERSATION),
        now: now() + chrono::Duration::hours(1),
    };
    assert_eq!(conversation.repeated(&later), Some(forgotten()));
}
