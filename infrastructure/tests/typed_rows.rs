//! Statements run as written on both stores, their arguments bound in each database's own
//! types and their rows decoded from either: what lets one text serve both without casts.
//! An id and a time are stored exactly as the service always stored them (SQLite: the
//! hyphenated id and the RFC 3339 text with microseconds and `Z`); an id kept as text, an
//! `integer`, a `json` document read back alike; a multi-row statement refuses arguments
//! that do not fit its columns on both.

mod support;

use chrono::{DateTime, TimeZone, Utc};
use pm_infrastructure::db::{Args, SqlType};
use pm_infrastructure::sql::Dialect;
use pm_test_db::{on_both_backends, TestDb};
use uuid::Uuid;

fn a_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 5, 35, 27)
        .single()
        .expect("a time")
        + chrono::Duration::microseconds(123_456)
}

async fn typed_arguments_are_stored_as_each_database_keeps_them(db: TestDb) {
    let database = support::migrated(&db, 2).await;
    let (id, at) = (Uuid::new_v4(), a_time());
    database
        .execute(
            "INSERT INTO saga_conversations (conversation_id, version, updated_at) \
             VALUES ($1, 7, $2)",
            Args::new().uuid(id).time(&at),
        )
        .await
        .expect("insert");

    let row = database
        .fetch_optional(
            "SELECT conversation_id, version, updated_at FROM saga_conversations \
             WHERE conversation_id = $1 AND updated_at = $2",
            Args::new().uuid(id).time(&at),
        )
        .await
        .expect("read")
        .expect("the row, found by its typed id and time");
    assert_eq!(row.uuid("conversation_id").expect("id"), id);
    assert_eq!(row.int("version").expect("version"), 7);
    assert_eq!(row.time("updated_at").expect("time"), at);

    if database.dialect() == Dialect::Sqlite {
        // The stored text is what every earlier release wrote and compares with.
        let row = database
            .fetch_optional(
                "SELECT conversation_id, updated_at FROM saga_conversations",
                Args::new(),
            )
            .await
            .expect("read")
            .expect("the row");
        assert_eq!(row.str("conversation_id").expect("text"), id.to_string());
        assert_eq!(
            row.str("updated_at").expect("text"),
            "2026-11-22T05:35:27.123456Z"
        );
    }
}

async fn ids_kept_as_text_integers_and_json_read_alike(db: TestDb) {
    let database = support::migrated(&db, 2).await;
    support::processor_row(&database, "typed_rows").await;
    let (id, conversation) = (Uuid::new_v4(), Uuid::new_v4());
    // Written as given: spacing and key order are the document's, not a normal form.
    let payload = r#"{"z": 1,  "a": [2, 3]}"#;
    let mut tx = database.begin().await.expect("begin");
    let returned = tx
        .insert_rows(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata, conversation_id)",
            &[
                SqlType::Text,
                SqlType::Text,
                SqlType::Int,
                SqlType::Text,
                SqlType::Text,
                SqlType::Json,
                SqlType::Json,
                SqlType::Uuid,
            ],
            1,
            Args::new()
                .text("typed")
                .text(id.to_string())
                .int(1)
                .text("typed.row")
                .text("1.0")
                .text(payload)
                .text("{}")
                .uuid(conversation),
            "RETURNING global_position",
        )
        .await
        .expect("insert");
    assert_eq!(returned.len(), 1);
    let refused = tx
        .insert_rows(
            "INSERT INTO events (conversation_id)",
            &[SqlType::Uuid],
            1,
            Args::new().text(conversation.to_string()),
            "",
        )
        .await;
    assert!(
        matches!(refused, Err(sqlx::Error::Encode(_))),
        "an id given as text for a uuid column: {refused:?}"
    );
    tx.commit().await.expect("commit");

    let row = database
        .fetch_optional(
            "SELECT aggregate_id, payload, conversation_id, \
             (SELECT generation FROM processors WHERE name = $2) AS generation \
             FROM events WHERE aggregate_id = $1",
            Args::new().text(id.to_string()).text("typed_rows"),
        )
        .await
        .expect("read")
        .expect("the event");
    assert_eq!(row.uuid("aggregate_id").expect("a text id"), id);
    assert_eq!(row.str("payload").expect("the document"), payload);
    assert_eq!(
        row.opt_uuid("conversation_id").expect("a uuid"),
        Some(conversation)
    );
    assert_eq!(row.int("generation").expect("an integer column"), 1);
}

on_both_backends!(
    typed_arguments_are_stored_as_each_database_keeps_them,
    ids_kept_as_text_integers_and_json_read_alike
);
