//! Durable deadlines with a controlled clock: the auto-decide after `NEED_INFORMATION`,
//! the turn watchdog, a stale deadline ignored, deadlines that fell due while the service
//! was stopped (FCMP restart recovery), and two replicas firing one deadline once — plus
//! an operator's control on the replica that does not run the sagas.

use std::sync::Arc;
use std::time::Duration;

use chrono::Duration as Span;
use pm_application::clock::ManualClock;
use pm_infrastructure::db::Args;
use pm_infrastructure::Database;
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::{json, Value};

use crate::reads::{checkpoint, message, post, read};
use crate::sagas::{actor, items, start, types, wait_for};

/// A conversation of a human and an AI actor; answers (conversation, human, AI).
async fn conversation(svc: &TestService) -> (String, String, String) {
    let human = actor(svc, "human", "Hana").await;
    let llm = actor(svc, "ai", "Lin").await;
    let c = post(
        svc,
        "/v1/conversations",
        json!({"actor_ids": [human, llm], "title": "Deadlines"}),
    )
    .await;
    (c.id, human, llm)
}

/// A conversation that waits for the user; answers it and the wait's log position.
async fn waiting(svc: &TestService) -> (String, String) {
    let (conv, human, _) = conversation(svc).await;
    message(svc, &conv, &human, json!({"content": "help"})).await;
    let asked = checkpoint(svc, &conv, "NEED_INFORMATION").await;
    let s = read(svc, &format!("/v1/sessions/{conv}"), &asked.position).await;
    assert_eq!(s["conversation_state"], "waiting_user", "{s}");
    (conv, asked.position)
}

/// A conversation whose root agent has a dispatched turn; answers it and the turn.
async fn dispatched(svc: &TestService) -> (String, Value) {
    let (conv, human, _) = conversation(svc).await;
    let m = message(svc, &conv, &human, json!({"content": "help"})).await;
    let turns = items(
        svc,
        &format!("/v1/turns?conversation_id={conv}"),
        &m.position,
    )
    .await;
    assert_eq!(turns[0]["state"], "dispatched");
    (conv, turns[0].clone())
}

fn count(log: &[String], name: &str) -> usize {
    log.iter().filter(|t| *t == name).count()
}

async fn auto_decide_and_watchdog(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock).await;
    let (asking, _) = waiting(&svc).await;
    let (working, turn) = dispatched(&svc).await;
    // Not yet due: nothing happens.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        count(
            &types(&svc, &asking).await,
            "interaction.auto_decide.timeout"
        ),
        0
    );

    clock.advance(Span::seconds(301));
    let s = wait_for(&svc, &format!("/v1/sessions/{asking}"), |s| {
        s["conversation_state"] == "queued"
    })
    .await;
    let turns = items(&svc, &format!("/v1/turns?conversation_id={asking}"), "0").await;
    assert_eq!(turns.len(), 2, "the auto-decide turn: {turns:?}");
    assert_eq!(turns[1]["state"], "dispatched", "{s}");
    let log = types(&svc, &asking).await;
    assert_eq!(count(&log, "interaction.auto_decide.timeout"), 1, "{log:?}");
    // A deadline is the service's own doing (TRUST.md "The log says who").
    let fired = events_of(&svc, &asking, "interaction.auto_decide.timeout").await;
    assert_eq!(fired[0]["principal"], "system", "{fired:?}");

    // The watchdog has not fired yet (300 s of 600); past 600 s it has.
    let t = read(
        &svc,
        &format!("/v1/turns/{}", turn["id"].as_str().expect("id")),
        "0",
    )
    .await;
    assert_eq!(t["state"], "dispatched");
    clock.advance(Span::seconds(300));
    let t = wait_for(
        &svc,
        &format!("/v1/turns/{}", turn["id"].as_str().expect("id")),
        |t| t["state"] == "error",
    )
    .await;
    assert_eq!(t["deliverable_reason"], "watchdog");
    assert_eq!(t["terminal_rune"], "turn.error");
    let s = read(&svc, &format!("/v1/sessions/{working}"), "0").await;
    assert_eq!(s["consecutive_errors"], 1, "{s}");
    svc.stop().await;
}

async fn stale_deadline_is_ignored(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock).await;
    let (conv, _) = waiting(&svc).await;
    // The row's epoch falls behind the session's (as if it had been armed by an earlier
    // wait and never replaced): when due, it must do nothing.
    let store = Database::connect(&db.url, 2, Duration::from_secs(5))
        .await
        .expect("connect");
    let changed = store
        .execute(
            "UPDATE saga_deadlines SET epoch = epoch - 1 WHERE conversation_id = $1",
            Args::new().uuid(conv.parse().expect("a conversation id")),
        )
        .await
        .expect("update");
    assert_eq!(changed, 1);
    clock.advance(Span::seconds(301));
    let gone = async {
        loop {
            let rows = store
                .fetch_all(
                    "SELECT kind FROM saga_deadlines WHERE conversation_id = $1",
                    Args::new().uuid(conv.parse().expect("a conversation id")),
                )
                .await
                .expect("select");
            if rows.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), gone)
        .await
        .expect("the stale row is spent");
    let s = read(&svc, &format!("/v1/sessions/{conv}"), "0").await;
    assert_eq!(
        s["conversation_state"], "waiting_user",
        "still waiting: {s}"
    );
    let log = types(&svc, &conv).await;
    assert_eq!(count(&log, "interaction.auto_decide.timeout"), 0, "{log:?}");
    assert_eq!(count(&log, "saga.anomaly"), 0, "{log:?}");
    store.close().await;
    svc.stop().await;
}

async fn deadlines_due_while_stopped_fire_after_restart(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock).await;
    let (asking, _) = waiting(&svc).await;
    let (working, turn) = dispatched(&svc).await;
    svc.stop().await;

    // Down for longer than both timeouts.
    clock.advance(Span::seconds(700));
    let svc = start(&db, &clock).await;
    let s = wait_for(&svc, &format!("/v1/sessions/{asking}"), |s| {
        s["conversation_state"] == "queued"
    })
    .await;
    assert_eq!(s["state"], "active");
    let log = types(&svc, &asking).await;
    let preserved = log.iter().position(|t| t == "restart.preserve_waiting");
    let decided = log
        .iter()
        .position(|t| t == "interaction.auto_decide.timeout");
    assert!(
        matches!((preserved, decided), (Some(p), Some(d)) if p < d),
        "the wait is preserved, then the overdue timeout fires: {log:?}"
    );

    let s = wait_for(&svc, &format!("/v1/sessions/{working}"), |s| {
        s["conversation_state"] == "failed"
    })
    .await;
    assert_eq!(s["state"], "active", "{s}");
    let t = read(
        &svc,
        &format!("/v1/turns/{}", turn["id"].as_str().expect("id")),
        "0",
    )
    .await;
    assert_eq!(
        (t["state"].as_str(), t["deliverable_reason"].as_str()),
        (Some("error"), Some("session_resume_failed"))
    );
    let log = types(&svc, &working).await;
    for rune in ["restart.reconcile_failed", "conversation.failed"] {
        assert_eq!(count(&log, rune), 1, "{rune}: {log:?}");
    }
    let failed = events_of(&svc, &working, "conversation.failed").await;
    assert_eq!(failed[0]["data"]["error"], "SESSION_RESUME_FAILED");
    svc.stop().await;
}

async fn events_of(svc: &TestService, conversation: &str, kind: &str) -> Vec<Value> {
    crate::support::events(svc, &format!("conversation_id={conversation}&types={kind}")).await
}

async fn two_replicas_fire_a_deadline_once(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let one = start(&db, &clock).await;
    let two = start(&db, &clock).await;
    let (conv, _) = waiting(&one).await;
    let (other, _) = waiting(&two).await;
    clock.advance(Span::seconds(301));
    for (svc, c) in [(&one, &conv), (&two, &other)] {
        wait_for(svc, &format!("/v1/sessions/{c}"), |s| {
            s["conversation_state"] == "queued"
        })
        .await;
    }
    // Time for a second firing, if either replica would fire again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    for c in [&conv, &other] {
        let log = types(&one, c).await;
        assert_eq!(count(&log, "interaction.auto_decide.timeout"), 1, "{log:?}");
        assert_eq!(count(&log, "saga.anomaly"), 0, "{log:?}");
    }
    one.stop().await;
    two.stop().await;
}

async fn a_control_on_another_replica_is_seen_by_the_sagas(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let one = start(&db, &clock).await;
    let two = start(&db, &clock).await;
    let (conv, human, llm) = conversation(&one).await;
    message(&one, &conv, &human, json!({"content": "first"})).await;
    message(&one, &conv, &llm, json!({"content": "which one?"})).await;
    let asked = checkpoint(&one, &conv, "NEED_INFORMATION").await;
    let s = read(&one, &format!("/v1/sessions/{conv}"), &asked.position).await;
    assert_eq!(s["conversation_state"], "waiting_user", "{s}");
    // Whichever replica runs the sagas has this conversation in memory now; pause it
    // through both (one of them is the other replica), then write a fact.
    let paused = two
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{conv}/pause"),
            &json!({"reason": "ops"}),
        )
        .await;
    assert_eq!(paused.status, 200, "{}", paused.text);
    assert_eq!(paused.json["state"], "paused");
    let again = one
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{conv}/pause"),
            &json!({}),
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.text);
    assert_eq!(again.json["code"], "session_transition_not_allowed");
    // The user's reply queues a turn; the paused session does not dispatch it.
    let reply = message(&one, &conv, &human, json!({"content": "the second"})).await;
    let turns = items(
        &one,
        &format!("/v1/turns?conversation_id={conv}"),
        &reply.position,
    )
    .await;
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(
        turns[1]["state"], "queued",
        "nothing is dispatched while paused: {turns:?}"
    );
    let resumed = one
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{conv}/resume"),
            &json!({}),
        )
        .await;
    assert_eq!(resumed.status, 200, "{}", resumed.text);
    let p = resumed
        .header("x-event-position")
        .expect("position")
        .to_string();
    let turn = read(
        &two,
        &format!("/v1/turns/{}", turns[1]["id"].as_str().expect("id")),
        &p,
    )
    .await;
    assert_eq!(turn["state"], "dispatched", "resume dispatches: {turn}");
    let anomalies = items(&two, &format!("/v1/anomalies?conversation_id={conv}"), "0").await;
    assert!(anomalies.is_empty(), "{anomalies:?}");
    one.stop().await;
    two.stop().await;
}

on_both_backends!(
    auto_decide_and_watchdog,
    stale_deadline_is_ignored,
    deadlines_due_while_stopped_fire_after_restart,
    two_replicas_fire_a_deadline_once,
    a_control_on_another_replica_is_seen_by_the_sagas,
);
