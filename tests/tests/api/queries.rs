//! Queries over actors and conversations: each endpoint answers what the commands wrote
//! (read back with `min_position`), every `GET /v1/conversations` filter, the detail's
//! latest checkpoint and counts, checkpoints oldest first, messages in `time` order.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use pm_tests::{on_both_backends, TestDb, TestService};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::reads::{
    actor, all_items, assert_includes, checkpoint, conversation, ids, message, post, read, task,
    task_checkpoint, Posted,
};
use crate::support::assert_problem;

async fn actors_are_read_back(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let body = json!({"kind": "ai", "display_name": "Bot", "external_identity": "gh:bot"});
    for a in [
        post(&svc, "/v1/actors", body).await,
        actor(&svc, "Ann").await,
    ] {
        let got = read(&svc, &format!("/v1/actors/{}", a.id), &a.position).await;
        assert_eq!(got, a.json, "the actor as registered");
    }
    for id in [Uuid::new_v4().to_string(), "nope".into()] {
        let r = svc.get(None, &format!("/v1/actors/{id}")).await;
        assert_problem(&r, 404, "actor_not_found");
    }
    svc.stop().await;
}

async fn conversations_are_filtered(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let (a1, a2) = (actor(&svc, "a1").await.id, actor(&svc, "a2").await.id);
    let extras = [
        json!({"organization": "acme", "status": "open", "external_source": "slack", "external_id": "T1"}),
        json!({"organization": "acme", "status": "closed"}),
        json!({"organization": "globex", "status": "open", "external_source": "email", "external_id": "m1"}),
        json!({}),
    ];
    let actor_sets = [vec![&a1], vec![&a1, &a2], vec![&a2], vec![&a2]];
    let mut c: Vec<Posted> = Vec::new();
    for (extra, actors) in extras.into_iter().zip(&actor_sets) {
        let actors: Vec<&str> = actors.iter().map(|a| a.as_str()).collect();
        c.push(conversation(&svc, &actors, extra).await);
    }
    checkpoint(&svc, &c[0].id, "BEGIN_WORK").await;
    checkpoint(&svc, &c[0].id, "NEED_INFORMATION").await;
    checkpoint(&svc, &c[1].id, "BEGIN_WORK").await;
    let last = checkpoint(&svc, &c[2].id, "CLOSE_CONVERSATION")
        .await
        .position;

    let all = all_items(&svc, "/v1/conversations", 500, &last).await;
    let mut by_time: Vec<&Posted> = c.iter().collect();
    by_time.sort_by_key(|p| {
        (
            p.json["created_at"].as_str().map(str::to_string),
            p.id.clone(),
        )
    });
    let want: Vec<String> = by_time.iter().map(|p| p.id.clone()).collect();
    assert_eq!(ids(&all), want, "every conversation, oldest first");
    for item in &all {
        let detail = read(
            &svc,
            &format!(
                "/v1/conversations/{}",
                item["id"].as_str().unwrap_or_default()
            ),
            &last,
        )
        .await;
        assert_eq!(
            item, &detail,
            "a list item is the conversation as its detail shows it"
        );
    }

    // Bounds between two creation times, so inclusiveness does not matter.
    let created = |i: usize| {
        let raw = c[i].json["created_at"].as_str().expect("created_at");
        DateTime::parse_from_rfc3339(raw).expect("RFC 3339")
    };
    let between = |i: usize| {
        let (a, b) = (created(i - 1), created(i));
        assert!(
            a < b,
            "conversations {} and {i} were created at the same time",
            i - 1
        );
        (a + (b - a) / 2)
            .to_utc()
            .to_rfc3339_opts(SecondsFormat::Micros, true)
    };
    let random = Uuid::new_v4().to_string();
    let cases: Vec<(String, Vec<usize>)> = vec![
        ("organization=acme".into(), vec![0, 1]),
        ("organization=globex".into(), vec![2]),
        ("organization=initech".into(), vec![]),
        ("status=open".into(), vec![0, 2]),
        ("status=closed".into(), vec![1]),
        ("external_source=slack".into(), vec![0]),
        ("external_source=email".into(), vec![2]),
        (format!("actor_id={a1}"), vec![0, 1]),
        (format!("actor_id={a2}"), vec![1, 2, 3]),
        (format!("actor_id={random}"), vec![]),
        ("latest_checkpoint_type=NEED_INFORMATION".into(), vec![0]),
        ("latest_checkpoint_type=BEGIN_WORK".into(), vec![1]),
        ("latest_checkpoint_type=CLOSE_CONVERSATION".into(), vec![2]),
        ("latest_checkpoint_type=WORK_COMPLETED".into(), vec![]),
        (format!("created_after={}", between(1)), vec![1, 2, 3]),
        (format!("created_before={}", between(1)), vec![0]),
        (
            format!("created_after={}&created_before={}", between(1), between(3)),
            vec![1, 2],
        ),
        ("organization=acme&status=open".into(), vec![0]),
    ];
    for (query, want) in cases {
        let got = all_items(&svc, &format!("/v1/conversations?{query}"), 500, &last).await;
        let want: Vec<String> = want.iter().map(|&i| c[i].id.clone()).collect();
        assert_eq!(ids(&got), want, "GET /v1/conversations?{query}");
    }
    svc.stop().await;
}

async fn conversation_detail_has_latest_checkpoint_and_counts(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(
        &svc,
        &[&a],
        json!({"organization": "acme", "status": "open"}),
    )
    .await;
    let fresh = read(&svc, &format!("/v1/conversations/{}", c.id), &c.position).await;
    assert_includes(&fresh, &c.json, &[]);
    assert_eq!(fresh["latest_checkpoint"], Value::Null);
    for counter in ["checkpoint_count", "message_count", "task_count"] {
        assert_eq!(fresh[counter], 0, "{counter} of {fresh}");
    }
    assert!(fresh["task_counts"]
        .as_object()
        .expect("task_counts")
        .values()
        .all(|n| n == 0));

    checkpoint(&svc, &c.id, "CONVERSATION_STARTED").await;
    let begin = checkpoint(&svc, &c.id, "BEGIN_WORK").await.id;
    let tasks = [
        task(&svc, &c.id, &begin, None).await.id,
        task(&svc, &c.id, &begin, Some(&a)).await.id,
        task(&svc, &c.id, &begin, None).await.id,
    ];
    task_checkpoint(&svc, &tasks[0], "WORK_STARTED").await;
    task_checkpoint(&svc, &tasks[1], "WORK_STARTED").await;
    task_checkpoint(&svc, &tasks[1], "WORK_COMPLETED").await;
    message(&svc, &c.id, &a, json!({})).await;
    message(&svc, &c.id, &a, json!({"task_id": tasks[0]})).await;
    let latest = checkpoint(&svc, &c.id, "NEED_INFORMATION").await;
    let last = message(&svc, &c.id, &a, json!({})).await.position;

    let got = read(&svc, &format!("/v1/conversations/{}", c.id), &last).await;
    assert_includes(&got, &c.json, &["updated_at"]);
    let l = &latest.json;
    let want = json!({"id": latest.id, "checkpoint_type": "NEED_INFORMATION",
        "summary": l["summary"], "created_at": l["created_at"]});
    assert_eq!(got["latest_checkpoint"], want, "{got}");
    assert_eq!(got["checkpoint_count"], 3, "{got}");
    assert_eq!(got["message_count"], 3, "{got}");
    assert_eq!(got["task_count"], 3, "{got}");
    let counts = json!({"NOT_STARTED": 1, "WORK_STARTED": 1, "WORK_COMPLETED": 1,
        "WORK_APPROVED": 0, "WORK_REJECTED": 0, "WORK_PAUSED": 0});
    assert_eq!(got["task_counts"], counts, "{got}");

    let tasks_read = all_items(
        &svc,
        &format!("/v1/conversations/{}/tasks", c.id),
        500,
        &last,
    )
    .await;
    assert_eq!(ids(&tasks_read), tasks.to_vec(), "its tasks, oldest first");
    let statuses: Vec<&Value> = tasks_read.iter().map(|t| &t["status"]).collect();
    assert_eq!(
        statuses,
        ["WORK_STARTED", "WORK_COMPLETED", "NOT_STARTED"]
            .map(Value::from)
            .iter()
            .collect::<Vec<_>>()
    );
    svc.stop().await;
}

async fn checkpoints_are_oldest_first(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({})).await.id;
    let other = conversation(&svc, &[&a], json!({})).await.id;
    let mut posted = Vec::new();
    for kind in [
        "CONVERSATION_STARTED",
        "BEGIN_WORK",
        "NEED_INFORMATION",
        "BEGIN_WORK",
        "WORK_COMPLETED",
        "CLOSE_CONVERSATION",
    ] {
        posted.push(checkpoint(&svc, &c, kind).await);
        checkpoint(&svc, &other, "BEGIN_WORK").await;
    }
    let last = checkpoint(&svc, &other, "BEGIN_WORK").await.position;
    let got = all_items(
        &svc,
        &format!("/v1/conversations/{c}/checkpoints"),
        500,
        &last,
    )
    .await;
    assert_eq!(got.len(), posted.len(), "only its own checkpoints");
    for (item, p) in got.iter().zip(&posted) {
        assert_includes(item, &p.json, &[]);
    }
    svc.stop().await;
}

async fn messages_are_in_time_order_and_filtered(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let (a1, a2) = (actor(&svc, "a1").await.id, actor(&svc, "a2").await.id);
    let c = conversation(&svc, &[&a1, &a2], json!({})).await.id;
    let begin = checkpoint(&svc, &c, "BEGIN_WORK").await.id;
    let t = task(&svc, &c, &begin, None).await.id;
    let base = Utc::now() - Duration::hours(1);
    let at = |s: i64| (base + Duration::seconds(s)).to_rfc3339();
    // Posted out of time order; m3 has no `time` (now, the latest).
    let m0 = message(&svc, &c, &a1, json!({"time": at(30)})).await;
    let m1 = message(&svc, &c, &a1, json!({"time": at(10)})).await;
    let m2 = message(&svc, &c, &a2, json!({"time": at(20), "task_id": t})).await;
    let m3 = message(&svc, &c, &a1, json!({"task_id": t})).await;
    // Times with other offsets are ordered by the instant they name: 14:00+05:00 is
    // 09:00Z, before 10:00Z.
    let day = (base - Duration::days(1)).format("%Y-%m-%d");
    let m4 = message(&svc, &c, &a2, json!({"time": format!("{day}T10:00:00Z")})).await;
    let m5 = message(
        &svc,
        &c,
        &a2,
        json!({"time": format!("{day}T14:00:00+05:00")}),
    )
    .await;
    let last = m5.position.clone();
    let path = format!("/v1/conversations/{c}/messages");
    let got = all_items(&svc, &path, 500, &last).await;
    let order = [&m5, &m4, &m1, &m2, &m0, &m3];
    assert_eq!(ids(&got), order.map(|m| m.id.clone()), "time order");
    for (item, m) in got.iter().zip(order) {
        assert_includes(item, &m.json, &[]);
    }
    let cases = [
        (format!("task_id={t}"), vec![&m2, &m3]),
        (format!("actor_id={a1}"), vec![&m1, &m0, &m3]),
        (format!("actor_id={a2}"), vec![&m5, &m4, &m2]),
        (format!("actor_id={a1}&task_id={t}"), vec![&m3]),
        (format!("task_id={}", Uuid::new_v4()), vec![]),
    ];
    for (query, want) in cases {
        let got = all_items(&svc, &format!("{path}?{query}"), 500, &last).await;
        let want: Vec<String> = want.iter().map(|m| m.id.clone()).collect();
        assert_eq!(ids(&got), want, "messages?{query}");
    }
    svc.stop().await;
}

on_both_backends!(
    actors_are_read_back,
    conversations_are_filtered,
    conversation_detail_has_latest_checkpoint_and_counts,
    checkpoints_are_oldest_first,
    messages_are_in_time_order_and_filtered,
);
