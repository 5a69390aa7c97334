//! A long conversation after `kill -9`: its saga machines are loaded from a snapshot and
//! the runes after it (issue 14). With snapshots taken every few runes, a conversation of
//! 30 queued human messages is snapshotted; the process is killed; a new one decides the
//! next message on the loaded machines — the turn is queued behind the others, the first
//! stays the one dispatched, nothing is an anomaly.

use std::time::Duration;

use pm_tests::http::Api;
use pm_tests::TestDb;
use serde_json::{json, Value};

use crate::support::{human_ai_conversation, poll, start};

async fn turns(api: &Api, conv: &str) -> Vec<Value> {
    let r = api
        .must_get(&format!("/v1/turns?conversation_id={conv}&limit=200"))
        .await;
    r.json["items"].as_array().cloned().unwrap_or_default()
}

/// Waits until `conv` has `n` turns (each human message becomes one).
async fn wait_turns(api: &Api, conv: &str, n: usize) -> Vec<Value> {
    poll(Duration::from_secs(20), || async move {
        let t = turns(api, conv).await;
        (t.len() == n).then_some(t)
    })
    .await
    .unwrap_or_else(|| panic!("{n} turns"))
}

fn states(turns: &[Value]) -> (usize, usize) {
    let count = |s: &str| turns.iter().filter(|t| t["state"] == s).count();
    (count("dispatched"), count("queued"))
}

async fn a_long_conversation_is_decided_on_from_its_snapshot_after_a_kill(db: TestDb) {
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("PM_SAGA_SNAPSHOT_RUNES", "10"),
    ];
    let mut svc = start(&env).await;
    let api = svc.api().clone();
    let (human, _, conv) = human_ai_conversation(&api, "A long one").await;
    for n in 0..30 {
        api.message(&conv, &human, &format!("message {n}")).await;
    }
    let before = wait_turns(&api, &conv, 30).await;
    assert_eq!(states(&before), (1, 29));
    // Snapshots are written beside the saga path: one may still be on its way.
    let written = poll(Duration::from_secs(20), || {
        let api = api.clone();
        async move {
            let n = api.counter("pm_saga_snapshots_written_total").await;
            (n >= 1.0).then_some(n)
        }
    })
    .await;
    assert!(
        written.is_some(),
        "a snapshot was written; the service's log:\n{}",
        svc.log_tail(40)
    );

    svc.kill9();
    let svc = start(&env).await;
    let api = svc.api().clone();
    api.message(&conv, &human, "after the kill").await;
    let after = wait_turns(&api, &conv, 31).await;
    assert_eq!(states(&after), (1, 30), "queued behind the others");
    let dispatched = |t: &[Value]| {
        t.iter()
            .find(|t| t["state"] == "dispatched")
            .map(|t| t["id"].clone())
    };
    assert_eq!(dispatched(&after), dispatched(&before));
    let anomalies = api
        .must_get(&format!("/v1/anomalies?conversation_id={conv}"))
        .await;
    assert_eq!(anomalies.json["items"], json!([]), "no anomaly");
    assert_eq!(api.counter("pm_saga_snapshots_loaded_total").await, 1.0);
    assert_eq!(api.counter("pm_saga_snapshots_unreadable_total").await, 0.0);
}

per_backend!(
    a_long_conversation_is_decided_on_from_its_snapshot_after_a_kill,
    sqlite: [],
    postgres: []
);
