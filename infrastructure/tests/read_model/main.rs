//! The read model's one applier against its oracle (property): a random log of valid
//! facts applied by the live projection (the batch path: multi-row statements per batch,
//! the cursor moved batch by batch) in random batch splits, and by the per-event oracle
//! ([`oracle`]) one event at a time, leaves the same rows in every read table — on SQLite
//! and on PostgreSQL. The logs forget actors and conversations, read as the live
//! projection or as a rebuild after the forgetting meets them ([`script`]).

mod old_schema;
mod oracle;
mod script;
#[path = "../support/mod.rs"]
mod support;
mod upgrade;

use pm_application::fact::Fact;
use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::processor::BatchHandler;
use pm_infrastructure::db::Args;
use pm_infrastructure::read_model::schema::{create_statements, table, TABLES};
use pm_infrastructure::read_model::{ReadModelProjection, READ_MODEL};
use pm_infrastructure::sql::Dialect;
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use proptest::collection::vec;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Cases per backend: enough to meet every transition in many batch splits, few enough
/// for a test of a few seconds.
const CASES: u32 = 32;

/// A row as text, column by column.
type Row = Vec<Option<String>>;

/// Every table of generation `g`: its rows as text, sorted.
async fn dump(db: &Database, g: i64) -> Vec<(String, Vec<Row>)> {
    let mut tables = Vec::new();
    for name in TABLES {
        let t = table(g, name);
        let columns_sql = match db.dialect() {
            Dialect::Postgres => {
                "SELECT column_name::text AS name FROM information_schema.columns \
                                  WHERE table_name = $1 ORDER BY ordinal_position"
            }
            Dialect::Sqlite => "SELECT name FROM pragma_table_info($1) ORDER BY cid",
        };
        let columns: Vec<String> = db
            .fetch_all(columns_sql, Args::new().text(t.as_str()))
            .await
            .expect("columns")
            .iter()
            .map(|row| row.string("name").expect("a column name"))
            .collect();
        assert!(!columns.is_empty(), "{t} has no columns");
        let select = columns
            .iter()
            .map(|c| format!("CAST(\"{c}\" AS TEXT) AS \"{c}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let mut rows: Vec<Row> = db
            .fetch_all(&format!("SELECT {select} FROM {t}"), Args::new())
            .await
            .expect("rows")
            .iter()
            .map(|row| {
                columns
                    .iter()
                    .map(|c| row.opt_string(c).expect("a text value"))
                    .collect()
            })
            .collect();
        rows.sort();
        tables.push((name.to_string(), rows));
    }
    tables
}

/// The tables of generation `g`, created once per backend.
async fn create(db: &Database, g: i64) {
    let mut tx = db.begin().await.expect("begin");
    for statement in create_statements(db.dialect(), g) {
        tx.execute(&statement, Args::new()).await.expect("DDL");
    }
    tx.commit().await.expect("commit");
}

/// Empties the tables of generations `gs` (cheaper than new tables for every case).
async fn clear(db: &Database, gs: &[i64]) {
    let mut tx = db.begin().await.expect("begin");
    for g in gs {
        for name in TABLES {
            let sql = format!("DELETE FROM {}", table(*g, name));
            tx.execute(&sql, Args::new()).await.expect("delete");
        }
    }
    tx.commit().await.expect("commit");
}

/// The live projection applies `events` in batches of `sizes` (cycled) to generation `g`.
async fn by_batches(db: &Database, g: i64, events: &[LoggedEvent], sizes: &[usize]) {
    db.execute(
        "INSERT INTO processors (name, generation, cursor_seq) VALUES ($1, $2, 0) \
         ON CONFLICT (name) DO UPDATE SET generation = excluded.generation, cursor_seq = 0",
        Args::new().text(READ_MODEL).int(g),
    )
    .await
    .expect("point the projection at the generation");
    let projection = ReadModelProjection::new(db.clone());
    let (mut from, mut rest) = (LogPosition::START, events);
    for size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (batch, after) = rest.split_at((*size).min(rest.len()));
        let next = projection.apply(from, batch).await;
        from = next.unwrap_or_else(|e| panic!("batch of {} events failed: {e}", batch.len()));
        rest = after;
    }
    assert_eq!(
        from,
        events.last().map_or(LogPosition::START, |e| e.position)
    );
}

/// The oracle applies `events` one at a time to generation `g`.
async fn by_events(db: &Database, g: i64, events: &[LoggedEvent]) {
    let mut tx = db.begin().await.expect("begin");
    for event in events {
        oracle::apply_event(&mut tx, g, event)
            .await
            .unwrap_or_else(|e| panic!("the oracle failed at {}: {e}", event.position));
    }
    tx.commit().await.expect("commit");
}

/// The generation the batch path writes.
const BATCHED: i64 = 1;
/// The generation the oracle writes.
const SINGLE: i64 = 2;

/// One case: the tables both appliers leave after the log of `steps` are the same.
async fn check(db: &Database, steps: &[(script::Step, i64)], sizes: &[usize], after: bool) {
    let events = script::log(steps, after);
    for e in &events {
        if !e.event_type.starts_with("saga.") {
            Fact::from_logged(e).unwrap_or_else(|err| panic!("the script wrote {e:?}: {err}"));
        }
    }
    clear(db, &[BATCHED, SINGLE]).await;
    by_batches(db, BATCHED, &events, sizes).await;
    by_events(db, SINGLE, &events).await;
    let (got, want) = (dump(db, BATCHED).await, dump(db, SINGLE).await);
    for ((name, got), (_, want)) in got.iter().zip(&want) {
        let only = |a: &Vec<Row>, b: &Vec<Row>| {
            a.iter()
                .filter(|r| !b.contains(r))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert!(
            got == want,
            "table {name} differs in batches of {sizes:?} (read after forgetting: {after})\nonly by batches: {:?}\nonly by the oracle: {:?}",
            only(got, want),
            only(want, got)
        );
    }
}

/// The property on one backend, with one database for all its cases.
async fn batch_path_equals_the_per_event_oracle(db: TestDb) {
    let database = support::migrated(&db, 4).await;
    create(&database, BATCHED).await;
    create(&database, SINGLE).await;
    let config = Config {
        cases: CASES,
        max_shrink_iters: 200,
        failure_persistence: None,
        ..Config::default()
    };
    let strategy = (
        vec(script::step(), 1..80),
        vec(1usize..16, 1..6),
        proptest::bool::ANY,
    );
    let handle = tokio::runtime::Handle::current();
    let outcome = tokio::task::block_in_place(|| {
        TestRunner::new(config).run(&strategy, |(steps, sizes, after)| {
            handle.block_on(check(&database, &steps, &sizes, after));
            Ok::<(), TestCaseError>(())
        })
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

on_both_backends!(batch_path_equals_the_per_event_oracle);
