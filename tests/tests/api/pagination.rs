//! Keyset pagination of every list (each item exactly once, `next_cursor` null on the last
//! page, default limit 50), `400 invalid_parameter` for bad cursors, limits, filters and
//! positions, and `404` with the entity's code for unknown ids.

use chrono::{Duration, Utc};
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::reads::{actor, all_items, checkpoint, conversation, get, ids, message, read, task};
use crate::support::assert_problem;

async fn pages_visit_every_item_once(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let mut convs = Vec::new();
    for _ in 0..7 {
        convs.push(conversation(&svc, &[&a], json!({})).await.id);
    }
    let c = &convs[0];
    let mut begin = String::new();
    for _ in 0..7 {
        begin = checkpoint(&svc, c, "BEGIN_WORK").await.id;
    }
    for _ in 0..7 {
        task(&svc, c, &begin, None).await;
    }
    // 55 messages, five to a `time`, so pages also break inside runs of equal keys.
    let base = Utc::now() - Duration::hours(1);
    let mut last = String::new();
    for i in 0..55 {
        let time = (base + Duration::seconds(10 - i / 5)).to_rfc3339();
        last = message(&svc, c, &a, json!({"time": time})).await.position;
    }
    let lists = [
        ("/v1/conversations".to_string(), 7),
        (format!("/v1/conversations/{c}/checkpoints"), 7),
        (format!("/v1/conversations/{c}/tasks"), 7),
        ("/v1/tasks".to_string(), 7),
        (format!("/v1/conversations/{c}/messages"), 55),
    ];
    for (path, n) in &lists {
        let full = all_items(&svc, path, 500, &last).await;
        assert_eq!(full.len(), *n, "{path}");
        let mut unique = ids(&full);
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), *n, "{path}: duplicates");
        for limit in [1, 2, 3, 7, 50] {
            let paged = all_items(&svc, path, limit, &last).await;
            assert_eq!(ids(&paged), ids(&full), "{path} paged by {limit}");
        }
    }
    // Without `limit`, a page holds 50.
    let path = format!("/v1/conversations/{c}/messages");
    let page = read(&svc, &path, &last).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(50), "{page}");
    assert!(page["next_cursor"].is_string(), "{page}");
    let times: Vec<&str> = page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["time"].as_str())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "time order");
    let page = read(&svc, "/v1/conversations", &last).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(7));
    assert_eq!(page["next_cursor"], Value::Null);
    svc.stop().await;
}

fn hex(raw: &str) -> String {
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

async fn bad_parameters_are_400(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({})).await.id;
    let lists = [
        "/v1/conversations".to_string(),
        format!("/v1/conversations/{c}/checkpoints"),
        format!("/v1/conversations/{c}/messages"),
        format!("/v1/conversations/{c}/tasks"),
        "/v1/tasks".to_string(),
    ];
    let common = [
        "limit=0".to_string(),
        "limit=501".into(),
        "limit=-1".into(),
        "limit=ten".into(),
        "cursor=zz".into(),
        "cursor=abc".into(),
        format!("cursor={}", hex("[1,2]")),
    ];
    let mut cases: Vec<String> = Vec::new();
    for list in &lists {
        cases.extend(common.iter().map(|q| format!("{list}?{q}")));
    }
    let bad = Uuid::new_v4().to_string()[..8].to_string();
    cases.extend([
        format!("/v1/conversations?actor_id={bad}"),
        "/v1/conversations?created_after=yesterday".into(),
        "/v1/conversations?created_before=2026-13-01T00:00:00Z".into(),
        // Parses, but no store keeps year 0 (PostgreSQL answered 500).
        "/v1/conversations?created_after=0000-01-01T00:00:00Z".into(),
        "/v1/conversations?created_before=0001-01-01T00:30:00%2B01:00".into(),
        // Hand-made cursors of the right list whose key or id no store can bind.
        format!(
            "/v1/tasks?cursor={}",
            hex(r#"{"l":"tasks","k":"0000-01-01T00:00:00Z","id":"00000000-0000-0000-0000-000000000000"}"#)
        ),
        "/v1/conversations?latest_checkpoint_type=DONE".into(),
        "/v1/tasks?status=DONE".into(),
        "/v1/tasks?status=work_started".into(),
        format!("/v1/tasks?assigned_to={bad}"),
        format!("/v1/tasks?conversation_id={bad}"),
        format!("/v1/tasks?checkpoint_id={bad}"),
        format!("/v1/conversations/{c}/messages?task_id={bad}"),
        format!("/v1/conversations/{c}/messages?actor_id={bad}"),
        "/v1/stats/tasks?group_by=status".into(),
    ]);
    for path in cases {
        let r = svc.get(Some(ADMIN), &path).await;
        assert_eq!(r.status, 400, "GET {path}: {}", r.text);
        assert_problem(&r, 400, "invalid_parameter");
        assert!(r.json["detail"].is_string(), "{path}");
    }
    // A position that is not in the log has its own code (API.md).
    let mut positions: Vec<String> = lists
        .iter()
        .flat_map(|list| {
            [
                format!("{list}?min_position=abc"),
                format!("{list}?min_position=-5"),
            ]
        })
        .collect();
    positions.extend([
        "/v1/stats/tasks?min_position=abc".to_string(),
        format!("/v1/actors/{a}?min_position=abc"),
        format!("/v1/conversations/{c}?min_position=1.2.3"),
    ]);
    for path in positions {
        let r = svc.get(Some(ADMIN), &path).await;
        assert_problem(&r, 400, "invalid_position");
    }
    svc.stop().await;
}

async fn unknown_ids_are_404(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await;
    for id in [Uuid::new_v4().to_string(), "nope".into(), "1".into()] {
        for (path, code) in [
            (format!("/v1/actors/{id}"), "actor_not_found"),
            (format!("/v1/conversations/{id}"), "conversation_not_found"),
            (
                format!("/v1/conversations/{id}/checkpoints"),
                "conversation_not_found",
            ),
            (
                format!("/v1/conversations/{id}/messages"),
                "conversation_not_found",
            ),
            (
                format!("/v1/conversations/{id}/tasks"),
                "conversation_not_found",
            ),
            (format!("/v1/tasks/{id}"), "task_not_found"),
        ] {
            let r = get(&svc, &path, Some(&a.position)).await;
            assert_problem(&r, 404, code);
        }
    }
    // An actor's id names no conversation or task.
    let r = get(&svc, &format!("/v1/conversations/{}", a.id), None).await;
    assert_problem(&r, 404, "conversation_not_found");
    let r = get(&svc, &format!("/v1/tasks/{}", a.id), None).await;
    assert_problem(&r, 404, "task_not_found");
    svc.stop().await;
}

/// A cursor is opaque: one tampered with, or taken from another list, is refused.
async fn foreign_cursors_are_400(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({})).await.id;
    let begin = checkpoint(&svc, &c, "BEGIN_WORK").await.id;
    task(&svc, &c, &begin, None).await;
    let last = checkpoint(&svc, &c, "BEGIN_WORK").await.position;
    // A real cursor of the checkpoints list (its key is a log position, not a time).
    let page = read(
        &svc,
        &format!("/v1/conversations/{c}/checkpoints?limit=1"),
        &last,
    )
    .await;
    let foreign = page["next_cursor"].as_str().expect("a cursor").to_string();
    let tampered = hex(r#"{"k":"garbage","id":"x"}"#);
    for cursor in [tampered, foreign] {
        for list in ["/v1/conversations", "/v1/tasks"] {
            let r = get(&svc, &format!("{list}?cursor={cursor}"), None).await;
            assert_eq!(r.status, 400, "GET {list}?cursor={cursor}: {}", r.text);
            assert_problem(&r, 400, "invalid_parameter");
        }
    }
    svc.stop().await;
}

on_both_backends!(
    foreign_cursors_are_400,
    pages_visit_every_item_once,
    bad_parameters_are_400,
    unknown_ids_are_404
);
