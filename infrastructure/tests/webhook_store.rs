//! The webhooks' store on both stores: a subscription reads back as created (without its
//! secret in the admin view), the dispatcher's writes are compare-and-set on cursor and
//! generation, a failure is recorded and pauses, a resume bumps the generation (fencing
//! older loops) and rewinds, a delete fences everything, and the processor's position is
//! stored for its lag.

mod support;

use chrono::{DateTime, Utc};
use pm_application::log::LogPosition;
use pm_application::processor::ProcessorStore;
use pm_application::scope::Scope;
use pm_application::webhooks::{DeliveryFailure, NewWebhook, WebhookState, WebhookStore, WEBHOOKS};
use pm_infrastructure::processor::DbProcessorStore;
use pm_infrastructure::webhooks::DbWebhookStore;
use pm_test_db::{on_both_backends, TestDb};
use uuid::Uuid;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn at(s: &str) -> DateTime<Utc> {
    s.parse().expect("a time")
}

fn failure(position: i64, attempts: u32) -> DeliveryFailure {
    DeliveryFailure {
        position: position.to_string(),
        event_id: format!("turn:t:{position}"),
        event_type: "turn.started".into(),
        attempts,
        status: Some(500),
        error: "the receiver answered 500".into(),
        at: at("2026-11-24T10:00:05Z"),
    }
}

async fn subscriptions_keep_their_cursor_under_compare_and_set(db: TestDb) {
    let database = support::migrated(&db, 4).await;
    let store = DbWebhookStore::new(database.clone());
    let id = Uuid::now_v7();
    store
        .create(&NewWebhook {
            id,
            url: "https://hooks.example.com/pm".into(),
            types: vec!["turn.*".into(), "project_manager.task.created".into()],
            scope: Scope::All,
            secret: SECRET.into(),
            position: LogPosition(7),
            at: at("2026-11-24T10:00:00Z"),
        })
        .await
        .expect("created");
    let view = store.get(id).await.expect("read").expect("found");
    assert_eq!(view.url, "https://hooks.example.com/pm");
    assert_eq!(view.types, vec!["turn.*", "project_manager.task.created"]);
    assert_eq!(
        (view.state, view.position.as_str()),
        (WebhookState::Active, "7")
    );
    assert_eq!(view.secret, None, "the admin view has no secret");
    assert_eq!(view.created_at, at("2026-11-24T10:00:00Z"));
    let active = store.active().await.expect("active");
    assert_eq!(active.len(), 1);
    assert_eq!(
        (active[0].secret.as_str(), active[0].generation),
        (SECRET, 0)
    );

    // The cursor moves from where it is, for the current generation only.
    let now = at("2026-11-24T10:00:01Z");
    assert!(!store
        .advance(id, 0, LogPosition(6), LogPosition(9), now)
        .await
        .expect("cas"));
    assert!(!store
        .advance(id, 1, LogPosition(7), LogPosition(9), now)
        .await
        .expect("cas"));
    assert!(store
        .advance(id, 0, LogPosition(7), LogPosition(9), now)
        .await
        .expect("cas"));
    // A failure is kept while retried; the last one pauses.
    assert!(store
        .fail(id, 0, &failure(10, 1), false)
        .await
        .expect("failed"));
    let view = store.get(id).await.expect("read").expect("found");
    assert_eq!(
        (view.state, view.last_error),
        (WebhookState::Active, Some(failure(10, 1)))
    );
    let failing = store.active().await.expect("active")[0].failing;
    assert_eq!(
        failing,
        Some((LogPosition(10), 1)),
        "a new loop goes on counting"
    );
    assert!(store
        .fail(id, 0, &failure(10, 3), true)
        .await
        .expect("paused"));
    let view = store.get(id).await.expect("read").expect("found");
    assert_eq!(
        (view.state, view.position.as_str()),
        (WebhookState::Paused, "9")
    );
    assert_eq!(view.last_error, Some(failure(10, 3)));
    assert!(store.active().await.expect("active").is_empty());
    // Paused: the old loop can write nothing more.
    assert!(!store
        .advance(id, 0, LogPosition(9), LogPosition(10), now)
        .await
        .expect("cas"));
    assert!(!store
        .fail(id, 0, &failure(10, 4), true)
        .await
        .expect("fenced"));

    // Resumed: active, error cleared, a new generation; with a position, rewound to
    // just before it.
    let resumed = store
        .resume(id, None, now)
        .await
        .expect("resumed")
        .expect("found");
    assert_eq!(
        (resumed.state, resumed.position.as_str(), resumed.last_error),
        (WebhookState::Active, "9", None)
    );
    assert!(
        !store
            .advance(id, 0, LogPosition(9), LogPosition(10), now)
            .await
            .expect("cas"),
        "the old generation is fenced"
    );
    assert!(store
        .advance(id, 1, LogPosition(9), LogPosition(10), now)
        .await
        .expect("cas"));
    let rewound = store
        .resume(id, Some(LogPosition(3)), now)
        .await
        .expect("resumed")
        .expect("found");
    assert_eq!(rewound.position, "2");
    assert_eq!(store.active().await.expect("active")[0].generation, 2);
    assert_eq!(
        store
            .resume(Uuid::now_v7(), None, now)
            .await
            .expect("resumed"),
        None
    );

    // Listed oldest first; deleted, it is gone and fenced.
    let second = Uuid::now_v7();
    store
        .create(&NewWebhook {
            id: second,
            url: "https://b.example.com/".into(),
            types: vec!["*".into()],
            scope: Scope::only(["acme"]),
            secret: SECRET.into(),
            position: LogPosition::START,
            at: at("2026-11-24T11:00:00Z"),
        })
        .await
        .expect("created");
    // A registrant's organizations come back as they were stored.
    let scoped = store.get(second).await.expect("read").expect("stored");
    assert_eq!(scoped.organizations, vec!["acme".to_string()]);
    let active = store.active().await.expect("active");
    let scopes: Vec<(Uuid, Scope)> = active.iter().map(|s| (s.id, s.scope.clone())).collect();
    assert!(
        scopes.contains(&(second, Scope::only(["acme"]))),
        "{scopes:?}"
    );
    assert!(scopes.contains(&(id, Scope::All)), "{scopes:?}");
    let ids: Vec<Uuid> = store
        .list()
        .await
        .expect("list")
        .iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(ids, vec![id, second]);
    assert!(store.delete(id).await.expect("deleted"));
    assert!(!store.delete(id).await.expect("deleted"));
    assert_eq!(store.get(id).await.expect("read"), None);
    assert!(!store
        .advance(id, 2, LogPosition(2), LogPosition(3), now)
        .await
        .expect("cas"));

    // The processor's position, once the dispatcher owns it.
    let processors = DbProcessorStore::new(database.clone());
    assert!(processors
        .claim(WEBHOOKS, "replica-a")
        .await
        .expect("claimed"));
    store
        .report_position(LogPosition(42))
        .await
        .expect("stored");
    assert_eq!(
        processors.cursor(WEBHOOKS).await.expect("cursor"),
        LogPosition(42)
    );
    processors
        .release(WEBHOOKS, "replica-a")
        .await
        .expect("released");
}

on_both_backends!(subscriptions_keep_their_cursor_under_compare_and_set);
