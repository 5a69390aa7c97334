//! Exactly-once projection: a batch that fails before its commit applies nothing and
//! does not move the cursor; once it succeeds every count equals the number of commands,
//! also after a restart on the same store and with two replicas on one PostgreSQL.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use project_manager::app::Hooks;
use serde_json::{json, Value};

use crate::reads::{
    actor, all_items, caught_up, checkpoint, conversation, get, message, processors, read,
    read_model, task, task_checkpoint, Posted,
};
use crate::support::{config, post_with, wait_events};

/// The counts the read side shows for conversation `c` and task `t`.
async fn counts(svc: &TestService, c: &str, t: &str, last: &str) -> Value {
    let conv = read(svc, &format!("/v1/conversations/{c}"), last).await;
    let task = read(svc, &format!("/v1/tasks/{t}"), last).await;
    let messages = all_items(svc, &format!("/v1/conversations/{c}/messages"), 500, last).await;
    let stats = read(svc, "/v1/stats/tasks?group_by=organization", last).await;
    json!({
        "message_count": conv["message_count"],
        "messages": messages.len(),
        "checkpoint_count": conv["checkpoint_count"],
        "task_count": conv["task_count"],
        "task_counts": conv["task_counts"],
        "task_checkpoints": task["checkpoint_count"],
        "task_history": task["checkpoints"].as_array().map(Vec::len),
        "stats_total": stats["groups"][0]["total"],
    })
}

fn expected(messages: usize, checkpoints: usize, tasks: usize, task_checkpoints: usize) -> Value {
    let paused = usize::from(task_checkpoints > 0);
    json!({
        "message_count": messages, "messages": messages, "checkpoint_count": checkpoints,
        "task_count": tasks,
        "task_counts": {"NOT_STARTED": tasks - paused, "WORK_STARTED": 0, "WORK_COMPLETED": 0,
            "WORK_APPROVED": 0, "WORK_REJECTED": 0, "WORK_PAUSED": paused},
        "task_checkpoints": task_checkpoints, "task_history": task_checkpoints,
        "stats_total": tasks,
    })
}

/// Posts `n` messages, 2 checkpoints, 2 tasks and `k` WORK_PAUSED checkpoints on `t`.
async fn batch(svc: &TestService, c: &str, a: &str, t: &str, n: usize, k: usize) -> Vec<Posted> {
    let mut posted = Vec::new();
    for _ in 0..n {
        posted.push(message(svc, c, a, json!({})).await);
    }
    posted.push(checkpoint(svc, c, "NEED_INFORMATION").await);
    let begin = checkpoint(svc, c, "BEGIN_WORK").await;
    posted.push(task(svc, c, &begin.id, None).await);
    posted.push(task(svc, c, &begin.id, None).await);
    posted.push(begin);
    for _ in 0..k {
        posted.push(task_checkpoint(svc, t, "WORK_PAUSED").await);
    }
    posted
}

async fn failed_batches_apply_nothing_then_exactly_once(db: TestDb) {
    let switch = Arc::new(AtomicBool::new(false));
    let hooks = Hooks {
        fail_projection_before_commit: Some(switch.clone()),
        ..Hooks::default()
    };
    let svc = TestService::start_with_hooks(config(&db), hooks).await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({"organization": "acme"}))
        .await
        .id;
    let b = checkpoint(&svc, &c, "BEGIN_WORK").await.id;
    let t = task(&svc, &c, &b, None).await;
    assert_eq!(
        counts(&svc, &c, &t.id, &t.position).await,
        expected(0, 1, 1, 0)
    );
    // The sagas append runes after the task; once they have processed it, wait until the
    // read model has passed those too, so that nothing is left to move its cursor.
    let turns = format!("/v1/turns?task_id={}&min_position={}", t.id, t.position);
    assert_eq!(get(&svc, &turns, None).await.status, 200);
    let before = settled_read_model(&svc).await;

    switch.store(true, Ordering::SeqCst);
    let posted = batch(&svc, &c, &a, &t.id, 6, 4).await;
    // Wait until they are in the log and the runner has tried (and failed) to apply them.
    wait_events(&svc, "", 4 + posted.len()).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let report = processors(&svc).await;
        if report["this_replica"]["read_model"]["last_error"].is_string() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the runner never failed: {report}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let p = read_model(&svc).await;
    assert_eq!(
        p["position"], before,
        "the cursor moved while every batch failed: {p}"
    );
    let conv = get(&svc, &format!("/v1/conversations/{c}"), None)
        .await
        .json;
    assert_eq!(conv["message_count"], 0, "nothing committed: {conv}");

    switch.store(false, Ordering::SeqCst);
    let last = posted.last().expect("posted").position.clone();
    assert_eq!(counts(&svc, &c, &t.id, &last).await, expected(6, 3, 3, 4));
    svc.stop().await;

    // Restarted on the same store: nothing is counted again, new commands once.
    let svc = TestService::start(&db, "").await;
    assert_eq!(counts(&svc, &c, &t.id, &last).await, expected(6, 3, 3, 4));
    let posted = batch(&svc, &c, &a, &t.id, 3, 2).await;
    let last = posted.last().expect("posted").position.clone();
    assert_eq!(counts(&svc, &c, &t.id, &last).await, expected(9, 5, 5, 6));
    svc.stop().await;
}

/// Repeats that make no new fact (a derived id, an `Idempotency-Key`) count nothing.
async fn repeated_commands_are_counted_once(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await.id;
    let c = conversation(&svc, &[&a], json!({})).await.id;
    let path = format!("/v1/conversations/{c}/messages");
    let body = json!({"actor_id": a, "content": "hi", "external_identity": "slack:1"});
    let first = svc.post(Some(ADMIN), &path, &body).await;
    let again = svc.post(Some(ADMIN), &path, &body).await;
    assert_eq!((first.status, again.status), (201, 200), "{}", again.text);
    assert_eq!(first.id(), again.id());
    let path = format!("/v1/conversations/{c}/checkpoints");
    let body = json!({"checkpoint_type": "BEGIN_WORK", "summary": "s"});
    let key = [("idempotency-key", "key-1")];
    let first = post_with(&svc, Some(ADMIN), &path, &body, &key).await;
    let again = post_with(&svc, Some(ADMIN), &path, &body, &key).await;
    assert_eq!((first.status, again.status), (201, 201), "{}", again.text);
    assert_eq!(first.id(), again.id());
    let last = message(&svc, &c, &a, json!({})).await.position;
    let conv = read(&svc, &format!("/v1/conversations/{c}"), &last).await;
    assert_eq!(
        (&conv["message_count"], &conv["checkpoint_count"]),
        (&json!(2), &json!(1)),
        "{conv}"
    );
    svc.stop().await;
}

on_both_backends!(
    failed_batches_apply_nothing_then_exactly_once,
    repeated_commands_are_counted_once
);

async fn two_replicas_count_once(db: TestDb) {
    let replicas = [
        TestService::start(&db, "").await,
        TestService::start(&db, "").await,
    ];
    let a = actor(&replicas[0], "Ann").await.id;
    let c = conversation(&replicas[1], &[&a], json!({"organization": "acme"}))
        .await
        .id;
    let b = checkpoint(&replicas[0], &c, "BEGIN_WORK").await.id;
    let t = task(&replicas[1], &c, &b, None).await;
    let messages = (0..40).map(|i| message(&replicas[i % 2], &c, &a, json!({})));
    let paused = (0..20).map(|i| task_checkpoint(&replicas[i % 2], &t.id, "WORK_PAUSED"));
    let (m, p) = futures::join!(join_all(messages), join_all(paused));
    let positions: Vec<String> = m.iter().chain(&p).map(|x| x.position.clone()).collect();
    for svc in &replicas {
        caught_up(svc, &positions).await;
    }
    for svc in &replicas {
        let got = counts(svc, &c, &t.id, &t.position).await;
        assert_eq!(got, expected(40, 1, 1, 20));
    }
    let reports = [
        processors(&replicas[0]).await,
        processors(&replicas[1]).await,
    ];
    let owners: Vec<&Value> = reports
        .iter()
        .map(|r| {
            let rm = r["processors"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == "read_model"));
            &rm.expect("read_model")["lease_owner"]
        })
        .collect();
    assert!(
        owners[0].is_string() && owners[0] == owners[1],
        "one lease owner: {owners:?}"
    );
    let leaders: Vec<&Value> = reports
        .iter()
        .filter(|r| r["this_replica"]["read_model"]["leader"] == true)
        .collect();
    assert_eq!(leaders.len(), 1, "one leader: {reports:?}");
    assert_eq!(&leaders[0]["this_replica"]["owner"], owners[0]);
    for svc in replicas {
        svc.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_count_once_postgres() {
    if let Some(db) = TestDb::postgres().await {
        two_replicas_count_once(db).await;
    }
}

/// When the replica holding the projection's lease stops, another takes the lease over
/// and the read model goes on: facts written afterwards are counted, exactly once.
async fn the_lease_is_taken_over_when_its_holder_stops(db: TestDb) {
    let first = TestService::start(&db, "").await;
    let second = TestService::start(&db, "").await;
    let a = actor(&first, "Ann").await.id;
    let c = conversation(&first, &[&a], json!({})).await.id;
    let before = message(&first, &c, &a, json!({})).await;
    caught_up(&second, std::slice::from_ref(&before.position)).await;
    let holder = read_model(&first).await["lease_owner"].clone();
    let (leader, follower) = if processors(&first).await["this_replica"]["owner"] == holder {
        (first, second)
    } else {
        (second, first)
    };
    leader.stop().await;
    let after = message(&follower, &c, &a, json!({})).await;
    // The follower retries the lease every few seconds; min_position waits up to 5 s, so
    // poll a little longer than one lease period.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = get(
            &follower,
            &format!("/v1/conversations/{c}"),
            Some(&after.position),
        )
        .await;
        if r.status == 200 {
            assert_eq!(r.json["message_count"], 2, "{}", r.text);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no replica took the lease over: {}",
            r.text
        );
    }
    let now = read_model(&follower).await;
    assert_ne!(now["lease_owner"], holder, "{now}");
    follower.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_taken_over_when_its_holder_stops_postgres() {
    if let Some(db) = TestDb::postgres().await {
        the_lease_is_taken_over_when_its_holder_stops(db).await;
    }
}

/// A live owner of the projection (another replica's session holding its lock) is
/// respected; when that owner's session ends — as when its process dies — this replica
/// takes over within about a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_owner_is_respected_and_its_end_hands_over_within_a_second_postgres() {
    use pm_infrastructure::processor::ownership::lock_key;
    use sqlx::{Connection, PgConnection};
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    // Create the schema, then let another "replica" own the projection.
    TestService::start(&db, "").await.stop().await;
    let other = format!("{}?application_name=other-replica", db.url);
    let mut conn = PgConnection::connect(&other).await.expect("connect");
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(lock_key("read_model"))
        .execute(&mut conn)
        .await
        .expect("own the projection");
    let svc = TestService::start(&db, "").await;
    let a = actor(&svc, "Ann").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let report = processors(&svc).await;
    assert_eq!(
        report["this_replica"]["read_model"]["leader"], false,
        "{report}"
    );
    assert_eq!(read_model(&svc).await["lease_owner"], "other-replica");
    let r = get(&svc, &format!("/v1/actors/{}", a.id), None).await;
    assert_eq!(r.status, 404, "projected without owning: {}", r.text);
    let ended = Instant::now();
    conn.close().await.expect("the owner's session ends");
    loop {
        let r = get(&svc, &format!("/v1/actors/{}", a.id), None).await;
        if r.status == 200 {
            break;
        }
        assert!(
            ended.elapsed() < Duration::from_secs(2),
            "not taken over {:?} after the owner ended: {}",
            ended.elapsed(),
            r.text
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rm = read_model(&svc).await;
    assert_eq!(
        rm["lease_owner"],
        processors(&svc).await["this_replica"]["owner"],
        "{rm}"
    );
    svc.stop().await;
}

/// The read model's position once it has reached the log's head and stays there.
async fn settled_read_model(svc: &TestService) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let p = read_model(svc).await;
        if p["lag_events"] == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let again = read_model(svc).await;
            if again["position"] == p["position"] && again["lag_events"] == 0 {
                return p["position"].clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "the read model never settled: {p}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
