//! Tool calls end to end (WORKERS.md "Tools"): a claimed turn reports a batch and
//! suspends; approvals by different roles in either order, denials, progress and results
//! with the INV-TOOL-* refusals; each timeout with a moved clock; a restart and two
//! replicas while an approval is pending (its timeout fires once); an interrupt with calls
//! open; the turn resuming, claimable under a higher epoch with every call's result.

use std::sync::Arc;

use chrono::Duration as Span;
use pm_application::clock::{Clock, ManualClock};
use pm_tests::{all_tokens, on_both_backends, Response, TestDb, TestService, ADMIN, INGRESS, LLM};
use project_manager::app::Hooks;
use serde_json::{json, Value};

use crate::documented::assert_answer;
use crate::sagas::{items, types, wait_for};
use crate::support::config;
use crate::workers::{claim, dispatched, epoch, fenced};

/// A service on `db` with every role's token, whose clock the test moves.
pub(crate) async fn start(db: &TestDb, clock: &Arc<ManualClock>) -> TestService {
    let hooks = Hooks {
        clock: Some(clock.clone() as Arc<dyn Clock>),
        ..Hooks::default()
    };
    let mut config = config(db);
    config.auth_tokens = all_tokens();
    TestService::start_with_hooks(config, hooks).await
}

/// A call of a batch.
fn call(id: &str, approval: bool) -> Value {
    let mut call = json!({"call_id": id, "tool_name": "shell", "arguments": {"cmd": id}});
    if approval {
        call["requires_approval"] = json!(true);
        call["policy_reason"] = json!("runs a shell command");
    }
    call
}

/// The batch, reported by the `llm` principal (an approver never decides its own calls).
async fn report(svc: &TestService, turn: &str, epoch: i64, body: Value) -> Response {
    let epoch = epoch.to_string();
    let headers = [("PM-Turn-Id", turn), ("PM-Turn-Epoch", epoch.as_str())];
    let path = format!("/v1/turns/{turn}/tool-calls");
    crate::support::post_with(svc, Some(LLM), &path, &body, &headers).await
}

/// `POST …/tool-calls/{call}/{what}` with `token`.
pub(crate) async fn on_call(
    svc: &TestService,
    token: &str,
    turn: &str,
    call: &str,
    what: &str,
    body: Value,
) -> Response {
    let path = format!("/v1/turns/{turn}/tool-calls/{call}/{what}");
    svc.post(Some(token), &path, &body).await
}

fn count(types: &[String], name: &str) -> usize {
    types.iter().filter(|t| *t == name).count()
}

/// The turn's row once `done` holds for it.
async fn turn_when(svc: &TestService, turn: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_for(svc, &format!("/v1/turns/{turn}"), done).await
}

pub(crate) fn call_of<'v>(turn: &'v Value, id: &str) -> &'v Value {
    turn["tool_calls"]
        .as_array()
        .and_then(|calls| calls.iter().find(|c| c["call_id"] == id))
        .unwrap_or_else(|| panic!("no call {id} in {turn}"))
}

pub(crate) fn assert_refused(r: &Response, status: u16, code: &str) {
    assert_eq!((r.status, r.code()), (status, code), "{}", r.text);
}

async fn batch_approvals_and_resume(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock).await;
    let doc = svc.get(None, "/openapi.json").await.json;
    let (conv, _, _, turn) = dispatched(&svc).await;
    let e1 = epoch(&claim(&svc, json!({"worker": "w-1"})).await);

    // Bad batches change nothing.
    let empty = report(&svc, &turn, e1, json!({"calls": []})).await;
    assert_refused(&empty, 422, "validation_failed");
    assert_answer(&doc, "post", "/v1/turns/{id}/tool-calls", &empty);
    let twice = report(
        &svc,
        &turn,
        e1,
        json!({"calls": [call("a", false), call("a", true)]}),
    )
    .await;
    assert_refused(&twice, 422, "validation_failed");
    assert!(twice.text.contains("calls[1].call_id"), "{}", twice.text);
    let unfenced = svc
        .post(
            Some(ADMIN),
            &format!("/v1/turns/{turn}/tool-calls"),
            &json!({"calls": [call("a", false)]}),
        )
        .await;
    assert_refused(&unfenced, 400, "invalid_turn_fence");
    let stale = report(&svc, &turn, e1 - 1, json!({"calls": [call("a", false)]})).await;
    assert_refused(&stale, 409, "turn_fenced");

    // The batch: runes in order, the turn suspended, the lease ended.
    let batch = json!({"calls": [call("a", false), call("b", true), call("c", true)]});
    let r = report(&svc, &turn, e1, batch.clone()).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_answer(&doc, "post", "/v1/turns/{id}/tool-calls", &r);
    assert_eq!(r.json["state"], "tool_executing");
    assert!(r.json["lease"].is_null(), "{}", r.text);
    assert_eq!(call_of(&r.json, "a")["state"], "executing");
    assert_eq!(call_of(&r.json, "b")["state"], "awaiting_approval");
    assert_eq!(
        call_of(&r.json, "b")["policy_reason"],
        "runs a shell command"
    );
    let log = types(&svc, &conv).await;
    let tail: Vec<&str> = log.iter().rev().take(6).rev().map(String::as_str).collect();
    assert_eq!(
        tail,
        [
            "turn.tool_calls_received",
            "tool.call",
            "tool.call",
            "tool.approval_requested",
            "tool.call",
            "tool.approval_requested"
        ]
    );
    let agent = svc
        .get(
            Some(ADMIN),
            &format!(
                "/v1/agents/{}",
                r.json["agent_id"].as_str().unwrap_or_default()
            ),
        )
        .await;
    assert_eq!(agent.json["head_status"], "suspended", "{}", agent.text);
    // The worker's claim no longer holds the turn; the same batch again writes nothing.
    let hb = fenced(
        &svc,
        &format!("/v1/turns/{turn}/heartbeat"),
        json!({}),
        &turn,
        e1,
    )
    .await;
    assert_refused(&hb, 409, "turn_fenced");
    let again = report(&svc, &turn, e1, batch).await;
    assert_eq!(again.status, 200, "{}", again.text);
    let reused = report(
        &svc,
        &turn,
        e1,
        json!({"calls": [{"call_id": "a", "tool_name": "other", "arguments": {}}]}),
    )
    .await;
    assert_refused(&reused, 409, "tool_call_exists");
    assert_eq!(
        types(&svc, &conv).await.len(),
        log.len(),
        "refusals and replays write nothing"
    );
    assert_eq!(
        claim(&svc, json!({})).await.status,
        204,
        "suspended: not claimable"
    );

    // Approvers see what waits for them.
    let waiting = items(
        &svc,
        &format!("/v1/tool-calls?state=awaiting_approval&conversation_id={conv}"),
        "0",
    )
    .await;
    let mut ids: Vec<&str> = waiting
        .iter()
        .filter_map(|c| c["call_id"].as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["b", "c"]);
    let list = svc
        .get(Some(ADMIN), &format!("/v1/tool-calls?turn_id={turn}"))
        .await;
    assert_answer(&doc, "get", "/v1/tool-calls", &list);
    let bad_state = svc.get(Some(ADMIN), "/v1/tool-calls?state=nope").await;
    assert_refused(&bad_state, 400, "invalid_parameter");

    // INV-TOOL-APPROVAL-BEFORE-EXEC and the other refusals.
    let early = on_call(
        &svc,
        LLM,
        &turn,
        "b",
        "progress",
        json!({"stream": "stdout", "chunk": "x"}),
    )
    .await;
    assert_refused(&early, 409, "tool_call_not_executing");
    assert_answer(
        &doc,
        "post",
        "/v1/turns/{turn_id}/tool-calls/{call_id}/progress",
        &early,
    );
    let early = on_call(
        &svc,
        LLM,
        &turn,
        "c",
        "result",
        json!({"status": "success"}),
    )
    .await;
    assert_refused(&early, 409, "tool_call_not_executing");
    let not_waiting = on_call(&svc, ADMIN, &turn, "a", "approve", json!({})).await;
    assert_refused(&not_waiting, 409, "tool_call_not_awaiting_approval");
    let unknown = on_call(&svc, ADMIN, &turn, "zz", "approve", json!({})).await;
    assert_refused(&unknown, 404, "tool_call_not_found");
    let llm_approves = on_call(&svc, LLM, &turn, "b", "approve", json!({})).await;
    assert_refused(&llm_approves, 403, "self_approval_forbidden");
    let named = on_call(
        &svc,
        ADMIN,
        &turn,
        "b",
        "approve",
        json!({"approver": "bob"}),
    )
    .await;
    assert_refused(&named, 422, "validation_failed");
    let service_status = on_call(
        &svc,
        LLM,
        &turn,
        "a",
        "result",
        json!({"status": "timeout"}),
    )
    .await;
    assert_refused(&service_status, 422, "validation_failed");

    // Two approvals, the later call first, by different roles.
    let c = on_call(
        &svc,
        INGRESS,
        &turn,
        "c",
        "approve",
        json!({"comment": "checked the command"}),
    )
    .await;
    assert_eq!(c.status, 200, "{}", c.text);
    assert_answer(
        &doc,
        "post",
        "/v1/turns/{turn_id}/tool-calls/{call_id}/approve",
        &c,
    );
    assert_eq!(
        (c.json["state"].as_str(), c.json["approver"].as_str()),
        (Some("executing"), Some("ingress"))
    );
    assert_eq!(c.json["comment"], "checked the command");
    assert_eq!(c.json["reported_by"], "llm");
    let b = on_call(&svc, ADMIN, &turn, "b", "approve", json!({})).await;
    assert_eq!(
        (b.json["state"].as_str(), b.json["approver"].as_str()),
        (Some("executing"), Some("admin"))
    );
    let executing = items(
        &svc,
        &format!("/v1/tool-calls?state=executing&turn_id={turn}"),
        "0",
    )
    .await;
    assert_eq!(executing.len(), 3, "{executing:?}");

    // Progress and results; a replayed result only acknowledges, another is refused.
    let p = on_call(
        &svc,
        LLM,
        &turn,
        "a",
        "progress",
        json!({"stream": "stderr", "chunk": "warming up\n"}),
    )
    .await;
    assert_eq!(p.status, 200, "{}", p.text);
    let a = on_call(
        &svc,
        LLM,
        &turn,
        "a",
        "result",
        json!({"status": "success", "output": {"rows": 3}}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_answer(
        &doc,
        "post",
        "/v1/turns/{turn_id}/tool-calls/{call_id}/result",
        &a,
    );
    assert_eq!(a.json["result"]["output"], json!({"rows": 3}));
    let before = types(&svc, &conv).await.len();
    let replay = on_call(
        &svc,
        LLM,
        &turn,
        "a",
        "result",
        json!({"status": "success", "output": {"rows": 3}}),
    )
    .await;
    assert_eq!(replay.status, 200, "{}", replay.text);
    let other = on_call(
        &svc,
        LLM,
        &turn,
        "a",
        "result",
        json!({"status": "error", "error": "late"}),
    )
    .await;
    assert_refused(&other, 409, "tool_call_terminal");
    assert_eq!(types(&svc, &conv).await.len(), before);
    let one = svc
        .get(Some(ADMIN), &format!("/v1/turns/{turn}/tool-calls/a"))
        .await;
    assert_answer(
        &doc,
        "get",
        "/v1/turns/{turn_id}/tool-calls/{call_id}",
        &one,
    );
    assert_eq!(one.json["result"]["status"], "success");
    let b = on_call(
        &svc,
        LLM,
        &turn,
        "b",
        "result",
        json!({"status": "error", "error": "exit 2"}),
    )
    .await;
    assert_eq!(b.status, 200, "{}", b.text);
    let c = on_call(
        &svc,
        LLM,
        &turn,
        "c",
        "result",
        json!({"status": "success", "output": "ok"}),
    )
    .await;
    assert_eq!(c.status, 200, "{}", c.text);

    // The last result resumes the turn: claimable under a higher epoch, with every result.
    let row = turn_when(&svc, &turn, |t| t["state"] == "streaming").await;
    assert!(row["lease"].is_null(), "{row}");
    let c2 = claim(&svc, json!({"worker": "w-2"})).await;
    let e2 = epoch(&c2);
    assert!(e2 > e1, "{e2} > {e1}");
    let calls = c2.json["context"]["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let results: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["call_id"].as_str().unwrap_or(""),
                c["result"]["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        results,
        [("a", "success"), ("b", "error"), ("c", "success")]
    );
    let log = types(&svc, &conv).await;
    assert_eq!(count(&log, "turn.tools_finished"), 1, "{log:?}");
    assert_eq!(count(&log, "tool.result"), 3, "{log:?}");
    assert_eq!(count(&log, "tool.approved"), 2, "{log:?}");
    assert_eq!(count(&log, "tool.progress"), 1, "{log:?}");
    svc.stop().await;
}

async fn denial_and_each_timeout(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock).await;
    let (conv, _, _, turn) = dispatched(&svc).await;
    let e1 = epoch(&claim(&svc, json!({})).await);
    let mut quick = call("quick", false);
    quick["timeout_ms"] = json!(2000);
    let batch = json!({"calls": [quick, call("asks", true), call("no", true)]});
    assert_eq!(report(&svc, &turn, e1, batch).await.status, 201);

    let denied = on_call(
        &svc,
        INGRESS,
        &turn,
        "no",
        "deny",
        json!({"reason": "not on prod"}),
    )
    .await;
    assert_eq!(denied.status, 200, "{}", denied.text);
    assert_eq!(denied.json["state"], "denied");
    assert_eq!(denied.json["result"]["status"], "denied");
    assert_eq!(denied.json["result"]["reason"], "not on prod");
    // The call's own timeout_ms, then the approval timeout (PM_TOOL_APPROVAL_TIMEOUT_SECS).
    clock.advance(Span::milliseconds(2500));
    let row = turn_when(&svc, &turn, |t| call_of(t, "quick")["state"] == "timeout").await;
    assert_eq!(
        call_of(&row, "quick")["result"]["reason"],
        "execution_timeout"
    );
    assert_eq!(row["state"], "tool_executing");
    clock.advance(Span::seconds(300));
    let row = turn_when(&svc, &turn, |t| t["state"] == "streaming").await;
    assert_eq!(
        call_of(&row, "asks")["result"]["reason"],
        "approval_timeout"
    );

    // A second batch with a resume deadline: every call still open times out with it.
    let e2 = epoch(&claim(&svc, json!({})).await);
    let batch = json!({"calls": [call("d", false), call("e", true)], "resume_deadline_ms": 5000});
    assert_eq!(report(&svc, &turn, e2, batch).await.status, 201);
    clock.advance(Span::seconds(6));
    let row = turn_when(&svc, &turn, |t| t["state"] == "streaming").await;
    for id in ["d", "e"] {
        assert_eq!(call_of(&row, id)["result"]["status"], "timeout");
        assert_eq!(call_of(&row, id)["result"]["reason"], "resume_deadline");
    }
    let log = types(&svc, &conv).await;
    assert_eq!(count(&log, "tool.call"), 5, "{log:?}");
    assert_eq!(
        count(&log, "tool.result"),
        5,
        "one result per call: {log:?}"
    );
    assert_eq!(count(&log, "tool.denied"), 1, "{log:?}");
    assert_eq!(count(&log, "turn.tools_finished"), 2, "{log:?}");
    svc.stop().await;
}

async fn pending_approval_across_a_restart_and_two_replicas(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock).await;
    let (conv, _, _, turn) = dispatched(&svc).await;
    let e1 = epoch(&claim(&svc, json!({})).await);
    let batch = json!({"calls": [call("p", true)]});
    assert_eq!(report(&svc, &turn, e1, batch).await.status, 201);
    svc.stop().await;
    // Down while the approval timeout passes; back as two replicas.
    clock.advance(Span::seconds(400));
    let one = start(&db, &clock).await;
    let two = start(&db, &clock).await;
    let row = turn_when(&two, &turn, |t| t["state"] == "streaming").await;
    assert_eq!(call_of(&row, "p")["result"]["reason"], "approval_timeout");
    // Both replicas' schedulers have had their turn: still one result.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let log = types(&one, &conv).await;
    assert_eq!(count(&log, "tool.result"), 1, "{log:?}");
    assert_eq!(count(&log, "turn.tools_finished"), 1, "{log:?}");
    let anomalies = items(&one, &format!("/v1/anomalies?conversation_id={conv}"), "0").await;
    assert!(anomalies.is_empty(), "{anomalies:?}");
    one.stop().await;
    two.stop().await;
}

async fn interrupt_with_calls_open(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock).await;
    let (conv, _, _, turn) = dispatched(&svc).await;
    let e1 = epoch(&claim(&svc, json!({})).await);
    let batch = json!({"calls": [call("x", false), call("y", true), call("z", false)]});
    assert_eq!(report(&svc, &turn, e1, batch).await.status, 201);
    let z = on_call(
        &svc,
        LLM,
        &turn,
        "z",
        "result",
        json!({"status": "success"}),
    )
    .await;
    assert_eq!(z.status, 200, "{}", z.text);
    let i = svc
        .post(
            Some(ADMIN),
            &format!("/v1/turns/{turn}/interrupt"),
            &json!({"reason": "stop it"}),
        )
        .await;
    assert_eq!(i.status, 200, "{}", i.text);
    assert_eq!(i.json["state"], "interrupted");
    for id in ["x", "y"] {
        assert_eq!(call_of(&i.json, id)["result"]["status"], "cancelled");
        assert_eq!(call_of(&i.json, id)["result"]["reason"], "stop it");
    }
    assert_eq!(call_of(&i.json, "z")["result"]["status"], "success");
    let log = types(&svc, &conv).await;
    let at = |name: &str| log.iter().rposition(|t| t == name).unwrap_or(usize::MAX);
    assert!(
        at("tool.result") < at("turn.interrupted"),
        "cancelled first: {log:?}"
    );
    assert_eq!(count(&log, "tool.result"), 3, "{log:?}");
    let late = on_call(
        &svc,
        LLM,
        &turn,
        "x",
        "result",
        json!({"status": "success"}),
    )
    .await;
    assert_refused(&late, 409, "tool_call_terminal");
    let waiting = items(
        &svc,
        &format!("/v1/tool-calls?state=awaiting_approval&conversation_id={conv}"),
        "0",
    )
    .await;
    assert!(waiting.is_empty(), "{waiting:?}");
    svc.stop().await;
}

on_both_backends!(
    batch_approvals_and_resume,
    denial_and_each_timeout,
    pending_approval_across_a_restart_and_two_replicas,
    interrupt_with_calls_open,
);
