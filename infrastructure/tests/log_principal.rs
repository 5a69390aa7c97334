//! The log says who (TRUST.md), on both stores: a command's facts record its principal in
//! their metadata and CloudEvent, and the log reader's principal filter returns only that
//! principal's events — composed with the other filters, and never an event that names
//! no principal.

mod support;

use std::sync::Arc;

use pm_application::bus::{CommandBus, CommandContext};
use pm_application::clock::SystemClock;
use pm_application::commands::{Commands, RegisterActorInput, StartConversationInput};
use pm_application::log::{EventFilter, LogPosition, LogReader, LoggedEvent};
use pm_application::views::CloudEvent;
use pm_domain::types::ActorKind;
use pm_domain::{Label, NonEmptyText, Services};
use pm_infrastructure::append::{Appender, NewEvent};
use pm_infrastructure::db::Args;
use pm_infrastructure::log::DbLogReader;
use pm_infrastructure::lookup::{KnownEntities, StoreLookup};
use pm_infrastructure::store::PmStore;
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use tokio::sync::watch;
use uuid::Uuid;

struct Service {
    commands: Commands<PmStore>,
    appender: Appender,
    log: DbLogReader,
    db: Database,
}

async fn service(db: &TestDb) -> Service {
    let database = support::migrated(db, 4).await;
    let (doorbell, rung) = watch::channel(0);
    let appender = Appender::new(database.clone(), support::keys(&database).await, doorbell);
    let known = Arc::new(KnownEntities::new(1_000));
    let store = PmStore::new(&database, appender.clone(), 1_000, known.clone());
    let lookup = StoreLookup::new(database.clone(), known);
    let bus = CommandBus::new(store, Services::new(Arc::new(lookup)), 3);
    Service {
        commands: Commands::new(bus, Arc::new(SystemClock)),
        appender,
        log: DbLogReader::new(database.clone(), support::keys(&database).await, rung),
        db: database,
    }
}

/// The context of a request of `principal` with role `role`.
fn by(principal: &str, role: &str) -> CommandContext {
    CommandContext {
        correlation_id: format!("request-of-{principal}"),
        causation_id: None,
        role: role.into(),
        principal: principal.into(),
        scope: pm_application::scope::Scope::All,
        voice: pm_application::speaker::Voice::anyone(),
        idempotency_key: None,
        turn: None,
        ends: None,
        trace: None,
    }
}

async fn register(service: &Service, name: &str, ctx: &CommandContext) -> Uuid {
    service
        .commands
        .register_actor(
            RegisterActorInput {
                kind: ActorKind::Human,
                display_name: NonEmptyText::parse(name).expect("a name"),
                external_identity: Some(Label::parse(format!("test:{name}")).expect("a label")),
            },
            ctx,
        )
        .await
        .expect("registered")
        .entity()
        .id
}

async fn read(service: &Service, filter: &EventFilter) -> Vec<LoggedEvent> {
    service
        .log
        .read_after(LogPosition::START, filter, 100)
        .await
        .expect("the log reads")
}

fn types(events: &[LoggedEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event_type.as_str()).collect()
}

fn of(principal: &str) -> EventFilter {
    EventFilter {
        principal: Some(principal.into()),
        ..EventFilter::default()
    }
}

async fn given_a_command_of_a_principal_when_appended_then_its_metadata_and_cloud_event_name_it(
    db: TestDb,
) {
    let service = service(&db).await;
    register(&service, "Alice", &by("alice", "ingress")).await;

    let stored = service
        .db
        .fetch_all(
            "SELECT metadata->>'principal' AS principal, metadata->>'role' AS role FROM events",
            Args::new(),
        )
        .await
        .expect("the events table reads");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].string("principal").expect("principal"), "alice");
    assert_eq!(stored[0].string("role").expect("role"), "ingress");

    let logged = read(&service, &EventFilter::default()).await;
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].principal(), Some("alice"));
    let cloud = CloudEvent::from(&logged[0]);
    assert_eq!(cloud.principal.as_deref(), Some("alice"));
    assert_eq!(cloud.role.as_deref(), Some("ingress"));
    let json = serde_json::to_value(&cloud).expect("serializes");
    assert_eq!(json["principal"], "alice");
}

async fn given_events_of_several_principals_when_read_by_principal_then_only_theirs_and_the_filters_compose(
    db: TestDb,
) {
    let service = service(&db).await;
    let alice = by("alice", "ingress");
    let bob = by("bob", "ingress");
    let a = register(&service, "Alice", &alice).await;
    register(&service, "Bob", &bob).await;
    let conversation = service
        .commands
        .start_conversation(
            StartConversationInput {
                actor_ids: vec![a],
                title: NonEmptyText::parse("The login bug").expect("a title"),
                external_id: None,
                external_source: None,
                status: None,
                organization: None,
            },
            &alice,
        )
        .await
        .expect("started")
        .entity()
        .id;
    // Written before events named their principal.
    service
        .appender
        .append(
            vec![NewEvent {
                aggregate_type: "note",
                aggregate_id: "old".into(),
                sequence: 1,
                event_type: "project_manager.note.written".into(),
                event_version: "1.0".into(),
                payload: "{}".into(),
                metadata: r#"{"role":"ingress","correlation_id":"old"}"#.into(),
                conversation_id: None,
            }],
            None,
            None,
        )
        .await
        .expect("appended");
    assert_eq!(read(&service, &EventFilter::default()).await.len(), 4);

    let alices = read(&service, &of("alice")).await;
    assert_eq!(
        types(&alices),
        [
            "project_manager.actor.registered",
            "project_manager.conversation.started"
        ]
    );
    assert!(alices.iter().all(|e| e.principal() == Some("alice")));
    assert_eq!(
        types(&read(&service, &of("bob")).await),
        ["project_manager.actor.registered"]
    );
    assert!(read(&service, &of("carol")).await.is_empty());
    // A prefix of a name is another name.
    assert!(read(&service, &of("ali")).await.is_empty());

    let alices_conversations = EventFilter {
        principal: Some("alice".into()),
        ..EventFilter::default().with_types("project_manager.conversation.*")
    };
    assert_eq!(
        types(&read(&service, &alices_conversations).await),
        ["project_manager.conversation.started"]
    );
    let bobs_conversations = EventFilter {
        principal: Some("bob".into()),
        ..EventFilter::default().with_types("project_manager.conversation.started")
    };
    assert!(read(&service, &bobs_conversations).await.is_empty());
    let alice_in_it = EventFilter {
        principal: Some("alice".into()),
        conversation_id: Some(conversation),
        ..EventFilter::default()
    };
    assert_eq!(
        types(&read(&service, &alice_in_it).await),
        ["project_manager.conversation.started"]
    );

    // The rule the stores apply is the rule a stream applies to the tail.
    let all = read(&service, &EventFilter::default()).await;
    for filter in [
        of("alice"),
        of("bob"),
        alices_conversations,
        bobs_conversations,
        alice_in_it,
    ] {
        let matched: Vec<LogPosition> = all
            .iter()
            .filter(|e| filter.matches(e))
            .map(|e| e.position)
            .collect();
        let stored: Vec<LogPosition> = read(&service, &filter)
            .await
            .iter()
            .map(|e| e.position)
            .collect();
        assert_eq!(matched, stored, "{filter:?}");
    }
}

on_both_backends!(
    given_a_command_of_a_principal_when_appended_then_its_metadata_and_cloud_event_name_it,
    given_events_of_several_principals_when_read_by_principal_then_only_theirs_and_the_filters_compose,
);
