//! Concurrency: racing writers on one task all succeed with contiguous sequence numbers,
//! and a reader paging the log while writers commit sees every fact exactly once.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::future::join_all;
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::json;

use crate::support::{
    actor, conversation, created, events_page, sequence, task_checkpoint, wait_events, world,
};

async fn concurrent_task_checkpoints_all_commit_in_sequence(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let kinds = ["WORK_STARTED", "WORK_PAUSED", "WORK_COMPLETED"];
    let answers = join_all((0..50).map(|i| task_checkpoint(&svc, &w.task, kinds[i % 3]))).await;
    for r in &answers {
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let query = format!(
        "conversation_id={}&types=project_manager.task.checkpoint.created",
        w.conversation
    );
    let events = wait_events(&svc, &query, 50).await;
    let sequences: Vec<u64> = events.iter().map(sequence).collect();
    assert_eq!(
        sequences,
        (2..=51).collect::<Vec<_>>(),
        "contiguous, in log order"
    );
    let acknowledged: BTreeSet<String> = answers.iter().map(|r| r.id()).collect();
    let logged: BTreeSet<String> = events
        .iter()
        .map(|e| e["data"]["id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(acknowledged, logged);
    // 54 facts in all: a page without `limit` holds the default 50.
    wait_events(&svc, "", 54).await;
    let page = events_page(&svc, "").await;
    assert_eq!(page.json["items"].as_array().map(Vec::len), Some(50));
    svc.stop().await;
}

on_both_backends!(concurrent_task_checkpoints_all_commit_in_sequence);

const WRITERS: usize = 8;
const PER_WRITER: usize = 40;

/// Each writer adds `PER_WRITER` messages; returns the acknowledged ids.
async fn writer(svc: &TestService, conversation: &str, actor: &str, n: usize) -> Vec<String> {
    let path = format!("/v1/conversations/{conversation}/messages");
    let mut ids = Vec::with_capacity(PER_WRITER);
    for i in 0..PER_WRITER {
        let body = json!({"actor_id": actor, "content": format!("writer {n} message {i}")});
        ids.push(created(&svc.post(Some(ADMIN), &path, &body).await));
    }
    ids
}

/// Follows the log with small pages until it has seen `expected` messages; returns the
/// message ids in the order seen.
async fn reader(svc: &TestService, expected: usize) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < expected {
        assert!(
            Instant::now() < deadline,
            "reader saw {} of {expected}",
            seen.len()
        );
        let page = events_page(svc, &format!("cursor={cursor}&limit=7")).await;
        let items = page.json["items"].as_array().cloned().expect("items");
        cursor = page.json["next_cursor"]
            .as_str()
            .expect("next_cursor")
            .to_string();
        if items.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        seen.extend(
            items
                .iter()
                .filter(|e| e["type"] == "project_manager.message.added")
                .map(|e| e["data"]["id"].as_str().expect("id").to_string()),
        );
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_log_order_under_concurrent_writers() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc).await;
    let mut conversations = Vec::new();
    for _ in 0..WRITERS {
        conversations.push(conversation(&svc, &a).await);
    }
    let writers = join_all(
        conversations
            .iter()
            .enumerate()
            .map(|(n, c)| writer(&svc, c, &a, n)),
    );
    let (written, seen) = tokio::join!(writers, reader(&svc, WRITERS * PER_WRITER));
    let written: BTreeSet<String> = written.into_iter().flatten().collect();
    assert_eq!(written.len(), WRITERS * PER_WRITER);
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "the reader saw a fact twice");
    assert_eq!(
        unique, written,
        "the reader saw exactly the acknowledged facts"
    );
    // Nothing further shows up after the last acknowledged fact.
    let all = wait_events(&svc, "types=project_manager.message.added", written.len()).await;
    assert_eq!(all.len(), written.len());
    svc.stop().await;
}

/// Two replicas on one PostgreSQL database race on one task: every command still
/// succeeds (losers of the optimistic race are retried), and the task's stream is
/// contiguous — the group-commit path reports exactly the rows it skipped as conflicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_two_replicas_racing_on_one_task() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let a = TestService::start(&db, "").await;
    let b = TestService::start(&db, "").await;
    let w = world(&a).await;
    let answers = join_all((0..40).map(|i| {
        let svc = if i % 2 == 0 { &a } else { &b };
        task_checkpoint(svc, &w.task, "WORK_STARTED")
    }))
    .await;
    for r in &answers {
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let query = format!(
        "conversation_id={}&types=project_manager.task.checkpoint.created",
        w.conversation
    );
    let events = wait_events(&a, &query, 40).await;
    let sequences: Vec<u64> = events.iter().map(sequence).collect();
    assert_eq!(sequences, (2..=41).collect::<Vec<_>>());
    a.stop().await;
    b.stop().await;
}
