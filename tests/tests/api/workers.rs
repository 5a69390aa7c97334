//! Workers end to end (WORKERS.md): claim with its context, fenced commands and reports,
//! heartbeats, release, lease expiry with a moved clock, the claims limit, long-polling,
//! workers racing on one replica and on two, an interrupt racing a completion, and a
//! report sent right after a fenced message while the sagas lag.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Duration as Span;
use pm_application::clock::{Clock, ManualClock};
use pm_tests::{on_both_backends, Response, TestDb, TestService, ADMIN};
use project_manager::app::Hooks;
use serde_json::{json, Value};

use crate::documented::assert_answer;
use crate::reads::{message, post};
use crate::sagas::{actor, items, types, wait_for};
use crate::support::{config, post_with};

/// A service on `db` whose clock the test moves, with at most `max_claims` claims.
pub(crate) async fn start(db: &TestDb, clock: &Arc<ManualClock>, max_claims: u32) -> TestService {
    let hooks = Hooks {
        clock: Some(clock.clone() as Arc<dyn Clock>),
        ..Hooks::default()
    };
    let mut config = config(db);
    config.turn_max_claims = max_claims;
    TestService::start_with_hooks(config, hooks).await
}

/// A conversation of a human and an AI actor with one human message: its conversation
/// turn is dispatched. Answers (conversation, AI actor, message, turn id).
pub(crate) async fn dispatched(svc: &TestService) -> (String, String, String, String) {
    let human = actor(svc, "human", "Hana").await;
    let llm = actor(svc, "ai", "Lin").await;
    let c = post(
        svc,
        "/v1/conversations",
        json!({"actor_ids": [human, llm], "title": "Work"}),
    )
    .await;
    let m = message(svc, &c.id, &human, json!({"content": "please"})).await;
    let turns = items(
        svc,
        &format!("/v1/turns?conversation_id={}", c.id),
        &m.position,
    )
    .await;
    assert_eq!(turns[0]["state"], "dispatched", "{turns:?}");
    let turn = turns[0]["id"].as_str().expect("turn id").to_string();
    (c.id, llm, m.id, turn)
}

pub(crate) async fn claim(svc: &TestService, body: Value) -> Response {
    svc.post(Some(ADMIN), "/v1/turns/claim", &body).await
}

/// A turn claimed once the sagas dispatched one (the claim's `200`): long polls, up to a
/// minute in all — a loaded CI machine may take seconds to get a turn through the sagas.
pub(crate) async fn claimed_soon(svc: &TestService) -> Response {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let body = json!({"worker": "w-1", "wait_ms": 10_000, "lease_ms": 120_000});
        let r = claim(svc, body).await;
        if r.status != 204 || std::time::Instant::now() > deadline {
            assert_eq!(r.status, 200, "nothing claimable: {}", r.text);
            return r;
        }
    }
}

/// The `llm` principal reports one `search` call `a` on `turn`, fenced by `epoch`, in the
/// span `traceparent` (the turn's, which its claim handed out).
pub(crate) async fn report_traced(
    svc: &TestService,
    turn: &str,
    epoch: i64,
    traceparent: &str,
) -> Response {
    let fence = epoch.to_string();
    let r = post_with(
        svc,
        Some(pm_tests::LLM),
        &format!("/v1/turns/{turn}/tool-calls"),
        &json!({"calls": [{"call_id": "a", "tool_name": "search", "arguments": {"q": "x"}}]}),
        &[
            ("PM-Turn-Id", turn),
            ("PM-Turn-Epoch", fence.as_str()),
            ("traceparent", traceparent),
        ],
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    r
}

/// `POST` fenced by (`turn`, `epoch`).
pub(crate) async fn fenced(
    svc: &TestService,
    path: &str,
    body: Value,
    turn: &str,
    epoch: i64,
) -> Response {
    let epoch = epoch.to_string();
    let headers = [("PM-Turn-Id", turn), ("PM-Turn-Epoch", epoch.as_str())];
    post_with(svc, Some(ADMIN), path, &body, &headers).await
}

/// An AI message fenced by the claim.
async fn say(svc: &TestService, conv: &str, llm: &str, turn: &str, epoch: i64) -> Response {
    let body = json!({"actor_id": llm, "content": "on it"});
    let path = format!("/v1/conversations/{conv}/messages");
    fenced(svc, &path, body, turn, epoch).await
}

/// The claim's error report: the model failed.
async fn model_failed(svc: &TestService, turn: &str, epoch: i64) -> Response {
    let body = json!({"error_type": "model_error", "message": "the model failed"});
    fenced(svc, &format!("/v1/turns/{turn}/error"), body, turn, epoch).await
}

pub(crate) fn epoch(r: &Response) -> i64 {
    assert_eq!(r.status, 200, "{}", r.text);
    r.json["turn_epoch"].as_i64().expect("turn_epoch")
}

async fn messages(svc: &TestService, conv: &str) -> usize {
    types(svc, conv)
        .await
        .iter()
        .filter(|t| *t == "project_manager.message.added")
        .count()
}

async fn claim_fence_and_reports(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock, 3).await;
    let (conv, llm, msg, turn) = dispatched(&svc).await;

    let doc = svc.get(None, "/openapi.json").await.json;
    let c = claim(&svc, json!({"worker": "w-1", "lease_ms": 5000})).await;
    assert_answer(&doc, "post", "/v1/turns/claim", &c);
    let e1 = epoch(&c);
    assert_eq!(c.json["turn"]["id"], turn.as_str());
    assert_eq!(c.json["turn"]["state"], "streaming");
    assert_eq!(c.json["turn"]["lease"]["worker"], "w-1");
    assert_eq!(c.json["worker"], "w-1");
    assert_eq!(c.json["context"]["message"]["id"], msg.as_str());
    assert_eq!(c.json["context"]["conversation"]["id"], conv.as_str());
    assert_eq!(c.json["context"]["tool_calls"], json!([]));
    // The dispatch's epoch was 1: every claim is one more than any epoch before.
    assert_eq!(e1, 2);
    // Held: nothing else is claimable.
    let none = claim(&svc, json!({})).await;
    assert_eq!(none.status, 204);
    assert_answer(&doc, "post", "/v1/turns/claim", &none);

    // A fenced message belongs to the turn and says so.
    let said = say(&svc, &conv, &llm, &turn, e1).await;
    assert_eq!(said.status, 201, "{}", said.text);
    let log = crate::support::events(&svc, &format!("conversation_id={conv}")).await;
    let fact = log
        .iter()
        .find(|e| {
            e["type"] == "project_manager.message.added" && e["data"]["id"] == said.json["id"]
        })
        .expect("the fenced message is on the log");
    assert_eq!(
        (fact["turnid"].as_str(), fact["turnepoch"].as_i64()),
        (Some(turn.as_str()), Some(e1))
    );

    // Refusals write nothing.
    let before = messages(&svc, &conv).await;
    let stale = say(&svc, &conv, &llm, &turn, e1 - 1).await;
    assert_eq!(
        (stale.status, stale.code()),
        (409, "turn_fenced"),
        "{}",
        stale.text
    );
    assert_answer(&doc, "post", "/v1/conversations/{id}/messages", &stale);
    let never = say(&svc, &conv, &llm, &turn, e1 + 1).await;
    assert_eq!(
        (never.status, never.code()),
        (409, "turn_fenced"),
        "{}",
        never.text
    );
    let unknown = say(&svc, &conv, &llm, &uuid::Uuid::now_v7().to_string(), 1).await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (404, "turn_not_found"),
        "{}",
        unknown.text
    );
    let half = post_with(
        &svc,
        Some(ADMIN),
        &format!("/v1/conversations/{conv}/messages"),
        &json!({"actor_id": llm, "content": "x"}),
        &[("PM-Turn-Id", turn.as_str())],
    )
    .await;
    assert_eq!((half.status, half.code()), (400, "invalid_turn_fence"));
    assert_answer(&doc, "post", "/v1/conversations/{id}/messages", &half);
    let zero = say(&svc, &conv, &llm, &turn, 0).await;
    assert_eq!((zero.status, zero.code()), (400, "invalid_turn_fence"));
    assert_eq!(messages(&svc, &conv).await, before);

    // Usage adds up; a heartbeat moves the lease and writes nothing.
    let path = |what: &str| format!("/v1/turns/{turn}/{what}");
    let used = fenced(
        &svc,
        &path("usage"),
        json!({"input_tokens": 10, "output_tokens": 3}),
        &turn,
        e1,
    )
    .await;
    assert_eq!(used.status, 200, "{}", used.text);
    let used = fenced(
        &svc,
        &path("usage"),
        json!({"input_tokens": 5, "output_tokens": 2}),
        &turn,
        e1,
    )
    .await;
    assert_eq!(
        (
            used.json["input_tokens"].as_u64(),
            used.json["output_tokens"].as_u64()
        ),
        (Some(15), Some(5))
    );
    assert_answer(&doc, "post", "/v1/turns/{id}/usage", &used);
    let log_len = types(&svc, &conv).await.len();
    let hb = fenced(
        &svc,
        &path("heartbeat"),
        json!({"lease_ms": 60000}),
        &turn,
        e1,
    )
    .await;
    assert_eq!(hb.status, 200, "{}", hb.text);
    assert_eq!(hb.json["turn_epoch"], e1);
    assert_answer(&doc, "post", "/v1/turns/{id}/heartbeat", &hb);
    assert_eq!(
        types(&svc, &conv).await.len(),
        log_len,
        "a heartbeat writes no event"
    );
    let row = wait_for(&svc, &format!("/v1/turns/{turn}"), |t| {
        !t["lease"].is_null()
    })
    .await;
    assert_eq!(
        row["lease"]["lease_expires_at"],
        hb.json["lease_expires_at"]
    );
    let stale_hb = fenced(&svc, &path("heartbeat"), json!({}), &turn, e1 - 1).await;
    assert_eq!((stale_hb.status, stale_hb.code()), (409, "turn_fenced"));
    assert_answer(&doc, "post", "/v1/turns/{id}/heartbeat", &stale_hb);

    // Released: claimable again under a higher epoch; the old claim is fenced off.
    let released = fenced(
        &svc,
        &path("release"),
        json!({"reason": "shutting down"}),
        &turn,
        e1,
    )
    .await;
    assert_eq!(released.status, 200, "{}", released.text);
    assert!(released.json["lease"].is_null(), "{}", released.text);
    assert_answer(&doc, "post", "/v1/turns/{id}/release", &released);
    let c2 = claim(&svc, json!({"worker": "w-2"})).await;
    let e2 = epoch(&c2);
    assert_eq!(e2, e1 + 1);
    assert_eq!(say(&svc, &conv, &llm, &turn, e1).await.status, 409);

    // A fenced command keeps its Idempotency-Key: replayed under the same claim, another
    // request under another claim.
    let keyed = |epoch: i64| {
        let epoch = epoch.to_string();
        let svc = &svc;
        let (conv, llm, turn) = (conv.clone(), llm.clone(), turn.clone());
        async move {
            post_with(
                svc,
                Some(ADMIN),
                &format!("/v1/conversations/{conv}/messages"),
                &json!({"actor_id": llm, "content": "keyed"}),
                &[
                    ("PM-Turn-Id", turn.as_str()),
                    ("PM-Turn-Epoch", epoch.as_str()),
                    ("Idempotency-Key", "fenced-key-1"),
                ],
            )
            .await
        }
    };
    let first = keyed(e2).await;
    assert_eq!(first.status, 201, "{}", first.text);
    let again = keyed(e2).await;
    assert_eq!(
        (again.status, again.id()),
        (201, first.id()),
        "{}",
        again.text
    );
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let other = keyed(e1).await;
    assert_eq!(
        (other.status, other.code()),
        (422, "idempotency_key_reused"),
        "{}",
        other.text
    );

    // A fenced checkpoint completes the turn with the reported usage.
    let done = fenced(
        &svc,
        &format!("/v1/conversations/{conv}/checkpoints"),
        json!({"checkpoint_type": "NEED_INFORMATION", "summary": "which one?"}),
        &turn,
        e2,
    )
    .await;
    assert_eq!(done.status, 201, "{}", done.text);
    let row = wait_for(&svc, &format!("/v1/turns/{turn}"), |t| {
        t["state"] == "completed"
    })
    .await;
    assert!(row["lease"].is_null());
    let log = crate::support::events(&svc, &format!("conversation_id={conv}")).await;
    let completed = log
        .iter()
        .find(|e| e["type"] == "turn.completed")
        .expect("completed");
    assert_eq!(
        completed["data"]["usage"]["input_tokens"], 15,
        "{completed}"
    );
    // Ended: fenced commands and the interrupt are refused.
    let late = say(&svc, &conv, &llm, &turn, e2).await;
    assert_eq!((late.status, late.code()), (409, "turn_fenced"));
    let i = svc.post(Some(ADMIN), &path("interrupt"), &json!({})).await;
    assert_eq!((i.status, i.code()), (409, "turn_transition_not_allowed"));
    assert_answer(&doc, "post", "/v1/turns/{id}/interrupt", &i);
    let anomalies = items(&svc, &format!("/v1/anomalies?conversation_id={conv}"), "0").await;
    assert!(anomalies.is_empty(), "{anomalies:?}");
    svc.stop().await;
}

async fn lease_expiry_and_claims_limit(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock, 2).await;
    let (conv, llm, _, turn) = dispatched(&svc).await;
    let e1 = epoch(&claim(&svc, json!({"worker": "dies", "lease_ms": 1000})).await);
    clock.advance(Span::milliseconds(1500));
    // Fenced at once (the store checks the lease's time), then expired by the scheduler.
    let late = say(&svc, &conv, &llm, &turn, e1).await;
    assert_eq!(
        (late.status, late.code()),
        (409, "turn_fenced"),
        "{}",
        late.text
    );
    let started = Instant::now();
    wait_for(&svc, &format!("/v1/turns/{turn}"), |t| t["lease"].is_null()).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "expired within a second or so"
    );
    let e2 = epoch(&claim(&svc, json!({"worker": "finisher", "lease_ms": 1000})).await);
    assert_eq!(e2, e1 + 1);
    assert_eq!(say(&svc, &conv, &llm, &turn, e1).await.status, 409);
    // The second expiry is the last the limit allows: the turn ends in error.
    clock.advance(Span::milliseconds(1500));
    let row = wait_for(&svc, &format!("/v1/turns/{turn}"), |t| {
        t["state"] == "error"
    })
    .await;
    assert_eq!(row["deliverable_reason"], "lease_expired");
    let log = types(&svc, &conv).await;
    assert_eq!(
        log.iter().filter(|t| *t == "turn.lease_expired").count(),
        2,
        "{log:?}"
    );
    assert_eq!(
        log.iter().filter(|t| *t == "turn.error").count(),
        1,
        "{log:?}"
    );
    assert_eq!(claim(&svc, json!({})).await.status, 204);
    svc.stop().await;
}

async fn long_poll_and_error_report(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = Arc::new(start(&db, &clock, 3).await);
    let waiting = {
        let svc = svc.clone();
        tokio::spawn(async move {
            let r = claim(&svc, json!({"wait_ms": 10000, "kind": "conversation"})).await;
            (r, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let posted = Instant::now();
    let (conv, _, _, turn) = dispatched(&svc).await;
    let (c, answered) = waiting.await.expect("claimant");
    let e = epoch(&c);
    assert_eq!(c.json["turn"]["id"], turn.as_str());
    assert!(
        answered - posted < Duration::from_secs(3),
        "long-poll answered after the dispatch"
    );
    // An empty long-poll waits its time, then 204.
    let t = Instant::now();
    assert_eq!(claim(&svc, json!({"wait_ms": 300})).await.status, 204);
    assert!(t.elapsed() >= Duration::from_millis(300));

    let r = model_failed(&svc, &turn, e).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (
            r.json["state"].as_str(),
            r.json["deliverable_reason"].as_str()
        ),
        (Some("error"), Some("stream_error"))
    );
    // Below the error threshold the conversation shows the failure (FCMP flow 1), not
    // `running` with nothing running; the next human message continues it.
    let s = wait_for(&svc, &format!("/v1/sessions/{conv}"), |s| {
        s["consecutive_errors"] == 1
    })
    .await;
    assert_eq!(
        (s["state"].as_str(), s["conversation_state"].as_str()),
        (Some("active"), Some("failed")),
        "{s}"
    );
    let bad = fenced(
        &svc,
        &format!("/v1/turns/{turn}/error"),
        json!({"error_type": "x"}),
        &turn,
        e,
    )
    .await;
    assert_eq!(
        (bad.status, bad.code()),
        (422, "validation_failed"),
        "{}",
        bad.text
    );
    Arc::into_inner(svc).expect("one owner").stop().await;
}

/// Claims until nothing is left; answers (turn, epoch) per claim.
async fn drain(svc: Arc<TestService>, worker: String) -> Vec<(String, i64)> {
    let mut got = Vec::new();
    loop {
        let r = claim(&svc, json!({"worker": worker, "wait_ms": 300})).await;
        match r.status {
            200 => got.push((
                r.json["turn"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                r.json["turn_epoch"].as_i64().unwrap_or_default(),
            )),
            204 => return got,
            other => panic!("claim answered {other}: {}", r.text),
        }
    }
}

async fn racing_workers_on_two_replicas(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let one = Arc::new(start(&db, &clock, 3).await);
    let two = Arc::new(start(&db, &clock, 3).await);
    let mut turns = Vec::new();
    for _ in 0..30 {
        turns.push(dispatched(&one).await.3);
    }
    let mut workers = Vec::new();
    for w in 0..8 {
        let svc = if w % 2 == 0 { one.clone() } else { two.clone() };
        workers.push(tokio::spawn(drain(svc, format!("w-{w}"))));
    }
    let mut claimed: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for w in workers {
        for (turn, epoch) in w.await.expect("worker") {
            claimed.entry(turn).or_default().push(epoch);
        }
    }
    let mut expected = turns.clone();
    expected.sort();
    assert_eq!(claimed.keys().cloned().collect::<Vec<_>>(), expected);
    assert!(
        claimed.values().all(|e| e.len() == 1),
        "each turn claimed once: {claimed:?}"
    );
    Arc::into_inner(one).expect("one owner").stop().await;
    Arc::into_inner(two).expect("one owner").stop().await;
}

async fn interrupt_races_completion(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = Arc::new(start(&db, &clock, 3).await);
    for _ in 0..6 {
        let (conv, _, _, turn) = dispatched(&svc).await;
        let e = epoch(&claim(&svc, json!({"conversation_id": conv})).await);
        let complete = {
            let (svc, conv, turn) = (svc.clone(), conv.clone(), turn.clone());
            tokio::spawn(async move {
                fenced(
                    &svc,
                    &format!("/v1/conversations/{conv}/checkpoints"),
                    json!({"checkpoint_type": "BEGIN_WORK", "summary": "plan"}),
                    &turn,
                    e,
                )
                .await
            })
        };
        let interrupt = {
            let (svc, turn) = (svc.clone(), turn.clone());
            tokio::spawn(async move {
                svc.post(
                    Some(ADMIN),
                    &format!("/v1/turns/{turn}/interrupt"),
                    &json!({"reason": "stop"}),
                )
                .await
            })
        };
        let (c, i) = (
            complete.await.expect("complete"),
            interrupt.await.expect("interrupt"),
        );
        let won = [c.status == 201, i.status == 200];
        assert_eq!(
            won.iter().filter(|w| **w).count(),
            1,
            "{} / {}",
            c.text,
            i.text
        );
        let loser = if won[0] { &i } else { &c };
        assert_eq!(loser.status, 409, "{}", loser.text);
        let row = wait_for(&svc, &format!("/v1/turns/{turn}"), |t| {
            t["state"] == "completed" || t["state"] == "interrupted"
        })
        .await;
        assert_eq!(
            row["state"],
            if won[0] { "completed" } else { "interrupted" }
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let log = types(&svc, &conv).await;
        let terminal = log
            .iter()
            .filter(|t| ["turn.completed", "turn.interrupted", "turn.error"].contains(&t.as_str()))
            .count();
        assert_eq!(terminal, 1, "{log:?}");
    }
    Arc::into_inner(svc).expect("one owner").stop().await;
}

async fn budget_suspension_and_replenishment(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let hooks = Hooks {
        clock: Some(clock.clone() as Arc<dyn Clock>),
        ..Hooks::default()
    };
    let mut config = config(&db);
    config.session_token_budget = Some(100);
    let svc = TestService::start_with_hooks(config, hooks).await;
    let (conv, _, _, turn) = dispatched(&svc).await;
    let e = epoch(&claim(&svc, json!({})).await);
    let usage = format!("/v1/turns/{turn}/usage");
    let r = fenced(
        &svc,
        &usage,
        json!({"input_tokens": 60, "output_tokens": 30}),
        &turn,
        e,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let s = read_session(&svc, &conv).await;
    assert_eq!(
        (
            s["state"].as_str(),
            s["tokens_used"].as_u64(),
            s["token_budget"].as_u64()
        ),
        (Some("active"), Some(90), Some(100))
    );
    let r = fenced(
        &svc,
        &usage,
        json!({"input_tokens": 10, "output_tokens": 0}),
        &turn,
        e,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let s = wait_for(&svc, &format!("/v1/sessions/{conv}"), |s| {
        s["state"] == "suspended"
    })
    .await;
    assert_eq!(s["tokens_used"], 100);
    let log = crate::support::events(&svc, &format!("conversation_id={conv}")).await;
    let suspended = log
        .iter()
        .find(|e| e["type"] == "session.suspended")
        .expect("suspended");
    assert_eq!(suspended["data"]["reason"], "budget_exhausted");
    assert_eq!(
        suspended["data"]["budget_info"],
        json!({"tokens_used": 100, "token_budget": 100})
    );
    // The running turn may finish.
    let done = fenced(
        &svc,
        &format!("/v1/conversations/{conv}/checkpoints"),
        json!({"checkpoint_type": "BEGIN_WORK", "summary": "plan"}),
        &turn,
        e,
    )
    .await;
    assert_eq!(done.status, 201, "{}", done.text);
    wait_for(&svc, &format!("/v1/turns/{turn}"), |t| {
        t["state"] == "completed"
    })
    .await;
    // Neither a human message nor a resume lifts a budget suspension; nothing is dispatched.
    let agents = items(&svc, &format!("/v1/agents?conversation_id={conv}"), "0").await;
    assert_eq!(agents[0]["tokens_used"], 100, "{agents:?}");
    let human_id = first_human(&svc, &conv).await;
    let m = message(&svc, &conv, &human_id, json!({"content": "more"})).await;
    let s = read_session_at(&svc, &conv, &m.position).await;
    assert_eq!(s["state"], "suspended", "{s}");
    assert_eq!(claim(&svc, json!({})).await.status, 204);
    let resume = svc
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{conv}/resume"),
            &json!({}),
        )
        .await;
    assert_eq!(
        (resume.status, resume.code()),
        (409, "session_transition_not_allowed")
    );
    let zero = svc
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{conv}/budget"),
            &json!({"add_tokens": 0}),
        )
        .await;
    assert_eq!(zero.status, 422, "{}", zero.text);
    let added = svc
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{conv}/budget"),
            &json!({"add_tokens": 500}),
        )
        .await;
    assert_eq!(added.status, 200, "{}", added.text);
    assert_eq!(
        (
            added.json["state"].as_str(),
            added.json["token_budget"].as_u64()
        ),
        (Some("active"), Some(600))
    );
    let next = claim(&svc, json!({"wait_ms": 5000})).await;
    assert_eq!(next.status, 200, "{}", next.text);
    svc.stop().await;
}

async fn read_session(svc: &TestService, conv: &str) -> Value {
    svc.get(Some(ADMIN), &format!("/v1/sessions/{conv}"))
        .await
        .json
}

async fn read_session_at(svc: &TestService, conv: &str, min: &str) -> Value {
    crate::reads::read(svc, &format!("/v1/sessions/{conv}"), min).await
}

/// The human participant of `conv` (its first actor).
async fn first_human(svc: &TestService, conv: &str) -> String {
    let c = svc
        .get(Some(ADMIN), &format!("/v1/conversations/{conv}"))
        .await;
    c.json["actor_ids"][0]
        .as_str()
        .expect("an actor")
        .to_string()
}

/// A claim's body out of bounds is refused, naming the field, and claims nothing.
async fn claim_body_is_validated(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock, 3).await;
    let (_, _, _, turn) = dispatched(&svc).await;
    let long = "w".repeat(201);
    for (body, field) in [
        (json!({"wait_ms": 30001}), "wait_ms"),
        (json!({"lease_ms": 999}), "lease_ms"),
        (json!({"lease_ms": 600001}), "lease_ms"),
        (json!({"worker": " "}), "worker"),
        (json!({"worker": long}), "worker"),
        (json!({"worker": "w\u{0}"}), "worker"),
    ] {
        let r = claim(&svc, body.clone()).await;
        assert_eq!(
            (r.status, r.code()),
            (422, "validation_failed"),
            "{body}: {}",
            r.text
        );
        assert!(r.text.contains(field), "{body}: names {field}: {}", r.text);
    }
    let c = claim(&svc, json!({"worker": "w-1"})).await;
    assert_eq!(epoch(&c), 2, "the first claim: {}", c.text);
    assert_eq!(
        (
            c.json["turn"]["id"].as_str(),
            c.json["turn"]["claims"].as_i64()
        ),
        (Some(turn.as_str()), Some(1))
    );
    svc.stop().await;
}

on_both_backends!(
    claim_body_is_validated,
    claim_fence_and_reports,
    lease_expiry_and_claims_limit,
    long_poll_and_error_report,
    racing_workers_on_two_replicas,
    interrupt_races_completion,
    budget_suspension_and_replenishment,
);

/// A worker's message (`201`) and then its error report, sent while the sagas have not yet
/// reached the message (held back on PostgreSQL by a row lock on another conversation's
/// saga row, which the saga processor's next batch waits for): the report is decided only
/// once the sagas applied the message, so the message is the turn's output and its
/// deliverable — not an anomaly, as when the report overtook it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_waits_for_the_workers_earlier_message_postgres() {
    use sqlx::{Connection, PgConnection};
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock, 3).await;
    let (conv, llm, _, turn) = dispatched(&svc).await;
    let e = epoch(&claim(&svc, json!({"kind": "conversation"})).await);
    let (other, _, _, _) = dispatched(&svc).await;
    let seen = wait_for(&svc, &format!("/v1/conversations/{other}"), |c| {
        c["actor_ids"][0].is_string()
    })
    .await;
    let human = seen["actor_ids"][0]
        .as_str()
        .expect("the human")
        .to_string();

    // Hold the other conversation's saga row: the processor's batch of its next message
    // waits, and every later event (this worker's message) waits behind it.
    let mut conn = PgConnection::connect(&db.url).await.expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut conn)
        .await
        .expect("begin");
    sqlx::query("SELECT 1 FROM saga_conversations WHERE conversation_id = $1::uuid FOR UPDATE")
        .bind(&other)
        .execute(&mut conn)
        .await
        .expect("hold the row");
    message(
        &svc,
        &other,
        &human,
        json!({"content": "and another thing"}),
    )
    .await;
    let said = say(&svc, &conv, &llm, &turn, e).await;
    assert_eq!(said.status, 201, "{}", said.text);
    let said_id = said.json["id"].as_str().expect("message id").to_string();

    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        sqlx::query("COMMIT")
            .execute(&mut conn)
            .await
            .expect("release the row");
    });
    let started = Instant::now();
    let r = model_failed(&svc, &turn, e).await;
    let waited = started.elapsed();
    release.await.expect("released");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (r.json["state"].as_str(), r.json["deliverable"].as_str()),
        (Some("error"), Some(said_id.as_str())),
        "{}",
        r.text
    );
    assert!(
        !types(&svc, &conv).await.iter().any(|t| t == "saga.anomaly"),
        "the message became an anomaly"
    );
    assert!(
        waited >= Duration::from_millis(1000),
        "the report did not wait for the sagas ({waited:?})"
    );
    svc.stop().await;
}
