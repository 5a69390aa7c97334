//! A processor's cursor moved alone (`cursor::compare_and_set`, the relay's) on both
//! stores: it moves only from where the caller thought it was, a missing row is created at
//! the start of the log (when moved from there), and a stale mover changes nothing. And
//! an event parked (`cursor::park_and_advance`, every processor's): recorded with the
//! cursor moved past it, or, by a stale parker, neither.

mod support;

use pm_application::log::{LogPosition, LoggedEvent};
use pm_infrastructure::db::Args;
use pm_infrastructure::processor::cursor::{self, CursorError};
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};

async fn stored(db: &Database, name: &str) -> Option<i64> {
    db.fetch_optional(
        "SELECT cursor_seq FROM processors WHERE name = $1",
        Args::new().text(name),
    )
    .await
    .expect("read")
    .map(|row| row.int("cursor_seq").expect("cursor"))
}

async fn the_cursor_moves_only_from_where_it_is(db: TestDb) {
    let db = support::migrated(&db, 4).await;
    // Given no row: it is created at the start of the log and moved.
    cursor::compare_and_set(&db, "relay_test", LogPosition(0), LogPosition(5))
        .await
        .expect("moved");
    assert_eq!(stored(&db, "relay_test").await, Some(5));
    cursor::compare_and_set(&db, "relay_test", LogPosition(5), LogPosition(9))
        .await
        .expect("moved");
    assert_eq!(stored(&db, "relay_test").await, Some(9));

    // Given a mover that thought it was elsewhere: refused, nothing changes.
    match cursor::compare_and_set(&db, "relay_test", LogPosition(5), LogPosition(12)).await {
        Err(CursorError::Moved) => {}
        other => panic!("a stale mover moved the cursor: {other:?}"),
    }
    assert_eq!(stored(&db, "relay_test").await, Some(9));
    // Given a missing row and a mover past the start: refused, and nothing is written.
    match cursor::compare_and_set(&db, "other_test", LogPosition(3), LogPosition(4)).await {
        Err(CursorError::Moved) => {}
        other => panic!("a cursor moved from where it never was: {other:?}"),
    }
    assert_eq!(stored(&db, "other_test").await, None);
}

fn poison(position: i64) -> LoggedEvent {
    LoggedEvent {
        position: LogPosition(position),
        aggregate_type: "conversation".into(),
        aggregate_id: "c-1".into(),
        sequence: 1,
        event_type: "project_manager.conversation.started".into(),
        event_version: "1.0".into(),
        payload: serde_json::json!({}).into(),
        metadata: serde_json::json!({}).into(),
        conversation_id: None,
        organization: None,
    }
}

async fn parked(db: &Database, name: &str) -> Vec<(i64, String)> {
    db.fetch_all(
        "SELECT position_seq, error FROM parked_events WHERE processor = $1 ORDER BY position_seq",
        Args::new().text(name),
    )
    .await
    .expect("read")
    .iter()
    .map(|row| {
        (
            row.int("position_seq").expect("position"),
            row.string("error").expect("error"),
        )
    })
    .collect()
}

async fn a_parked_event_is_recorded_and_passed(db: TestDb) {
    let db = support::migrated(&db, 4).await;
    // Given a processor at 2: parking its next event records it and moves past it.
    cursor::compare_and_set(&db, "park_test", LogPosition(0), LogPosition(2))
        .await
        .expect("moved");
    let at = cursor::park_and_advance(&db, "park_test", LogPosition(2), &poison(3), "bad")
        .await
        .expect("parked");
    assert_eq!(at, LogPosition(3));
    assert_eq!(stored(&db, "park_test").await, Some(3));
    assert_eq!(parked(&db, "park_test").await, vec![(3, "bad".to_string())]);

    // Given a parker that thought the cursor was elsewhere: refused, nothing written.
    match cursor::park_and_advance(&db, "park_test", LogPosition(2), &poison(4), "late").await {
        Err(CursorError::Moved) => {}
        other => panic!("a stale parker parked: {other:?}"),
    }
    assert_eq!(stored(&db, "park_test").await, Some(3));
    assert_eq!(parked(&db, "park_test").await, vec![(3, "bad".to_string())]);
}

on_both_backends!(
    the_cursor_moves_only_from_where_it_is,
    a_parked_event_is_recorded_and_passed
);
