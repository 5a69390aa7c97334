//! The log's order under concurrent appends (issue 32), on both stores: many appenders
//! whose commits are delayed at random — some rolled back, some writing another table
//! before they append — and readers following the log meanwhile, each with its own reader
//! (as replicas have). On PostgreSQL the appends commit concurrently and readers read up
//! to a horizon (`log/horizon.rs`); SQLite has one writer. Every reader must see every
//! committed event exactly once, in position order, and nothing that was rolled back; and
//! readers must keep up while the appends run, not only once they have stopped. (Readers
//! trusting positions alone fail it: checked.)

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pm_application::log::{EventFilter, LogPosition, LogReader};
use pm_infrastructure::db::Args;
use pm_infrastructure::log::DbLogReader;
use pm_infrastructure::sql::Dialect;
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use tokio::sync::watch;

/// A small deterministic generator (xorshift), one per appender.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides
    }
}

struct Shape {
    appenders: usize,
    rounds: usize,
    readers: usize,
    /// The longest a commit is delayed, in ms.
    delay_ms: u64,
}

fn shape(dialect: Dialect) -> Shape {
    match dialect {
        Dialect::Postgres => Shape {
            appenders: 64,
            rounds: 10,
            readers: 4,
            delay_ms: 25,
        },
        // One writer at a time: appenders queue on the database's lock.
        Dialect::Sqlite => Shape {
            appenders: 8,
            rounds: 6,
            readers: 3,
            delay_ms: 5,
        },
    }
}

/// One transaction of appender `a`'s round `r`: 1–3 events, sometimes after a write to
/// another table, committed after a random delay — or rolled back.
async fn append(
    db: &Database,
    (a, r): (usize, usize),
    delay_ms: u64,
    dice: &mut Dice,
) -> Vec<String> {
    let mut tx = db.begin().await.expect("begin");
    if dice.roll(4) == 0 {
        tx.execute(
            "INSERT INTO processors (name) VALUES ($1)",
            Args::new().text(format!("before-append-{a}-{r}")),
        )
        .await
        .expect("a write before the append");
    }
    let count = 1 + dice.roll(3);
    let mut ids = Vec::new();
    for e in 0..count {
        let id = format!("{a}-{r}-{e}");
        tx.execute(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata) VALUES ('stress', $1, 1, 'stress.appended', \
             '1.0', '{}', '{}')",
            Args::new().text(id.clone()),
        )
        .await
        .expect("append");
        ids.push(id);
    }
    tokio::time::sleep(Duration::from_millis(dice.roll(delay_ms + 1))).await;
    if dice.roll(6) == 0 {
        drop(tx); // rolled back
        return Vec::new();
    }
    tx.commit().await.expect("commit");
    ids
}

/// Follows the log from the start until `done` and it has read everything; returns the
/// aggregate ids in the order read, and how many it had read when the appends stopped.
async fn follow(reader: DbLogReader, done: Arc<AtomicBool>) -> (Vec<(i64, String)>, usize) {
    let mut cursor = LogPosition::START;
    let mut read = Vec::new();
    let mut during = None;
    loop {
        let finished = done.load(Ordering::Acquire);
        let events = reader
            .read_after(cursor, &EventFilter::default(), 37)
            .await
            .expect("read");
        for e in &events {
            assert!(
                e.position > cursor,
                "{} after {cursor}: out of order",
                e.position
            );
            cursor = e.position;
            read.push((e.position.value(), e.aggregate_id.clone()));
        }
        if finished {
            let during = *during.get_or_insert(read.len());
            if events.is_empty() && cursor >= reader.head().await.expect("head") {
                return (read, during);
            }
        } else if events.is_empty() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

async fn every_reader_sees_every_committed_event_once_in_order(db: TestDb) {
    let shape = shape(if db.kind == "sqlite" {
        Dialect::Sqlite
    } else {
        Dialect::Postgres
    });
    let database = support::migrated(&db, (shape.appenders + shape.readers + 2) as u32).await;
    let done = Arc::new(AtomicBool::new(false));
    let keys = support::keys(&database).await;
    let readers: Vec<_> = (0..shape.readers)
        .map(|_| {
            let reader = DbLogReader::new(database.clone(), keys.clone(), watch::channel(0).1);
            tokio::spawn(follow(reader, done.clone()))
        })
        .collect();
    let appenders: Vec<_> = (0..shape.appenders)
        .map(|a| {
            let db = database.clone();
            let (rounds, delay_ms) = (shape.rounds, shape.delay_ms);
            tokio::spawn(async move {
                let mut dice = Dice(0x9E37_79B9_7F4A_7C15 ^ (a as u64 + 1));
                let mut committed = Vec::new();
                for r in 0..rounds {
                    committed.extend(append(&db, (a, r), delay_ms, &mut dice).await);
                }
                committed
            })
        })
        .collect();
    let mut committed = BTreeSet::new();
    for a in appenders {
        committed.extend(a.await.expect("appender"));
    }
    done.store(true, Ordering::Release);

    let stored = database
        .fetch_all(
            "SELECT global_position, aggregate_id FROM events ORDER BY global_position",
            Args::new(),
        )
        .await
        .expect("the log");
    let stored: Vec<(i64, String)> = stored
        .iter()
        .map(|r| {
            (
                r.int("global_position").expect("position"),
                r.string("aggregate_id").expect("id"),
            )
        })
        .collect();
    assert_eq!(
        stored
            .iter()
            .map(|(_, id)| id.clone())
            .collect::<BTreeSet<_>>(),
        committed,
        "the log holds exactly the committed appends"
    );
    assert!(committed.len() > shape.appenders * shape.rounds / 2);
    for (i, reader) in readers.into_iter().enumerate() {
        let (read, during) = reader.await.expect("reader");
        assert_eq!(
            read, stored,
            "reader {i} saw every committed event once, in order"
        );
        assert!(during > 0, "reader {i} read nothing while the appends ran");
    }
}

on_both_backends!(every_reader_sees_every_committed_event_once_in_order);
