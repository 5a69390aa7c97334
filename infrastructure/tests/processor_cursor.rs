//! A processor's cursor moved alone (`cursor::compare_and_set`, the relay's) on both
//! stores: it moves only from where the caller thought it was, a missing row is created at
//! the start of the log (when moved from there), and a stale mover changes nothing.

mod support;

use pm_application::log::LogPosition;
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

on_both_backends!(the_cursor_moves_only_from_where_it_is);
