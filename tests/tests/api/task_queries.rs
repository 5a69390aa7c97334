//! Task queries: every `GET /v1/tasks` filter, and the task detail with its status,
//! `status_changed_at` and checkpoint history (with the task's event sequence).

use pm_tests::{on_both_backends, TestDb, TestService};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::reads::{
    actor, all_items, assert_includes, checkpoint, conversation, ids, read, task, task_checkpoint,
    Posted,
};
use crate::support::assert_problem;

async fn tasks_are_filtered(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let (a1, a2) = (actor(&svc, "a1").await.id, actor(&svc, "a2").await.id);
    let ca = conversation(&svc, &[&a1], json!({"organization": "acme"}))
        .await
        .id;
    let cb = conversation(&svc, &[&a1], json!({"organization": "globex"}))
        .await
        .id;
    let cc = conversation(&svc, &[&a2], json!({})).await.id;
    let ba = checkpoint(&svc, &ca, "BEGIN_WORK").await.id;
    let ba2 = checkpoint(&svc, &ca, "BEGIN_WORK").await.id;
    let bb = checkpoint(&svc, &cb, "BEGIN_WORK").await.id;
    let bc = checkpoint(&svc, &cc, "BEGIN_WORK").await.id;
    let t: Vec<Posted> = vec![
        task(&svc, &ca, &ba, Some(&a1)).await,
        task(&svc, &ca, &ba2, Some(&a2)).await,
        task(&svc, &cb, &bb, Some(&a1)).await,
        task(&svc, &cc, &bc, None).await,
        task(&svc, &cb, &bb, None).await,
    ];
    task_checkpoint(&svc, &t[0].id, "WORK_STARTED").await;
    task_checkpoint(&svc, &t[1].id, "WORK_STARTED").await;
    task_checkpoint(&svc, &t[1].id, "WORK_COMPLETED").await;
    task_checkpoint(&svc, &t[2].id, "WORK_REJECTED").await;
    let last = task_checkpoint(&svc, &t[4].id, "WORK_PAUSED")
        .await
        .position;

    let all = all_items(&svc, "/v1/tasks", 500, &last).await;
    assert_eq!(
        ids(&all),
        t.iter().map(|p| p.id.clone()).collect::<Vec<_>>()
    );
    for (item, p) in all.iter().zip(&t) {
        assert_includes(item, &p.json, &[]);
        let mut detail = read(&svc, &format!("/v1/tasks/{}", p.id), &last).await;
        detail.as_object_mut().map(|d| d.remove("checkpoints"));
        assert_eq!(
            item, &detail,
            "a list item is the task as its detail shows it"
        );
    }
    let cases: Vec<(String, Vec<usize>)> = vec![
        ("status=NOT_STARTED".into(), vec![3]),
        ("status=WORK_STARTED".into(), vec![0]),
        ("status=WORK_COMPLETED".into(), vec![1]),
        ("status=WORK_REJECTED".into(), vec![2]),
        ("status=WORK_PAUSED".into(), vec![4]),
        ("status=WORK_APPROVED".into(), vec![]),
        (format!("assigned_to={a1}"), vec![0, 2]),
        (format!("assigned_to={a2}"), vec![1]),
        (format!("assigned_to={}", Uuid::new_v4()), vec![]),
        (format!("conversation_id={ca}"), vec![0, 1]),
        (format!("conversation_id={cb}"), vec![2, 4]),
        (format!("checkpoint_id={ba}"), vec![0]),
        (format!("checkpoint_id={bb}"), vec![2, 4]),
        ("organization=acme".into(), vec![0, 1]),
        ("organization=globex".into(), vec![2, 4]),
        (format!("conversation_id={cb}&status=WORK_PAUSED"), vec![4]),
    ];
    for (query, want) in cases {
        let got = all_items(&svc, &format!("/v1/tasks?{query}"), 500, &last).await;
        let want: Vec<String> = want.iter().map(|&i| t[i].id.clone()).collect();
        assert_eq!(ids(&got), want, "GET /v1/tasks?{query}");
    }
    svc.stop().await;
}

async fn task_detail_has_status_and_history(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({"organization": "acme"}))
        .await
        .id;
    let b = checkpoint(&svc, &c, "BEGIN_WORK").await.id;
    let t = task(&svc, &c, &b, Some(&a)).await;
    let got = read(&svc, &format!("/v1/tasks/{}", t.id), &t.position).await;
    assert_includes(&got, &t.json, &[]);
    assert_eq!(got["status"], "NOT_STARTED");
    assert_eq!(got["status_changed_at"], Value::Null);
    assert_eq!(got["checkpoints"], json!([]));
    let mut posted = Vec::new();
    for kind in [
        "WORK_STARTED",
        "WORK_PAUSED",
        "WORK_STARTED",
        "WORK_COMPLETED",
    ] {
        posted.push(task_checkpoint(&svc, &t.id, kind).await);
    }
    let last = posted.last().expect("posted");
    let got = read(&svc, &format!("/v1/tasks/{}", t.id), &last.position).await;
    assert_eq!(got["status"], "WORK_COMPLETED");
    assert_eq!(got["status_changed_at"], last.json["created_at"]);
    let history = got["checkpoints"].as_array().expect("checkpoints");
    assert_eq!(history.len(), 4, "{got}");
    for (i, (h, p)) in history.iter().zip(&posted).enumerate() {
        assert_includes(h, &p.json, &[]);
        assert_eq!(h["sequence"], i + 2, "the task's own event sequence: {h}");
    }
    for id in [Uuid::new_v4().to_string(), "nope".into()] {
        let r = svc.get(None, &format!("/v1/tasks/{id}")).await;
        assert_problem(&r, 404, "task_not_found");
    }
    svc.stop().await;
}

on_both_backends!(tasks_are_filtered, task_detail_has_status_and_history,);
