//! A task's read status is the type of its latest task checkpoint in the task's own event
//! order (`NOT_STARTED` before any), also when checkpoints on many tasks race; the
//! conversation's `task_counts` follow.

use std::collections::BTreeMap;

use futures::future::join_all;
use pm_tests::{on_both_backends, TestDb, TestService};
use serde_json::{json, Value};

use crate::reads::{
    actor, all_items, caught_up, checkpoint, conversation, ids, read, task, task_checkpoint,
};
use crate::support::{sequence, wait_events};

const TYPES: [&str; 5] = [
    "WORK_STARTED",
    "WORK_COMPLETED",
    "WORK_APPROVED",
    "WORK_REJECTED",
    "WORK_PAUSED",
];

fn task_counts(statuses: &[&str]) -> Value {
    let mut counts = json!({"NOT_STARTED": 0});
    for t in TYPES {
        counts[t] = json!(0);
    }
    for s in statuses {
        counts[*s] = json!(counts[*s].as_u64().unwrap_or_default() + 1);
    }
    counts
}

async fn status_is_the_latest_checkpoint_type(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({})).await.id;
    let b = checkpoint(&svc, &c, "BEGIN_WORK").await.id;
    let t = task(&svc, &c, &b, None).await;
    let other = task(&svc, &c, &b, None).await;
    let got = read(&svc, &format!("/v1/tasks/{}", t.id), &other.position).await;
    assert_eq!(got["status"], "NOT_STARTED", "{got}");
    let conv = read(&svc, &format!("/v1/conversations/{c}"), &other.position).await;
    assert_eq!(conv["task_counts"], task_counts(&["NOT_STARTED"; 2]));
    // Every type, some twice, and every transition between them.
    let kinds = [
        "WORK_STARTED",
        "WORK_PAUSED",
        "WORK_STARTED",
        "WORK_COMPLETED",
        "WORK_REJECTED",
        "WORK_STARTED",
        "WORK_COMPLETED",
        "WORK_APPROVED",
        "WORK_PAUSED",
    ];
    for (i, kind) in kinds.iter().enumerate() {
        let p = task_checkpoint(&svc, &t.id, kind).await;
        let got = read(&svc, &format!("/v1/tasks/{}", t.id), &p.position).await;
        assert_eq!(got["status"], *kind, "after {kind}: {got}");
        assert_eq!(got["status_changed_at"], p.json["created_at"], "{got}");
        assert_eq!(got["checkpoint_count"], i + 1, "{got}");
        let listed = all_items(&svc, &format!("/v1/tasks?status={kind}"), 500, &p.position).await;
        assert_eq!(ids(&listed), vec![t.id.clone()], "/v1/tasks?status={kind}");
        let conv = read(&svc, &format!("/v1/conversations/{c}"), &p.position).await;
        assert_eq!(conv["task_counts"], task_counts(&[kind, "NOT_STARTED"]));
    }
    svc.stop().await;
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

async fn racing_checkpoints_on_many_tasks(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({})).await.id;
    let b = checkpoint(&svc, &c, "BEGIN_WORK").await.id;
    let mut tasks = Vec::new();
    for _ in 0..10 {
        tasks.push(task(&svc, &c, &b, None).await.id);
    }
    let seed = (uuid::Uuid::new_v4().as_u128() as u64) | 1;
    let mut rng = Rng(seed);
    let plan: Vec<(usize, &str)> = (0..60)
        .map(|_| (rng.below(9), TYPES[rng.below(TYPES.len())]))
        .collect();
    // Task 9 gets none: it stays NOT_STARTED.
    let answers = join_all(
        plan.iter()
            .map(|(t, kind)| task_checkpoint(&svc, &tasks[*t], kind)),
    )
    .await;
    let positions: Vec<String> = answers.iter().map(|p| p.position.clone()).collect();
    caught_up(&svc, &positions).await;

    let events = wait_events(&svc, "types=project_manager.task.checkpoint.created", 60).await;
    assert_eq!(events.len(), 60, "seed {seed}");
    // task id -> (sequence -> type), from the log.
    let mut logged: BTreeMap<String, BTreeMap<u64, String>> = BTreeMap::new();
    for e in &events {
        let task = e["data"]["task_id"].as_str().expect("task_id").to_string();
        let seq = sequence(e);
        let kind = e["data"]["type"].as_str().expect("type").to_string();
        logged.entry(task).or_default().insert(seq, kind);
    }
    let last = positions.last().expect("a position");
    let mut statuses = Vec::new();
    for t in &tasks {
        let history = logged.get(t).cloned().unwrap_or_default();
        let want = history
            .values()
            .next_back()
            .map_or("NOT_STARTED", String::as_str);
        let got = read(&svc, &format!("/v1/tasks/{t}"), last).await;
        assert_eq!(got["status"], want, "seed {seed}, task {t}: {got}");
        let sequences: Vec<u64> = got["checkpoints"]
            .as_array()
            .expect("checkpoints")
            .iter()
            .filter_map(|h| h["sequence"].as_u64())
            .collect();
        let want_sequences: Vec<u64> = history.keys().copied().collect();
        assert_eq!(sequences, want_sequences, "seed {seed}, task {t}");
        statuses.push(want.to_string());
    }
    let refs: Vec<&str> = statuses.iter().map(String::as_str).collect();
    let conv = read(&svc, &format!("/v1/conversations/{c}"), last).await;
    assert_eq!(
        conv["task_counts"],
        task_counts(&refs),
        "seed {seed}: {conv}"
    );
    for status in ["NOT_STARTED"].iter().chain(TYPES.iter()) {
        let listed = all_items(&svc, &format!("/v1/tasks?status={status}"), 500, last).await;
        let mut want: Vec<String> = tasks
            .iter()
            .zip(&statuses)
            .filter(|(_, s)| s == status)
            .map(|(t, _)| t.clone())
            .collect();
        want.sort();
        let mut got = ids(&listed);
        got.sort();
        assert_eq!(got, want, "seed {seed}: /v1/tasks?status={status}");
    }
    svc.stop().await;
}

on_both_backends!(
    status_is_the_latest_checkpoint_type,
    racing_checkpoints_on_many_tasks
);
