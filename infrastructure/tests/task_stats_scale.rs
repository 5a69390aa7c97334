//! Task statistics are computed by the database (issue 30), on both stores: over 200,000
//! finished tasks the answer is exact (counts, and the cycle-time percentiles a sort in
//! memory gives), and the statistics allocate a bounded amount here — what they read back
//! is a few rows per group, not a row per task. The test binary counts its allocations
//! (dhat) to say so; one test runs both stores in turn, since one profiler counts at a
//! time.

use pm_application::queries::ReadModelStore;
use pm_application::scope::Scope;
use pm_application::views::{CycleTime, StatsGroup, TaskStatsView};
use pm_infrastructure::db::Args;
use pm_infrastructure::read_model::query::ReadModel;
use pm_infrastructure::read_model::rebuild::ensure_schema;
use pm_infrastructure::read_model::schema::table;
use pm_test_db::TestDb;

mod support;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const TASKS: i64 = 200_000;

/// The cycle time of task `i`, in seconds: whole seconds spread with repeats, and up to
/// 999 microseconds.
fn cycle(i: i64) -> f64 {
    ((i * 7_919) % 100_003) as f64 + ((i % 1_000) as f64) / 1_000_000.0
}

async fn statistics_of_200000_tasks_are_exact_and_bounded_in_memory(db: TestDb) {
    let database = support::migrated(&db, 2).await;
    ensure_schema(&database).await.expect("the read schema");
    let tasks = table(1, "tasks");
    // Every task WORK_COMPLETED, started at 2026-01-01 plus i seconds and completed
    // cycle(i) later; one in ten with an assignee (two groups).
    let rows = if db.kind == "postgres" {
        format!(
            "INSERT INTO {tasks} (id, conversation_id, checkpoint_id, instructions, assigned_to, \
             organization, created_at, status, first_work_started_at, last_work_completed_at) \
             SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'x', \
             CASE WHEN i % 10 = 0 THEN '00000000-0000-0000-0000-000000000001'::uuid END, 'acme', \
             now(), 'WORK_COMPLETED', \
             timestamptz '2026-01-01T00:00:00Z' + i * interval '1 second', \
             timestamptz '2026-01-01T00:00:00Z' + (i + (i * 7919) % 100003) * interval '1 second' \
               + (i % 1000) * interval '1 microsecond' \
             FROM generate_series(0, {}) AS i",
            TASKS - 1
        )
    } else {
        // SQLite: the times as the service writes them (RFC 3339, microseconds, `Z`).
        format!(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {}) \
             INSERT INTO {tasks} (id, conversation_id, checkpoint_id, instructions, assigned_to, \
             organization, created_at, status, first_work_started_at, last_work_completed_at) \
             SELECT printf('t-%d', i), 'c', 'k', 'x', \
             CASE WHEN i % 10 = 0 THEN '00000000-0000-0000-0000-000000000001' END, 'acme', \
             '2026-01-01T00:00:00.000000Z', 'WORK_COMPLETED', \
             strftime('%Y-%m-%dT%H:%M:%S', 1767225600 + i, 'unixepoch') || '.000000Z', \
             strftime('%Y-%m-%dT%H:%M:%S', 1767225600 + i + (i * 7919) % 100003, 'unixepoch') \
               || printf('.%06dZ', i % 1000) \
             FROM n",
            TASKS - 1
        )
    };
    database
        .execute(&rows, Args::new())
        .await
        .expect("the tasks");

    let reads = ReadModel::new(database);
    let before = dhat::HeapStats::get();
    let all = reads
        .task_stats(&Scope::All, StatsGroup::All)
        .await
        .expect("statistics");
    let grouped = reads
        .task_stats(&Scope::All, StatsGroup::AssignedTo)
        .await
        .expect("grouped statistics");
    let after = dhat::HeapStats::get();
    // Everything allocated meanwhile bounds what the statistics held at once. A row per
    // task would be 200,000 × (a row, a key, a float): tens of MiB; the ranks are a
    // handful of rows. 2 MiB leaves room for the drivers' own buffers.
    let allocated = after.total_bytes - before.total_bytes;
    assert!(
        allocated < 2 << 20,
        "the statistics allocated {allocated} bytes"
    );

    let want = CycleTime::of((0..TASKS).map(cycle).collect());
    let TaskStatsView::All(stats) = all else {
        panic!("ungrouped statistics: {all:?}")
    };
    assert_eq!(stats.total, TASKS);
    assert_eq!(stats.cycle_time.count, want.count);
    for (got, want) in [
        (stats.cycle_time.p50_seconds, want.p50_seconds),
        (stats.cycle_time.p90_seconds, want.p90_seconds),
    ] {
        let (got, want) = (got.expect("a percentile"), want.expect("a percentile"));
        assert!((got - want).abs() < 1e-6, "{got} against {want}");
    }
    let TaskStatsView::Grouped { groups, .. } = grouped else {
        panic!("grouped statistics: {grouped:?}")
    };
    let counts: Vec<u64> = groups.iter().map(|g| g.stats.cycle_time.count).collect();
    assert_eq!(counts.iter().sum::<u64>(), TASKS as u64);
    assert_eq!(groups.len(), 2, "{groups:?}");
    eprintln!(
        "{}: task statistics over {TASKS} tasks, both queries: {allocated} bytes allocated",
        db.kind
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_both_stores() {
    let _profiler = dhat::Profiler::builder().testing().build();
    if let Some(db) = TestDb::sqlite().await {
        statistics_of_200000_tasks_are_exact_and_bounded_in_memory(db).await;
    }
    if let Some(db) = TestDb::postgres().await {
        statistics_of_200000_tasks_are_exact_and_bounded_in_memory(db).await;
    }
}
