//! Given/when/then tests of the Actor aggregate.

use cqrs_es::test::TestFramework;

use super::*;
use crate::forgetting::Forgotten;
use crate::testing::{id, label, now, text, FakeLookup};

type Given = TestFramework<Actor>;

fn register(display_name: &str) -> RegisterActor {
    RegisterActor {
        id: id(1),
        kind: ActorKind::Human,
        display_name: text(display_name),
        external_identity: Some(label("github:alice")),
        now: now(),
    }
}

fn registered(display_name: &str) -> ActorEvent {
    ActorEvent::ActorRegistered(ActorRegistered {
        id: id(1),
        kind: ActorKind::Human,
        display_name: text(display_name),
        external_identity: Some(label("github:alice")),
        created_at: now(),
    })
}

#[tokio::test]
async fn given_no_actor_when_registered_then_actor_registered_fact() {
    Given::with(FakeLookup::default().services())
        .given_no_previous_events()
        .when_async(ActorCommand::Register(register("Alice")))
        .await
        .then_expect_events(vec![registered("Alice")]);
}

#[tokio::test]
async fn given_registered_actor_when_identical_registration_then_no_new_fact() {
    Given::with(FakeLookup::default().services())
        .given(vec![registered("Alice")])
        .when_async(ActorCommand::Register(register("Alice")))
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_registered_actor_when_registered_with_other_content_then_already_exists() {
    Given::with(FakeLookup::default().services())
        .given(vec![registered("Alice")])
        .when_async(ActorCommand::Register(register("Bob")))
        .await
        .then_expect_error(DomainError::AlreadyExists {
            entity: "actor",
            id: id(1),
        });
}

#[test]
fn fact_payload_has_exactly_the_listed_fields() {
    let value = serde_json::to_value(registered("Alice")).expect("serializes");
    let mut keys: Vec<_> = value.as_object().expect("object").keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "created_at",
            "display_name",
            "external_identity",
            "id",
            "kind"
        ]
    );
    assert_eq!(value["created_at"], "2026-11-22T05:35:27.000000Z");
}

fn forget() -> ActorCommand {
    ActorCommand::Forget {
        id: id(1),
        now: now(),
    }
}

fn forgotten() -> ActorEvent {
    ActorEvent::ActorForgotten(Forgotten {
        id: id(1),
        forgotten_at: now(),
    })
}

#[tokio::test]
async fn given_a_registered_actor_when_forgotten_then_actor_forgotten_fact() {
    Given::with(FakeLookup::default().services())
        .given(vec![registered("Alice")])
        .when_async(forget())
        .await
        .then_expect_events(vec![forgotten()]);
}

#[tokio::test]
async fn given_a_forgotten_actor_when_forgotten_again_then_no_new_fact() {
    Given::with(FakeLookup::default().services())
        .given(vec![registered("Alice"), forgotten()])
        .when_async(forget())
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_no_actor_when_forgotten_then_actor_not_found() {
    Given::with(FakeLookup::default().services())
        .given_no_previous_events()
        .when_async(forget())
        .await
        .then_expect_error(DomainError::ActorNotFound(id(1)));
}

#[tokio::test]
async fn given_a_forgotten_actor_when_its_registration_is_repeated_then_already_exists() {
    Given::with(FakeLookup::default().services())
        .given(vec![registered("Alice"), forgotten()])
        .when_async(ActorCommand::Register(register("Alice")))
        .await
        .then_expect_error(DomainError::AlreadyExists {
            entity: "actor",
            id: id(1),
        });
}

#[test]
fn given_a_forgotten_actor_when_a_forgetting_is_repeated_then_it_answers_the_first() {
    let mut actor = Actor::default();
    actor.apply(registered("Alice"));
    actor.apply(forgotten());
    let later = ActorCommand::Forget {
        id: id(1),
        now: now() + chrono::Duration::hours(1),
    };
    assert_eq!(actor.repeated(&later), Some(forgotten()));
    assert_eq!(
        actor.repeated(&ActorCommand::Register(register("Alice"))),
        Some(registered("Alice"))
    );
}
