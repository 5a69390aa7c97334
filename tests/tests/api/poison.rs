//! A poison event (a fact whose payload cannot be applied) is parked with its error and
//! skipped: the events after it are projected, the admin report counts it, and a rebuild
//! skips it too.

use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::json;
use sqlx::{Connection, PgConnection, SqliteConnection};
use uuid::Uuid;

use crate::reads::{actor, all_items, conversation, ids, message, read, read_model, rebuild};

/// Appends a `message.added` fact without its required fields, straight into the store.
async fn insert_poison(db: &TestDb, id: Uuid) {
    let payload = json!({"id": id}).to_string();
    if db.kind == "postgres" {
        let mut conn = PgConnection::connect(&db.url).await.expect("connect");
        sqlx::query(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata) VALUES ('message', $1, 1, \
             'project_manager.message.added', '1.0', $2::jsonb, '{}'::jsonb)",
        )
        .bind(id.to_string())
        .bind(payload)
        .execute(&mut conn)
        .await
        .expect("insert the poison event");
    } else {
        let mut conn = SqliteConnection::connect(&db.url).await.expect("connect");
        sqlx::query(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata) VALUES ('message', $1, 1, \
             'project_manager.message.added', '1.0', $2, '{}')",
        )
        .bind(id.to_string())
        .bind(payload)
        .execute(&mut conn)
        .await
        .expect("insert the poison event");
    }
}

async fn poison_events_are_parked_and_skipped(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({})).await.id;
    let before = message(&svc, &c, &a, json!({})).await;
    read(&svc, "/v1/tasks", &before.position).await;
    let poison = Uuid::new_v4();
    insert_poison(&db, poison).await;
    let after = message(&svc, &c, &a, json!({})).await;

    let path = format!("/v1/conversations/{c}");
    let conv = read(&svc, &path, &after.position).await;
    assert_eq!(conv["message_count"], 2, "{conv}");
    let messages = all_items(&svc, &format!("{path}/messages"), 500, &after.position).await;
    assert_eq!(ids(&messages), [before.id.clone(), after.id.clone()]);

    let p = read_model(&svc).await;
    assert_eq!(p["parked"], 1, "{p}");
    let r = svc
        .get(Some(ADMIN), "/v1/admin/processors/read_model/parked")
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let items = r.json["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{}", r.text);
    let parked = &items[0];
    assert_eq!(parked["aggregate_id"], poison.to_string(), "{parked}");
    assert_eq!(parked["aggregate_type"], "message", "{parked}");
    assert_eq!(parked["event_type"], "project_manager.message.added");
    let error = parked["error"].as_str().unwrap_or_default();
    assert!(
        !error.is_empty(),
        "the parked event names its error: {parked}"
    );

    // A rebuild skips it as well, and the projection goes on counting once.
    rebuild(&svc).await;
    let conv = read(&svc, &path, &after.position).await;
    assert_eq!(conv["message_count"], 2, "{conv}");
    let next = message(&svc, &c, &a, json!({})).await;
    let conv = read(&svc, &path, &next.position).await;
    assert_eq!(conv["message_count"], 3, "{conv}");
    assert_eq!(read_model(&svc).await["parked"], 1);
    svc.stop().await;
}

on_both_backends!(poison_events_are_parked_and_skipped);
