//! `GET /v1/stats/tasks`: counts by status, grouped by assignee or organization, and the
//! cycle time from the first `WORK_STARTED` to the latest `WORK_COMPLETED` (p50/p90).

use chrono::DateTime;
use pm_tests::{on_both_backends, TestDb, TestService};
use serde_json::{json, Value};

use crate::reads::{actor, checkpoint, conversation, read, task, task_checkpoint};

/// Seconds from the first `WORK_STARTED` to the latest `WORK_COMPLETED` of a task
/// detail's history, if it has both.
fn cycle_seconds(detail: &Value) -> Option<f64> {
    let history = detail["checkpoints"].as_array()?;
    let at = |c: &Value| DateTime::parse_from_rfc3339(c["created_at"].as_str()?).ok();
    let start = history
        .iter()
        .find(|c| c["type"] == "WORK_STARTED")
        .and_then(at)?;
    let end = history
        .iter()
        .rev()
        .find(|c| c["type"] == "WORK_COMPLETED")
        .and_then(at)?;
    Some((end - start).num_microseconds()? as f64 / 1e6)
}

fn counts(pairs: &[(&str, u64)]) -> Value {
    let mut all = json!({"NOT_STARTED": 0, "WORK_STARTED": 0, "WORK_COMPLETED": 0,
        "WORK_APPROVED": 0, "WORK_REJECTED": 0, "WORK_PAUSED": 0});
    for (k, n) in pairs {
        all[*k] = json!(n);
    }
    all
}

/// Percentile `p` of `values`, interpolated linearly between the closest ranks (what
/// PostgreSQL's `percentile_cont` does): the answer the statistics must give.
fn interpolated(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

fn assert_cycle(got: &Value, want: &[f64]) {
    let ct = &got["cycle_time"];
    assert_eq!(ct["count"], want.len(), "{got}");
    if want.is_empty() {
        assert_eq!(ct["p50_seconds"], Value::Null, "{got}");
        assert_eq!(ct["p90_seconds"], Value::Null, "{got}");
        return;
    }
    for (field, p) in [("p50_seconds", 0.5), ("p90_seconds", 0.9)] {
        let value = ct[field].as_f64().expect("a percentile");
        assert!(
            (value - interpolated(want, p)).abs() < 1e-6,
            "{field}: {got} vs {want:?}"
        );
    }
}

/// Tasks for the statistics: returns the assignees, the two cycle times (tasks 0 and 1)
/// and the last position.
async fn stats_world(svc: &TestService) -> (Vec<String>, f64, f64, String) {
    let mut a = Vec::new();
    for name in ["a1", "a2", "a3"] {
        a.push(actor(svc, name).await.id);
    }
    let acme = conversation(svc, &[&a[0]], json!({"organization": "acme"}))
        .await
        .id;
    let globex = conversation(svc, &[&a[0]], json!({"organization": "globex"}))
        .await
        .id;
    let ba = checkpoint(svc, &acme, "BEGIN_WORK").await.id;
    let bg = checkpoint(svc, &globex, "BEGIN_WORK").await.id;
    let rework = [
        "WORK_STARTED",
        "WORK_COMPLETED",
        "WORK_REJECTED",
        "WORK_STARTED",
    ];
    let plan: [(&str, &str, Option<&str>, Vec<&str>); 5] = [
        (
            &acme,
            &ba,
            Some(&a[0]),
            vec![
                "WORK_STARTED",
                "WORK_PAUSED",
                "WORK_STARTED",
                "WORK_COMPLETED",
            ],
        ),
        (
            &acme,
            &ba,
            Some(&a[1]),
            [&rework[..], &["WORK_COMPLETED", "WORK_APPROVED"]].concat(),
        ),
        (&globex, &bg, Some(&a[2]), vec!["WORK_STARTED"]),
        (&globex, &bg, None, vec![]),
        (&globex, &bg, Some(&a[0]), vec!["WORK_COMPLETED"]),
    ];
    let mut tasks = Vec::new();
    let mut last = String::new();
    for (c, b, assignee, kinds) in plan {
        let t = task(svc, c, b, assignee).await;
        last = t.position.clone();
        for kind in kinds {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            last = task_checkpoint(svc, &t.id, kind).await.position;
        }
        tasks.push(t.id);
    }
    let mut cycles = Vec::new();
    for t in &tasks {
        cycles.push(cycle_seconds(
            &read(svc, &format!("/v1/tasks/{t}"), &last).await,
        ));
    }
    assert!(cycles[2..].iter().all(Option::is_none), "{cycles:?}");
    let c0 = cycles[0].expect("task 0 has a cycle");
    let c1 = cycles[1].expect("task 1 has a cycle");
    (a, c0, c1, last)
}

async fn task_stats_overall(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let (_, c0, c1, last) = stats_world(&svc).await;
    let all = read(&svc, "/v1/stats/tasks", &last).await;
    assert_eq!(all["total"], 5, "{all}");
    let want = counts(&[
        ("NOT_STARTED", 1),
        ("WORK_STARTED", 1),
        ("WORK_COMPLETED", 2),
        ("WORK_APPROVED", 1),
    ]);
    assert_eq!(all["counts"], want, "{all}");
    assert_cycle(&all, &[c0, c1]);
    svc.stop().await;
}

async fn task_stats_grouped(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let (a, c0, c1, last) = stats_world(&svc).await;
    let by = read(&svc, "/v1/stats/tasks?group_by=assigned_to", &last).await;
    let groups = by["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 4, "{by}");
    let group = |k: Value| {
        groups
            .iter()
            .find(|g| g["assigned_to"] == k)
            .unwrap_or_else(|| panic!("no group {k} in {by}"))
    };
    let g = group(json!(a[0]));
    assert_eq!(
        (&g["total"], &g["counts"]),
        (&json!(2), &counts(&[("WORK_COMPLETED", 2)])),
        "{g}"
    );
    assert_cycle(g, &[c0]);
    let g = group(json!(a[1]));
    assert_eq!(
        (&g["total"], &g["counts"]),
        (&json!(1), &counts(&[("WORK_APPROVED", 1)])),
        "{g}"
    );
    assert_cycle(g, &[c1]);
    let g = group(json!(a[2]));
    assert_eq!(
        (&g["total"], &g["counts"]),
        (&json!(1), &counts(&[("WORK_STARTED", 1)])),
        "{g}"
    );
    assert_cycle(g, &[]);
    let g = group(Value::Null);
    assert_eq!(
        (&g["total"], &g["counts"]),
        (&json!(1), &counts(&[("NOT_STARTED", 1)])),
        "{g}"
    );

    let by = read(&svc, "/v1/stats/tasks?group_by=organization", &last).await;
    let groups = by["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 2, "{by}");
    let group = |k: &str| {
        groups
            .iter()
            .find(|g| g["organization"] == k)
            .unwrap_or_else(|| panic!("no group {k} in {by}"))
    };
    let g = group("acme");
    assert_eq!(
        (&g["total"], &g["counts"]),
        (
            &json!(2),
            &counts(&[("WORK_COMPLETED", 1), ("WORK_APPROVED", 1)])
        ),
        "{g}"
    );
    assert_cycle(g, &[c0, c1]);
    let g = group("globex");
    let want = counts(&[
        ("NOT_STARTED", 1),
        ("WORK_STARTED", 1),
        ("WORK_COMPLETED", 1),
    ]);
    assert_eq!((&g["total"], &g["counts"]), (&json!(3), &want), "{g}");
    assert_cycle(g, &[]);
    svc.stop().await;
}

on_both_backends!(task_stats_overall, task_stats_grouped);
