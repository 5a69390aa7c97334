//! Tool calls on the wire: a handle's report carries the fence and ends the claim (no
//! more heartbeats, no release, commands refused without a request), a failed report
//! keeps it; the per-call requests are keyed by turn and call (encoded), unfenced, and
//! retried as their replays allow; the executor runs a call once however often the lists
//! show it, and drops a result the service refuses as terminal.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pm_client::{
    codes, ApprovalNote, Error, Executor, ToolCall, ToolCallState, ToolResult, ToolStream, Uuid,
    Worker,
};
use serde_json::json;

use crate::client;
use crate::fake::{problem, Fake, Reply};
use crate::workers::{claimed, is, say, turn_view, wait_for, TURN};

/// A tool call view of [`TURN`] in `state`.
fn call_view(call_id: &str, state: &str) -> String {
    format!(
        r#"{{"call_id":"{call_id}","turn_id":"{TURN}","conversation_id":"0190a0b0-0000-7000-8000-000000000001","tool_name":"shell","arguments":{{"cmd":"ls"}},"state":"{state}","requires_approval":true,"policy_reason":"shell","approver":null,"timeout_ms":null,"result":null,"created_at":"2026-11-22T05:35:27.123456Z","updated_at":"2026-11-22T05:35:27.123456Z"}}"#
    )
}

#[tokio::test]
async fn a_report_of_tool_calls_ends_the_claim_and_its_heartbeat() {
    let fake = Fake::start(|_, seen| match seen.target.rsplit('/').next() {
        Some("claim") => claimed(),
        Some("heartbeat") => Reply::Answer(
            200,
            vec![],
            r#"{"turn_epoch":2,"lease_expires_at":"2026-11-22T05:36:27.123456Z"}"#.into(),
        ),
        _ => Reply::Answer(
            201,
            vec![("x-event-position", "41.3".into())],
            turn_view(false),
        ),
    })
    .await;
    let worker = Worker::builder(client(&fake.base), "w-1")
        .lease(Duration::from_secs(1))
        .build()
        .expect("worker");
    let turn = worker.next().await.expect("claimed").expect("a turn");
    wait_for(&fake, "heartbeat").await;
    // Nothing is sent for a batch the service would refuse; the claim stays held.
    let empty = turn.report_tool_calls(Vec::<ToolCall>::new()).await;
    assert!(matches!(empty, Err(Error::InvalidInput(_))), "{empty:?}");
    assert!(turn.check().is_ok());
    let call = ToolCall::new("c-1", "shell", json!({"cmd": "ls"})).requires_approval("shell");
    let reported = turn.report_tool_calls(call).await.expect("reported");
    assert_eq!(reported.position.as_ref().map(|p| p.as_str()), Some("41.3"));
    let seen = fake.seen();
    let report = seen
        .iter()
        .find(|s| is(s, "tool-calls"))
        .expect("the report");
    assert_eq!(report.method, "POST");
    assert_eq!(report.header("pm-turn-id"), Some(TURN));
    assert_eq!(report.header("pm-turn-epoch"), Some("2"));
    assert_eq!(report.header("idempotency-key"), None);
    assert_eq!(
        report.body,
        r#"{"calls":[{"call_id":"c-1","tool_name":"shell","arguments":{"cmd":"ls"},"requires_approval":true,"policy_reason":"shell"}]}"#
    );
    // The claim is over: no heartbeat, commands refused without a request, no release.
    let before = fake.seen().len();
    let refused = turn.add_message(say()).await.expect_err("ended");
    assert_eq!(refused.code(), Some(codes::TURN_FENCED));
    assert!(!turn.is_lost(), "ended by this worker, not lost");
    let again = turn
        .report_tool_calls(ToolCall::new("c-2", "shell", json!({})))
        .await
        .expect_err("ended");
    assert_eq!(again.code(), Some(codes::TURN_FENCED));
    tokio::time::sleep(Duration::from_millis(800)).await;
    drop(turn);
    assert_eq!(worker.shutdown().await, 0, "nothing to release");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(fake.seen().len(), before, "no request after the report");
}

#[tokio::test]
async fn a_failed_report_keeps_the_claim_and_its_heartbeat() {
    let fake = Fake::start(|_, seen| match seen.target.rsplit('/').next() {
        Some("claim") => claimed(),
        Some("heartbeat") => Reply::Answer(
            200,
            vec![],
            r#"{"turn_epoch":2,"lease_expires_at":"2026-11-22T05:36:27.123456Z"}"#.into(),
        ),
        _ => Reply::Answer(409, vec![], problem(409, "tool_call_exists")),
    })
    .await;
    let worker = Worker::builder(client(&fake.base), "w-1")
        .lease(Duration::from_secs(1))
        .build()
        .expect("worker");
    let turn = worker.next().await.expect("claimed").expect("a turn");
    let refused = turn
        .report_tool_calls(ToolCall::new("c-1", "shell", json!({})))
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Some(codes::TOOL_CALL_EXISTS));
    assert!(turn.check().is_ok(), "still held");
    let reported = fake.seen().len();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !fake.seen()[reported..].iter().any(|s| is(s, "heartbeat")) {
        assert!(Instant::now() < deadline, "the heartbeat did not resume");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(turn);
    wait_for(&fake, "release").await;
}

#[tokio::test]
async fn per_call_requests_are_keyed_by_turn_and_call_and_retried_as_replays_allow() {
    let fake = Fake::start(|n, seen| {
        let what = seen.target.rsplit('/').next().unwrap_or_default();
        match (n, what) {
            // The first progress and the first result meet a 503.
            (2 | 3, _) => Reply::Answer(503, vec![], problem(503, "service_unavailable")),
            (_, "approve") => Reply::Answer(200, vec![], call_view("a b/c", "executing")),
            (_, "deny") => {
                Reply::Answer(409, vec![], problem(409, "tool_call_not_awaiting_approval"))
            }
            _ => Reply::Answer(200, vec![], call_view("a b/c", "success")),
        }
    })
    .await;
    let c = client(&fake.base);
    let turn: Uuid = TURN.parse().expect("uuid");
    let approved = c
        .approve_tool_call(
            turn,
            "a b/c",
            &ApprovalNote::on_behalf_of(Uuid::from_u128(7)).with_comment("ok"),
        )
        .await
        .expect("approved");
    assert_eq!(approved.view.state, ToolCallState::Executing);
    let denied = c
        .deny_tool_call(turn, "a b/c", None, &ApprovalNote::default())
        .await
        .expect_err("409");
    assert_eq!(denied.code(), Some(codes::TOOL_CALL_NOT_AWAITING_APPROVAL));
    let progress = c
        .report_tool_progress(turn, "a b/c", ToolStream::Stderr, "oops\n")
        .await
        .expect_err("503");
    assert_eq!(progress.status(), Some(503), "a chunk is not sent twice");
    let result = ToolResult::success(json!({"ok": true}));
    let done = c
        .report_tool_result(turn, "a b/c", &result)
        .await
        .expect("after a retry");
    assert_eq!(done.view.state, ToolCallState::Success);
    let read = c.read().tool_call(turn, "a b/c").await.expect("the call");
    assert_eq!(read.call_id, "a b/c");
    // Nothing is sent for what the service would refuse.
    let empty = c
        .report_tool_progress(turn, "a b/c", ToolStream::Stdout, "")
        .await;
    assert!(matches!(empty, Err(Error::InvalidInput(_))));
    let mut timeout = ToolResult::error("x");
    timeout.status = pm_client::ToolStatus::Timeout;
    let refused = c.report_tool_result(turn, "a b/c", &timeout).await;
    assert!(matches!(refused, Err(Error::InvalidInput(_))));

    let seen = fake.seen();
    let base = format!("/v1/turns/{TURN}/tool-calls/a%20b%2Fc");
    let targets: Vec<&str> = seen.iter().map(|s| s.target.as_str()).collect();
    assert_eq!(
        targets,
        [
            format!("{base}/approve"),
            format!("{base}/deny"),
            format!("{base}/progress"),
            format!("{base}/result"),
            format!("{base}/result"),
            base.clone(),
        ]
    );
    assert!(seen.iter().all(|s| s.header("pm-turn-id").is_none()
        && s.header("pm-turn-epoch").is_none()
        && s.header("idempotency-key").is_none()));
    assert_eq!(
        seen[0].body,
        r#"{"on_behalf_of":"00000000-0000-0000-0000-000000000007","comment":"ok"}"#
    );
    assert_eq!(seen[1].body, "{}");
    assert_eq!(seen[2].body, r#"{"stream":"stderr","chunk":"oops\n"}"#);
    assert_eq!(seen[3].body, r#"{"status":"success","output":{"ok":true}}"#);
    assert_eq!(seen[3].body, seen[4].body, "the same result again");
}

#[tokio::test]
async fn the_executor_runs_a_call_once_and_drops_a_refused_result() {
    let fake = Fake::start(|_, seen| {
        if seen.target.starts_with("/v1/tool-calls") {
            // The list keeps showing the call as executing (it lags, or the result was
            // refused): it must not run again.
            let items = format!(
                "[{},{}]",
                call_view("run-me", "executing"),
                call_view("other", "executing").replace("\"shell\"", "\"search\"")
            );
            return Reply::Answer(
                200,
                vec![],
                format!(r#"{{"items":{items},"next_cursor":null}}"#),
            );
        }
        if seen.target.ends_with("/result") {
            return Reply::Answer(409, vec![], problem(409, "tool_call_terminal"));
        }
        Reply::Answer(200, vec![], call_view("run-me", "executing"))
    })
    .await;
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = Executor::builder(client(&fake.base))
        .tools(["shell"])
        .interval(Duration::from_millis(20))
        .build()
        .expect("executor");
    let running = tokio::spawn({
        let (executor, runs) = (executor.clone(), runs.clone());
        async move {
            executor
                .run(move |call, run| {
                    let runs = runs.clone();
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        run.stdout("hi\n").await.expect("progress");
                        Ok::<_, String>(json!({"ran": call.call_id}))
                    }
                })
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !running.is_finished(),
        "a refused result does not stop the loop"
    );
    let twice = executor.run(|_, _| async { ToolResult::error("x") }).await;
    assert!(
        matches!(twice, Err(Error::InvalidInput(_))),
        "one run at a time"
    );
    assert_eq!(executor.shutdown().await, 0);
    running.await.expect("joined").expect("a clean stop");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "run once, the other tool not at all"
    );
    let seen = fake.seen();
    let polls = seen
        .iter()
        .filter(|s| s.target.starts_with("/v1/tool-calls?"))
        .count();
    assert!(polls >= 5, "{polls} polls");
    assert!(seen.iter().any(|s| s.target.contains("state=executing")));
    let results: Vec<_> = seen
        .iter()
        .filter(|s| s.target.ends_with("/result"))
        .collect();
    assert_eq!(results.len(), 1, "a terminal refusal is not retried");
    assert_eq!(
        results[0].body,
        r#"{"status":"success","output":{"ran":"run-me"}}"#
    );
    let progress = seen
        .iter()
        .filter(|s| s.target.ends_with("/progress"))
        .count();
    assert_eq!(progress, 1);
    // A bad configuration fails at build.
    let bad = Executor::builder(client(&fake.base)).concurrency(0).build();
    assert!(matches!(bad, Err(Error::InvalidInput(_))));
}
