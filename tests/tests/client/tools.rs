//! Tool calls through the client (WORKERS.md "Tools"): a worker's turn handle reports a
//! batch and its claim ends; the approver API sees and approves what waits for it; the
//! executor loop runs the executing calls, reporting progress and results; the turn
//! resumes and the next claim carries every call with its result. A denial; the
//! executor dropping the result of a call that ended meanwhile and going on; a stop that
//! abandons a running call.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use pm_client::{
    codes, ApprovalNote, Client, EventContent, EventQuery, Executor, ToolBatch, ToolCall,
    ToolCallQuery, ToolCallState, ToolCallView, ToolResult, ToolStatus, TurnState, Uuid,
};
use pm_tests::{on_both_backends, TestDb, ADMIN, INGRESS, LLM};
use serde_json::json;

use crate::support::{client, start};
use crate::workers::{actors, answer, dispatched, reply, worker};

/// The call `call_id` of `turn` once `done` holds for it (the read model trails writes).
async fn call_when(
    c: &Client,
    turn: Uuid,
    call_id: &str,
    done: impl Fn(&ToolCallView) -> bool,
) -> ToolCallView {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let call = c.read().tool_call(turn, call_id).await.expect("the call");
        if done(&call) {
            return call;
        }
        assert!(Instant::now() < deadline, "never done: {call:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn ids(calls: &[ToolCallView]) -> Vec<&str> {
    calls.iter().map(|c| c.call_id.as_str()).collect()
}

async fn calls_wait_for_approval_run_in_the_executor_and_resume_the_turn(db: TestDb) {
    let svc = start(&db).await;
    let (admin, llm, ingress) = (
        client(&svc, ADMIN),
        client(&svc, LLM),
        client(&svc, INGRESS),
    );
    let (human, ai) = actors(&admin).await;
    let (cid, _, turn_id) = dispatched(&admin, human, ai).await;

    // A claimed turn reports a batch: one call runs at once, one needs approval.
    let w = worker(&llm, "w-tools", 1500)
        .conversation_id(cid)
        .build()
        .expect("worker");
    let turn = w.next().await.expect("claim").expect("a turn");
    assert!(turn.tool_calls().is_empty(), "a first claim has no calls");
    let (fence, first_epoch) = (turn.fence(), turn.epoch());
    let batch = ToolBatch::new()
        .call(ToolCall::new(
            "search-1",
            "search",
            json!({"q": "login 500"}),
        ))
        .call(
            ToolCall::new("shell/1", "shell", json!({"cmd": "cargo test"}))
                .requires_approval("runs a shell command")
                .timeout(Duration::from_secs(120)),
        );
    let suspended = turn
        .report_tool_calls(batch.clone())
        .await
        .expect("reported");
    assert!(suspended.position.is_some(), "a new batch is written");
    let view = &suspended.view;
    assert_eq!(view.state, TurnState::ToolExecuting);
    assert!(view.lease.is_none(), "the claim's lease ended");
    assert_eq!(ids(&view.tool_calls), ["search-1", "shell/1"]);
    assert_eq!(view.tool_calls[0].state, ToolCallState::Executing);
    assert_eq!(view.tool_calls[1].state, ToolCallState::AwaitingApproval);
    assert_eq!(
        view.tool_calls[1].policy_reason.as_deref(),
        Some("runs a shell command")
    );
    assert_eq!(view.tool_calls[1].timeout_ms, Some(120_000));

    // The handle's claim is over: its commands fail at once, without a request, and the
    // heartbeat does not lose it (it stopped).
    let late = turn.add_message(reply(ai)).await.expect_err("ended");
    assert_eq!(late.code(), Some(codes::TURN_FENCED));
    assert!(
        late.to_string().contains("reported tool calls on"),
        "{late}"
    );
    tokio::time::sleep(Duration::from_millis(1700)).await;
    assert!(!turn.is_lost(), "no heartbeat was refused");
    turn.finish();
    // The same batch again only acknowledges; another call under a used id is refused.
    let again = llm
        .report_tool_calls(fence, batch)
        .await
        .expect("the same batch");
    assert!(again.position.is_none(), "nothing written");
    let reused = llm
        .report_tool_calls(fence, ToolCall::new("search-1", "other", json!({})))
        .await
        .expect_err("a used id");
    assert_eq!(reused.code(), Some(codes::TOOL_CALL_EXISTS));
    // Suspended: not claimable.
    let none = llm
        .claim(pm_client::ClaimRequest::new().conversation_id(cid))
        .await
        .expect("claim");
    assert!(none.is_none(), "{none:?}");

    // Reads: one call, lists by state and turn, page by page.
    let position = suspended.position.clone().expect("position");
    let read = admin.at(position);
    let shell = read.tool_call(turn_id, "shell/1").await.expect("the call");
    assert_eq!(
        (shell.tool_name.as_str(), shell.conversation_id),
        ("shell", cid)
    );
    let all: Vec<ToolCallView> = read
        .walk(ToolCallQuery::new().turn_id(turn_id).limit(1))
        .try_collect()
        .await
        .expect("every page");
    // One page each; calls of one batch share their time, so their order is the list's.
    let mut listed = ids(&all);
    listed.sort_unstable();
    assert_eq!(listed, ["search-1", "shell/1"]);
    let executing = read
        .tool_calls(
            &ToolCallQuery::new()
                .conversation_id(cid)
                .state(ToolCallState::Executing),
        )
        .await
        .expect("a page");
    assert_eq!(ids(&executing.items), ["search-1"]);
    let missing = read.tool_call(turn_id, "nope").await.expect_err("404");
    assert_eq!(missing.code(), Some(codes::TOOL_CALL_NOT_FOUND));

    // An executor runs what is executing — the approved call too, once approved.
    let seen = Arc::new(AtomicUsize::new(0));
    let executor = Executor::builder(llm.clone())
        .turn_id(turn_id)
        .interval(Duration::from_millis(50))
        .build()
        .expect("executor");
    let running = tokio::spawn({
        let (executor, seen) = (executor.clone(), seen.clone());
        async move {
            executor
                .run(move |call, run| {
                    let seen = seen.clone();
                    async move {
                        seen.fetch_add(1, Ordering::SeqCst);
                        run.stdout(&format!("running {}\n", call.tool_name))
                            .await
                            .expect("progress");
                        run.stderr("").await.expect("nothing to send");
                        ToolResult::success(json!({"ran": call.call_id, "args": call.arguments}))
                    }
                })
                .await
        }
    });
    let searched = call_when(&llm, turn_id, "search-1", |c| c.result.is_some()).await;
    let result = searched.result.clone().expect("a result");
    assert_eq!(
        (searched.state, result.status),
        (ToolCallState::Success, ToolStatus::Success)
    );
    assert_eq!(
        result.output,
        Some(json!({"ran": "search-1", "args": {"q": "login 500"}}))
    );

    // The approver sees the call waiting (once), approves it; a second approval is a
    // lost race, not an error.
    let approvals = ingress.approvals().conversation_id(cid);
    let pending = approvals.pending().await.expect("pending");
    assert_eq!(ids(&pending), ["shell/1"]);
    let mut waiting = approvals
        .clone()
        .interval(Duration::from_millis(50))
        .follow();
    let first = waiting.try_next().await.expect("a call").expect("waiting");
    assert_eq!(first.call_id, "shell/1");
    // The worker that reported the call never decides it.
    let refused = llm
        .approve_tool_call(turn_id, "shell/1", &ApprovalNote::default())
        .await;
    assert_eq!(
        refused.expect_err("the reporter may not approve").code(),
        Some(codes::SELF_APPROVAL_FORBIDDEN)
    );
    let note = ApprovalNote::default().with_comment("read the command");
    let approved = approvals
        .approve(&first, &note)
        .await
        .expect("approved")
        .expect("it waited");
    assert_eq!(approved.state, ToolCallState::Executing);
    // The approver is who is signed in, never a name the request chose.
    assert_eq!(approved.approver.as_deref(), Some("ingress"));
    assert_eq!(approved.comment.as_deref(), Some("read the command"));
    let twice = approvals
        .approve(&first, &ApprovalNote::default())
        .await
        .expect("an answer");
    assert!(twice.is_none(), "decided already: {twice:?}");

    let shell = call_when(&llm, turn_id, "shell/1", |c| c.result.is_some()).await;
    assert_eq!(shell.state, ToolCallState::Success);
    assert_eq!(seen.load(Ordering::SeqCst), 2, "each call ran once");
    // The same result again only acknowledges; another one is refused.
    let result = ToolResult::success(json!({"ran": "shell/1", "args": {"cmd": "cargo test"}}));
    let ack = llm
        .report_tool_result(turn_id, "shell/1", &result)
        .await
        .expect("acknowledged");
    assert!(ack.position.is_none());
    let other = llm
        .report_tool_result(turn_id, "shell/1", &ToolResult::error("late"))
        .await
        .expect_err("terminal");
    assert_eq!(other.code(), Some(codes::TOOL_CALL_TERMINAL));
    // The progress is on the log.
    let progress = admin
        .events(&EventQuery::new().with_type("tool.progress").limit(50))
        .await
        .expect("events");
    let chunks: Vec<String> = progress
        .items
        .iter()
        .filter_map(|e| match &e.content {
            EventContent::Other { data, .. } => data.parse::<serde_json::Value>().ok(),
            _ => None,
        })
        .filter_map(|d| d["chunk"].as_str().map(String::from))
        .collect();
    assert!(
        chunks.contains(&"running shell\n".to_string()),
        "{chunks:?}"
    );

    // The turn resumed: the next claim has both calls with their results.
    let w2 = worker(&llm, "w-resume", 30_000)
        .conversation_id(cid)
        .build()
        .expect("worker");
    let resumed = w2.next().await.expect("claim").expect("the turn again");
    assert_eq!(resumed.turn().id, turn_id);
    assert!(resumed.epoch() > first_epoch, "a higher epoch");
    assert_eq!(ids(resumed.tool_calls()), ["search-1", "shell/1"]);
    assert!(resumed
        .tool_calls()
        .iter()
        .all(|c| c.result.as_ref().map(|r| r.status) == Some(ToolStatus::Success)));
    let shell = resumed.context().tool_call("shell/1").expect("the call");
    assert_eq!(shell.approver.as_deref(), Some("ingress"));
    let done = answer(resumed, ai).await;
    let row = admin.at(done).turn(turn_id).await.expect("turn");
    assert_eq!((row.state, row.claims), (TurnState::Completed, 2));

    assert_eq!(executor.shutdown().await, 0, "nothing was running");
    running
        .await
        .expect("joined")
        .expect("the loop ended cleanly");
    assert!(executor.is_shut_down());
    svc.stop().await;
}

async fn a_denied_call_resumes_the_turn_with_the_reason(db: TestDb) {
    let svc = start(&db).await;
    let (admin, llm) = (client(&svc, ADMIN), client(&svc, LLM));
    let (human, ai) = actors(&admin).await;
    let (cid, _, turn_id) = dispatched(&admin, human, ai).await;
    let w = worker(&llm, "w-deny", 30_000)
        .conversation_id(cid)
        .build()
        .expect("worker");
    let turn = w.next().await.expect("claim").expect("a turn");
    let call = ToolCall::new("rm", "shell", json!({"cmd": "rm -rf /"}))
        .requires_approval("runs a shell command");
    turn.report_tool_calls(call).await.expect("reported");
    turn.finish();

    // The executor is not given a call awaiting approval.
    let early = llm
        .report_tool_result(turn_id, "rm", &ToolResult::success(json!(1)))
        .await
        .expect_err("not yet");
    assert_eq!(early.code(), Some(codes::TOOL_CALL_NOT_EXECUTING));

    let approvals = admin.approvals().turn_id(turn_id);
    let waiting = approvals.pending().await.expect("pending");
    assert_eq!(ids(&waiting), ["rm"]);
    let denied = approvals
        .deny(
            &waiting[0],
            Some("destructive command"),
            &ApprovalNote::default(),
        )
        .await
        .expect("denied")
        .expect("it waited");
    assert_eq!(denied.state, ToolCallState::Denied);
    let result = denied.result.clone().expect("a result");
    assert_eq!(result.status, ToolStatus::Denied);
    assert_eq!(result.reason.as_deref(), Some("destructive command"));
    // Decided: neither approvable nor executable any more.
    assert!(approvals
        .approve(&waiting[0], &ApprovalNote::default())
        .await
        .expect("an answer")
        .is_none());
    let late = llm
        .report_tool_progress(turn_id, "rm", pm_client::ToolStream::Stdout, "x")
        .await
        .expect_err("ended");
    assert!(
        matches!(
            late.code(),
            Some(codes::TOOL_CALL_TERMINAL | codes::TOOL_CALL_NOT_EXECUTING)
        ),
        "{late}"
    );

    let resumed = w.next().await.expect("claim").expect("the turn again");
    assert_eq!(resumed.turn().id, turn_id);
    let call = resumed.context().tool_call("rm").expect("the call");
    assert_eq!(call.state, ToolCallState::Denied);
    assert_eq!(
        call.result.as_ref().and_then(|r| r.reason.as_deref()),
        Some("destructive command")
    );
    answer(resumed, ai).await;
    svc.stop().await;
}

async fn the_executor_drops_results_of_ended_calls_and_goes_on(db: TestDb) {
    let svc = start(&db).await;
    let (admin, llm) = (client(&svc, ADMIN), client(&svc, LLM));
    let (human, ai) = actors(&admin).await;
    let (_, _, first) = dispatched(&admin, human, ai).await;
    let (_, _, second) = dispatched(&admin, human, ai).await;
    // Both turns report a call of `slow` (no approval): it runs until its call ends.
    let w = worker(&llm, "w-slow", 30_000).build().expect("worker");
    for _ in 0..2 {
        let turn = w.next().await.expect("claim").expect("a turn");
        let call_id = format!("slow-{}", turn.turn().id);
        turn.report_tool_calls(ToolCall::new(call_id, "slow", json!({})))
            .await
            .expect("reported");
        turn.finish();
    }
    let (started, ended) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let executor = Executor::builder(llm.clone())
        .tools(["slow"])
        .interval(Duration::from_millis(50))
        .grace(Duration::from_millis(300))
        .build()
        .expect("executor");
    let running = tokio::spawn({
        let (executor, started, ended) = (executor.clone(), started.clone(), ended.clone());
        async move {
            executor
                .run(move |call, run| {
                    let (started, ended) = (started.clone(), ended.clone());
                    async move {
                        started.fetch_add(1, Ordering::SeqCst);
                        if call.turn_id == first {
                            // Told when the call ends without it; then "finishes" anyway.
                            run.ended().await;
                            assert!(run.is_ended());
                            ended.fetch_add(1, Ordering::SeqCst);
                            ToolResult::success(json!("too late"))
                        } else {
                            // Runs until the executor stops.
                            std::future::pending().await
                        }
                    }
                })
                .await
        }
    });
    let slow = format!("slow-{first}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "the calls never ran");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // An operator interrupts the first turn: its call is cancelled while it runs.
    admin
        .interrupt_turn(first, Some("operator"))
        .await
        .expect("interrupted");
    let cancelled = call_when(&llm, first, &slow, |c| c.result.is_some()).await;
    assert_eq!(cancelled.state, ToolCallState::Cancelled);
    let deadline = Instant::now() + Duration::from_secs(10);
    while ended.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the handler was never told");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Its late result was dropped: the call stays cancelled and the loop goes on.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = llm.read().tool_call(first, &slow).await.expect("the call");
    assert_eq!(still.state, ToolCallState::Cancelled);
    assert!(!running.is_finished(), "the executor goes on");

    // Stopping abandons the call still running: it stays executing for the next executor.
    assert_eq!(executor.shutdown().await, 1);
    running.await.expect("joined").expect("a clean stop");
    let left = format!("slow-{second}");
    let call = llm.read().tool_call(second, &left).await.expect("the call");
    assert_eq!(call.state, ToolCallState::Executing);
    let next = Executor::builder(llm.clone())
        .turn_id(second)
        .interval(Duration::from_millis(50))
        .build()
        .expect("executor");
    let again = tokio::spawn({
        let next = next.clone();
        async move {
            next.run(|_, _| async { Ok::<_, std::io::Error>(json!("done")) })
                .await
        }
    });
    let done = call_when(&llm, second, &left, |c| c.result.is_some()).await;
    assert_eq!(done.state, ToolCallState::Success);
    assert_eq!(next.shutdown().await, 0);
    again.await.expect("joined").expect("a clean stop");
    svc.stop().await;
}

on_both_backends!(
    calls_wait_for_approval_run_in_the_executor_and_resume_the_turn,
    a_denied_call_resumes_the_turn_with_the_reason,
    the_executor_drops_results_of_ended_calls_and_goes_on,
);
