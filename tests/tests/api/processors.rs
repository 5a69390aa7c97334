//! Operator endpoints and roles on the read side: analysts may read every query endpoint,
//! only admin may see processors, parked events and start rebuilds; `min_position` on a
//! stalled projection answers `503 projection_lagging` after about 5 s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pm_tests::{all_tokens, on_both_backends, TestDb, TestService, ADMIN, ANALYST, INGRESS, LLM};
use project_manager::app::Hooks;
use serde_json::{json, Value};

use crate::reads::{
    actor, checkpoint, conversation, get, message, read, read_model, rebuild, task,
    task_checkpoint, with_param,
};
use crate::support::{assert_problem, config};

async fn analysts_read_and_only_admin_operates(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({"organization": "acme"}))
        .await
        .id;
    let b = checkpoint(&svc, &c, "BEGIN_WORK").await.id;
    let t = task(&svc, &c, &b, Some(&a)).await.id;
    task_checkpoint(&svc, &t, "WORK_STARTED").await;
    let last = message(&svc, &c, &a, json!({"task_id": t})).await.position;
    let reads = [
        format!("/v1/actors/{a}"),
        "/v1/conversations".into(),
        format!("/v1/conversations?organization=acme&actor_id={a}"),
        format!("/v1/conversations/{c}"),
        format!("/v1/conversations/{c}/checkpoints"),
        format!("/v1/conversations/{c}/messages?task_id={t}"),
        format!("/v1/conversations/{c}/tasks"),
        "/v1/tasks?status=WORK_STARTED".into(),
        format!("/v1/tasks/{t}"),
        "/v1/stats/tasks?group_by=assigned_to".into(),
        "/v1/stats/tasks?group_by=organization".into(),
    ];
    for path in &reads {
        let r = svc
            .get(Some(ANALYST), &with_param(path, "min_position", &last))
            .await;
        assert_eq!(r.status, 200, "analyst GET {path}: {}", r.text);
    }

    let rebuild_path = "/v1/admin/projections/read_model/rebuild";
    for token in [ANALYST, INGRESS, LLM] {
        for path in [
            "/v1/admin/processors",
            "/v1/admin/processors/read_model/parked",
        ] {
            assert_problem(&svc.get(Some(token), path).await, 403, "forbidden");
        }
        let r = svc.post(Some(token), rebuild_path, &json!({})).await;
        assert_problem(&r, 403, "forbidden");
    }
    let r = svc.get(None, "/v1/admin/processors").await;
    assert_problem(&r, 401, "unauthorized");

    // Caught up with every command, and (once the sagas' runes stop) with the log's head.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let p = loop {
        let p = read_model(&svc).await;
        if p["lag_events"] == 0 || std::time::Instant::now() > deadline {
            break p;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    };
    let at = |v: &Value| v.as_str().and_then(|s| s.parse::<i64>().ok());
    assert!(at(&p["position"]) >= at(&json!(last)), "caught up: {p}");
    assert_eq!(p["lag_events"], 0, "{p}");
    assert_eq!(p["parked"], 0, "{p}");
    let r = svc
        .get(Some(ADMIN), "/v1/admin/processors/read_model/parked")
        .await;
    assert_eq!(
        (r.status, &r.json["items"]),
        (200, &json!([])),
        "{}",
        r.text
    );
    rebuild(&svc).await;
    let r = svc
        .post(
            Some(ADMIN),
            "/v1/admin/projections/nope/rebuild",
            &json!({}),
        )
        .await;
    assert_problem(&r, 404, "projection_not_found");
    // The rebuilt read model still answers the analyst.
    let r = svc
        .get(Some(ANALYST), &format!("/v1/tasks/{t}?min_position={last}"))
        .await;
    assert_eq!((r.status, &r.json["status"]), (200, &json!("WORK_STARTED")));
    svc.stop().await;
}

on_both_backends!(analysts_read_and_only_admin_operates);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_projection_answers_503_projection_lagging_sqlite() {
    let Some(db) = TestDb::sqlite().await else {
        return;
    };
    let switch = Arc::new(AtomicBool::new(false));
    let hooks = Hooks {
        fail_projection_before_commit: Some(switch.clone()),
        ..Hooks::default()
    };
    let svc = TestService::start_with_hooks(config(&db), hooks).await;
    let a = actor(&svc, "Ann").await;
    read(&svc, &format!("/v1/actors/{}", a.id), &a.position).await;
    switch.store(true, Ordering::SeqCst);
    let b = actor(&svc, "Bob").await;
    let path = format!("/v1/actors/{}", b.id);
    let started = Instant::now();
    let r = get(&svc, &path, Some(&b.position)).await;
    let waited = started.elapsed();
    assert_problem(&r, 503, "projection_lagging");
    assert!(
        waited >= Duration::from_millis(4500) && waited < Duration::from_secs(10),
        "answered after {waited:?}"
    );
    // Without min_position the query answers at once, from what is projected.
    assert_problem(&get(&svc, &path, None).await, 404, "actor_not_found");
    switch.store(false, Ordering::SeqCst);
    // The runner may be in its (at most 5 s) backoff: allow it one more wait.
    let mut r = get(&svc, &path, Some(&b.position)).await;
    if r.status == 503 {
        r = get(&svc, &path, Some(&b.position)).await;
    }
    assert_eq!((r.status, &r.json), (200, &b.json), "{}", r.text);
    svc.stop().await;
}
