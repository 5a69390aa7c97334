//! The log's one writer on both stores, where it lives: positions in row and commit order,
//! a taken sequence or key writes nothing and says which it was, a claimed key completes
//! only while its claim is the appending replica's, concurrent appends are each
//! answered once, rows inside a caller's transaction move a cursor with them and vanish with
//! a rollback, and readers are rung.

mod support;

use std::collections::BTreeSet;

use pm_application::bus::AppendFailure;
use pm_application::idempotency::{IdempotencyKey, IdempotencyStore};
use pm_application::log::LogPosition;
use pm_infrastructure::append::{Appender, CursorMove, NewEvent};
use pm_infrastructure::db::Args;
use pm_infrastructure::idempotency::DbIdempotencyStore;
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use tokio::sync::watch;
use uuid::Uuid;

async fn appender(db: &TestDb) -> (Appender, Database, watch::Receiver<u64>) {
    let database = support::migrated(db, 8).await;
    let (doorbell, rung) = watch::channel(0);
    (
        Appender::new(database.clone(), support::keys(&database).await, doorbell),
        database,
        rung,
    )
}

fn row(aggregate_id: &str, sequence: i64) -> NewEvent {
    NewEvent {
        aggregate_type: "task",
        aggregate_id: aggregate_id.into(),
        sequence,
        event_type: "test.appended".into(),
        event_version: "1.0".into(),
        payload: format!(r#"{{"n":{sequence}}}"#),
        metadata: "{}".into(),
        conversation_id: Some(Uuid::nil()),
    }
}

fn moving(from: i64, to: i64) -> CursorMove<'static> {
    CursorMove {
        processor: "test",
        from: LogPosition(from),
        to: LogPosition(to),
    }
}

fn key(key: &str) -> IdempotencyKey {
    IdempotencyKey {
        role: "ingress".into(),
        key: key.into(),
        request_hash: "hash".into(),
        claimed: false,
        owner: String::new(),
    }
}

/// (aggregate id, sequence, position) of every event, in log order.
async fn log(db: &Database) -> Vec<(String, i64, i64)> {
    db.fetch_all(
        "SELECT aggregate_id, sequence, global_position FROM events ORDER BY global_position",
        Args::new(),
    )
    .await
    .expect("read the log")
    .iter()
    .map(|r| {
        (
            r.string("aggregate_id").expect("id"),
            r.int("sequence").expect("sequence"),
            r.int("global_position").expect("position"),
        )
    })
    .collect()
}

async fn a_command_s_facts_take_increasing_positions_in_row_order(db: TestDb) {
    let (appender, database, mut rung) = appender(&db).await;
    rung.mark_unchanged();
    let positions = appender
        .append(vec![row("a", 1), row("a", 2), row("a", 3)], None, None)
        .await
        .expect("appended");
    assert_eq!(positions.len(), 3);
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(rung.has_changed().expect("doorbell"), "readers were rung");
    let logged = log(&database).await;
    let sequences: Vec<i64> = logged.iter().map(|(_, s, _)| *s).collect();
    assert_eq!(sequences, vec![1, 2, 3]);
    let stored: Vec<LogPosition> = logged.iter().map(|(_, _, p)| LogPosition(*p)).collect();
    assert_eq!(stored, positions);
    let conversation = database
        .fetch_all(
            "SELECT count(*) AS n FROM events WHERE conversation_id = $1",
            Args::new().uuid(Uuid::nil()),
        )
        .await
        .expect("read")[0]
        .int("n")
        .expect("count");
    assert_eq!(
        conversation, 3,
        "the derived conversation column is written"
    );
}

async fn a_taken_sequence_is_a_conflict_that_writes_nothing(db: TestDb) {
    let (appender, database, _rung) = appender(&db).await;
    appender
        .append(vec![row("a", 1)], None, None)
        .await
        .expect("first");
    assert_eq!(
        appender.append(vec![row("a", 1)], None, None).await,
        Err(AppendFailure::Conflict)
    );
    // A command of two facts, the second taken: neither is written.
    appender
        .append(vec![row("b", 2)], None, None)
        .await
        .expect("b's second");
    assert_eq!(
        appender
            .append(vec![row("b", 1), row("b", 2)], None, None)
            .await,
        Err(AppendFailure::Conflict)
    );
    let ids: Vec<(String, i64)> = log(&database)
        .await
        .into_iter()
        .map(|(a, s, _)| (a, s))
        .collect();
    assert_eq!(ids, vec![("a".into(), 1), ("b".into(), 2)]);
}

async fn a_key_is_written_with_its_fact_and_a_taken_key_writes_nothing(db: TestDb) {
    let (appender, database, _rung) = appender(&db).await;
    let k = key("k-1");
    let first = appender
        .append(vec![row("a", 1)], Some(&k), None)
        .await
        .expect("first");
    let stored = database
        .fetch_optional(
            "SELECT status, position FROM idempotency_keys WHERE role = $1 AND key = $2",
            Args::new().text("ingress").text("k-1"),
        )
        .await
        .expect("read")
        .expect("the key's row is written with the fact");
    assert_eq!(stored.int("status").expect("status"), 201);
    assert_eq!(
        stored.string("position").expect("position"),
        first[0].to_string()
    );

    for rows in [vec![row("b", 1)], vec![row("c", 1), row("c", 2)]] {
        assert_eq!(
            appender.append(rows, Some(&k), None).await,
            Err(AppendFailure::KeyTaken)
        );
    }
    assert_eq!(
        log(&database).await.len(),
        1,
        "nothing written under a taken key"
    );
}

/// A request runs a key under its replica's claim; another replica that took the claim
/// over (the first looked dead) runs the command too. Only the holder's append is written
/// — the first's writes nothing and is told the key is taken — one fact for one key, on
/// every path (one fact: group commit on PostgreSQL; two: one statement).
async fn a_claimed_key_completes_only_under_its_current_claim(db: TestDb) {
    let (appender, database, _rung) = appender(&db).await;
    let keys = DbIdempotencyStore::new(database.clone());
    for (name, rows) in [
        ("k-one", vec![row("a", 1)]),
        ("k-two", vec![row("b", 1), row("b", 2)]),
    ] {
        let claimed_by = |owner: &str| IdempotencyKey {
            claimed: true,
            owner: owner.into(),
            ..key(name)
        };
        keys.claim(&claimed_by("replica-a"), "replica-a")
            .await
            .expect("claimed");
        assert!(keys
            .take_over(&claimed_by("replica-b"), Some("replica-a"), "replica-b")
            .await
            .expect("taken over"));
        assert_eq!(
            appender
                .append(rows.clone(), Some(&claimed_by("replica-a")), None)
                .await,
            Err(AppendFailure::KeyTaken),
            "{name}: the claim's former owner"
        );
        assert!(log(&database)
            .await
            .iter()
            .all(|(id, _, _)| id != &rows[0].aggregate_id));
        let written = appender
            .append(rows.clone(), Some(&claimed_by("replica-b")), None)
            .await
            .expect("the holder appends");
        let stored = database
            .fetch_optional(
                "SELECT status, position FROM idempotency_keys WHERE role = $1 AND key = $2",
                Args::new().text("ingress").text(name),
            )
            .await
            .expect("read")
            .expect("the key's row");
        assert_eq!(stored.int("status").expect("status"), 201, "{name}");
        assert_eq!(
            stored.string("position").expect("position"),
            written.last().expect("a position").to_string(),
            "{name}"
        );
    }
    assert_eq!(log(&database).await.len(), 3, "one write per key");
}

async fn concurrent_appends_are_each_answered_once(db: TestDb) {
    let (appender, database, _rung) = appender(&db).await;
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let appender = appender.clone();
            // Every fourth one races for the same stream's first sequence.
            let id = if i % 4 == 0 {
                "shared".to_string()
            } else {
                format!("own-{i}")
            };
            tokio::spawn(async move { appender.append(vec![row(&id, 1)], None, None).await })
        })
        .collect();
    let mut positions = BTreeSet::new();
    let mut conflicts = 0;
    for task in tasks {
        match task.await.expect("joined") {
            Ok(p) => assert!(positions.insert(p[0]), "a position answered twice"),
            Err(AppendFailure::Conflict) => conflicts += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((positions.len(), conflicts), (49, 15));
    let logged: BTreeSet<LogPosition> = log(&database)
        .await
        .into_iter()
        .map(|(_, _, p)| LogPosition(p))
        .collect();
    assert_eq!(
        logged, positions,
        "every answered position is in the log, nothing else"
    );
}

async fn rows_in_a_transaction_move_a_cursor_with_them_or_vanish(db: TestDb) {
    let (appender, database, _rung) = appender(&db).await;
    support::processor_row(&database, "test").await;
    let cursor = || async {
        database
            .fetch_optional(
                "SELECT cursor_seq FROM processors WHERE name = $1",
                Args::new().text("test"),
            )
            .await
            .expect("read")
            .expect("row")
            .int("cursor_seq")
            .expect("cursor")
    };

    let mut tx = database.begin().await.expect("begin");
    let last = appender
        .append_in(&mut tx, &[row("a", 1), row("a", 2)], Some(moving(0, 7)))
        .await
        .expect("appended");
    assert!(last.cursor_moved);
    let last = last.last.expect("a position");
    tx.commit().await.expect("commit");
    assert_eq!(cursor().await, 7);
    assert_eq!(
        log(&database).await.last().map(|(_, _, p)| LogPosition(*p)),
        Some(last)
    );

    let mut tx = database.begin().await.expect("begin");
    appender
        .append_in(&mut tx, &[row("a", 3)], Some(moving(7, 9)))
        .await
        .expect("appended");
    drop(tx);
    // A cursor that is not where the batch was read does not move (the caller rolls back).
    for rows in [vec![row("a", 3)], vec![]] {
        let mut tx = database.begin().await.expect("begin");
        let stale = appender
            .append_in(&mut tx, &rows, Some(moving(3, 9)))
            .await
            .expect("appended");
        assert!(!stale.cursor_moved, "a cursor moved from where it was not");
    }
    assert_eq!(cursor().await, 7, "a rolled back append moves nothing");
    assert_eq!(log(&database).await.len(), 2);

    let mut tx = database.begin().await.expect("begin");
    let taken = appender.append_in(&mut tx, &[row("a", 2)], None).await;
    assert_eq!(taken, Err(AppendFailure::Conflict));
}

on_both_backends!(
    a_claimed_key_completes_only_under_its_current_claim,
    a_command_s_facts_take_increasing_positions_in_row_order,
    a_taken_sequence_is_a_conflict_that_writes_nothing,
    a_key_is_written_with_its_fact_and_a_taken_key_writes_nothing,
    concurrent_appends_are_each_answered_once,
    rows_in_a_transaction_move_a_cursor_with_them_or_vanish,
);

/// A database that is away (nothing listens on its port) makes the group commit's batch
/// wait its pool's whole acquire timeout; the commands that queued behind that batch are
/// answered with it instead of waiting a timeout of their own, so no command of an outage
/// waits much longer than one acquire timeout. (PostgreSQL's group commit only; needs no
/// server.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_database_away_commands_queued_behind_a_batch_fail_with_it() {
    use std::time::{Duration, Instant};
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let timeout = Duration::from_millis(400);
    let options: sqlx::postgres::PgConnectOptions = format!("postgres://pm@127.0.0.1:{port}/pm")
        .parse()
        .expect("url");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(timeout)
        .connect_lazy_with(options);
    // The keys are never asked for (no personal texts): any store's will do.
    let keys = Database::connect("sqlite::memory:", 1, timeout)
        .await
        .expect("an in-memory store");
    keys.migrate().await.expect("migrate");
    let keys = support::keys(&keys).await;
    let appender = Appender::new(Database::Postgres(pool), keys, watch::channel(0).0);
    let send = |id: String| {
        let appender = appender.clone();
        tokio::spawn(async move {
            let sent = Instant::now();
            let answer = appender.append(vec![row(&id, 1)], None, None).await;
            (answer, sent.elapsed())
        })
    };
    let first = send("first".into());
    // The first batch is waiting for its connection when these arrive.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let queued: Vec<_> = (0..8).map(|i| send(format!("queued-{i}"))).collect();
    for task in std::iter::once(first).chain(queued) {
        let (answer, took) = task.await.expect("joined");
        assert!(
            matches!(answer, Err(AppendFailure::Unavailable(_))),
            "{answer:?}"
        );
        assert!(
            took < timeout + Duration::from_millis(200),
            "answered after {took:?}, more than one acquire timeout ({timeout:?})"
        );
    }
}
