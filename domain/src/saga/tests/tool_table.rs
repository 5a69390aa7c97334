//! Tool calls (WORKERS.md "Tools") on the saga machines, row by row: the batch a claimed
//! turn reports (the turn suspends, the lease ends), each call's Tool lifecycle with its
//! invariants as refusals, the three deadlines, the resume, the cancellations; and a
//! property test over random requests and deadlines.

use chrono::Duration;
use proptest::prelude::*;
use uuid::Uuid;

use super::journal::replay_with_redelivery;
use super::support::*;
use crate::saga::rune::tool::ToolRune;
use crate::saga::rune::turn::{ToolSummary, TurnRune};
use crate::saga::*;
use crate::tool_policy::{Decider, PolicyAction, PolicyRules};
use crate::types::CheckpointType as C;

/// A call that runs at once (`requires_approval` false) or waits for an approver.
fn call(call_id: &str, approval: bool) -> NewToolCall {
    NewToolCall {
        call_id: call_id.into(),
        tool_name: if approval { "shell" } else { "search" }.into(),
        arguments: serde_json::json!({ "q": call_id }),
        requires_approval: approval,
        policy_reason: approval.then(|| "runs a shell command".into()),
        timeout_ms: None,
    }
}

/// No tool policy, and a default that lets the worker's `requires_approval` decide: the
/// machine's own rows (policies have their table, `policy_table.rs`).
pub(super) fn worker_decides() -> PolicyRules {
    PolicyRules {
        policies: Vec::new().into(),
        organization: None,
        default_action: PolicyAction::Allow,
    }
}

/// The principal that reports the batches of these tests.
pub(super) const REPORTER: &str = "worker-1";

fn batch(turn_epoch: i64, calls: Vec<NewToolCall>) -> WorkerOp {
    WorkerOp::ToolCalls {
        turn_epoch,
        calls,
        resume_deadline: None,
        rules: worker_decides(),
        reporter: REPORTER.into(),
    }
}

/// An approver of every call: admin `alice`.
pub(super) fn alice() -> Decision {
    Decision {
        by: Decider {
            name: "alice".into(),
            roles: vec!["admin".into()],
            open_mode: false,
        },
        on_behalf_of: None,
        comment: None,
    }
}

fn op(call_id: &str, op: ToolOp) -> WorkerOp {
    WorkerOp::Tool {
        call_id: call_id.into(),
        op,
    }
}

fn approve(call_id: &str) -> WorkerOp {
    op(call_id, ToolOp::Approve { decision: alice() })
}

fn deny(call_id: &str) -> WorkerOp {
    op(
        call_id,
        ToolOp::Deny {
            reason: "not on prod".into(),
            decision: alice(),
        },
    )
}

fn progress(call_id: &str) -> WorkerOp {
    op(
        call_id,
        ToolOp::Progress {
            stream: ToolStream::Stdout,
            chunk: "line\n".into(),
        },
    )
}

fn result(call_id: &str, status: ToolStatus) -> WorkerOp {
    op(
        call_id,
        ToolOp::Result {
            status,
            output: Some(serde_json::json!({ "ok": call_id })),
            error: None,
        },
    )
}

/// A claimed conversation turn of the root agent: (world, turn, epoch).
fn claimed() -> (World, Uuid, i64) {
    let mut w = World::started();
    w.human_says();
    let turn = w.active(w.root()).expect("dispatched");
    let (epoch, _) = w.claim(turn);
    (w, turn, epoch)
}

/// [`claimed`], then the batch `calls` reported under the claim.
fn suspended(calls: Vec<NewToolCall>) -> (World, Uuid, i64) {
    let (mut w, turn, epoch) = claimed();
    w.request(turn, batch(epoch, calls)).expect("reported");
    (w, turn, epoch)
}

fn call_state(w: &World, turn: Uuid, call_id: &str) -> Option<ToolCallState> {
    w.sagas.tool_call(turn, call_id).and_then(ToolCall::state)
}

fn call_row(w: &World, turn: Uuid, call_id: &str, kind: DeadlineKind) -> Option<Deadline> {
    w.row(Instance::ToolCall(ids::tool_call_id(turn, call_id)), kind)
}

/// `op` is refused with `expected`, and nothing changed: state, log, deadlines.
fn refused(w: &mut World, turn: Uuid, op: WorkerOp, expected: &ControlError) {
    let (sagas, log, rows) = (w.sagas.clone(), w.log.clone(), w.rows.clone());
    let got = w.request(turn, op.clone()).expect_err("refused");
    assert_eq!(&got, expected, "{op:?}");
    assert_eq!(w.sagas, sagas, "a refused {op:?} changed the state");
    assert_eq!(w.log, log, "a refused {op:?} recorded runes");
    assert_eq!(w.rows, rows, "a refused {op:?} changed the deadlines");
}

fn code(code: &'static str) -> ControlError {
    ControlError::NotAllowed {
        code,
        detail: String::new(),
    }
}

/// `op` is refused with `expected_code` (the detail is not compared), changing nothing.
fn refused_with(w: &mut World, turn: Uuid, op: WorkerOp, expected_code: &'static str) {
    let (sagas, log) = (w.sagas.clone(), w.log.clone());
    match w.request(turn, op.clone()) {
        Err(ControlError::NotAllowed { code: got, .. }) => assert_eq!(got, expected_code, "{op:?}"),
        other => panic!("{op:?}: expected {:?}, got {other:?}", code(expected_code)),
    }
    assert_eq!(w.sagas, sagas, "a refused {op:?} changed the state");
    assert_eq!(w.log, log, "a refused {op:?} recorded runes");
}

fn names(out: &Outcome) -> Vec<&'static str> {
    out.runes.iter().map(Recorded::event_type).collect()
}

#[test]
fn given_a_claimed_turn_when_it_reports_calls_then_the_runes_in_order_and_the_turn_suspends() {
    let (mut w, turn, epoch) = claimed();
    let out = w
        .request(turn, batch(epoch, vec![call("a", false), call("b", true)]))
        .expect("reported");
    assert_eq!(
        names(&out),
        [
            "turn.tool_calls_received",
            "tool.call",
            "tool.call",
            "tool.approval_requested"
        ]
    );
    assert_eq!(w.turn_state(turn), Some(TurnState::ToolExecuting));
    assert_eq!(w.turn(turn).lease(), None, "the worker's lease ended");
    let agent = w.sagas.agent_view(w.root(), w.now).expect("agent");
    assert_eq!(agent.head_status, HeadStatus::Suspended);
    assert_eq!(call_state(&w, turn, "a"), Some(ToolCallState::Executing));
    assert_eq!(
        call_state(&w, turn, "b"),
        Some(ToolCallState::AwaitingApproval)
    );
    assert!(w
        .row(Instance::Turn(turn), DeadlineKind::TurnLease)
        .is_none());
    assert!(w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .is_none());
    let exec = call_row(&w, turn, "a", DeadlineKind::ToolExecution).expect("armed");
    assert_eq!(exec.due_at, w.now + w.config.tool_timeout);
    let approval = call_row(&w, turn, "b", DeadlineKind::ToolApproval).expect("armed");
    assert_eq!(approval.due_at, w.now + w.config.tool_approval_timeout);
    assert_eq!(out.leases.len(), 1, "decided on the live lease");
    let view = w.sagas.turn_view(turn, w.now).expect("view");
    let calls: Vec<_> = view.tool_calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(calls, ["a", "b"]);
    assert_eq!(
        view.tool_calls[1].policy_reason.as_deref(),
        Some("runs a shell command")
    );
}

#[test]
fn given_a_reported_batch_when_sent_again_then_nothing_is_written() {
    let (mut w, turn, epoch) = suspended(vec![call("a", false), call("b", true)]);
    let out = w
        .request(turn, batch(epoch, vec![call("a", false), call("b", true)]))
        .expect("a replay is acknowledged");
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn given_a_used_call_id_when_another_call_reuses_it_then_tool_call_exists() {
    let (mut w, turn, epoch) = suspended(vec![call("a", false)]);
    let mut other = call("a", false);
    other.arguments = serde_json::json!({ "q": "else" });
    refused_with(&mut w, turn, batch(epoch, vec![other]), TOOL_CALL_EXISTS);
    let mixed = vec![call("a", false), call("c", false)];
    refused_with(&mut w, turn, batch(epoch, mixed), TOOL_CALL_EXISTS);
    // After the resume a new batch may not reuse it either.
    w.request(turn, result("a", ToolStatus::Success))
        .expect("result");
    let (epoch, _) = w.claim(turn);
    refused_with(
        &mut w,
        turn,
        batch(epoch, vec![call("a", true)]),
        TOOL_CALL_EXISTS,
    );
}

#[test]
fn given_a_turn_not_held_by_the_claim_when_it_reports_calls_then_turn_fenced() {
    let (mut w, turn, epoch) = claimed();
    refused_with(
        &mut w,
        turn,
        batch(epoch - 1, vec![call("a", false)]),
        TURN_FENCED,
    );
    w.request(turn, batch(epoch, vec![call("a", false)]))
        .expect("reported");
    // Suspended: the claim's other reports are fenced off until the turn resumes.
    refused_with(
        &mut w,
        turn,
        batch(epoch, vec![call("b", false)]),
        TURN_FENCED,
    );
    let usage = WorkerOp::Usage {
        turn_epoch: epoch,
        input_tokens: 1,
        output_tokens: 1,
    };
    refused_with(&mut w, turn, usage, TURN_FENCED);
}

#[test]
fn given_a_call_awaiting_approval_when_approved_then_it_executes_under_its_own_timeout() {
    let mut slow = call("b", true);
    slow.timeout_ms = Some(90_000);
    let (mut w, turn, _) = suspended(vec![slow]);
    let out = w.request(turn, approve("b")).expect("approved");
    assert_eq!(names(&out), ["tool.approved"]);
    assert_eq!(call_state(&w, turn, "b"), Some(ToolCallState::Executing));
    let view = w.sagas.turn_view(turn, w.now).expect("view");
    assert_eq!(view.tool_calls[0].approver.as_deref(), Some("alice"));
    assert!(call_row(&w, turn, "b", DeadlineKind::ToolApproval).is_none());
    let exec = call_row(&w, turn, "b", DeadlineKind::ToolExecution).expect("armed");
    assert_eq!(exec.due_at, w.now + Duration::milliseconds(90_000));
}

#[test]
fn given_a_call_not_awaiting_approval_when_approved_or_denied_then_refused() {
    let (mut w, turn, _) = suspended(vec![call("a", false), call("b", true)]);
    refused_with(&mut w, turn, approve("a"), TOOL_CALL_NOT_AWAITING_APPROVAL);
    refused_with(&mut w, turn, deny("a"), TOOL_CALL_NOT_AWAITING_APPROVAL);
    w.request(turn, approve("b")).expect("approved");
    refused_with(&mut w, turn, approve("b"), TOOL_CALL_NOT_AWAITING_APPROVAL);
}

#[test]
fn given_a_call_awaiting_approval_when_denied_then_denied_then_its_result() {
    let (mut w, turn, _) = suspended(vec![call("a", false), call("b", true)]);
    let out = w.request(turn, deny("b")).expect("denied");
    assert_eq!(names(&out), ["tool.denied", "tool.result"]);
    let Rune::Tool(ToolRune::Result(r)) = &out.runes[1].rune else {
        panic!("a result");
    };
    assert_eq!(r.status, ToolStatus::Denied);
    assert_eq!(r.reason.as_deref(), Some("not on prod"));
    assert_eq!(call_state(&w, turn, "b"), Some(ToolCallState::Denied));
    assert!(call_row(&w, turn, "b", DeadlineKind::ToolApproval).is_none());
    assert_eq!(
        w.turn_state(turn),
        Some(TurnState::ToolExecuting),
        "a is open"
    );
}

#[test]
fn given_a_call_awaiting_approval_when_progress_or_a_result_then_not_executing() {
    let (mut w, turn, _) = suspended(vec![call("b", true)]);
    refused_with(&mut w, turn, progress("b"), TOOL_CALL_NOT_EXECUTING);
    refused_with(
        &mut w,
        turn,
        result("b", ToolStatus::Success),
        TOOL_CALL_NOT_EXECUTING,
    );
}

#[test]
fn given_an_executing_call_when_progress_then_tool_progress_and_it_still_executes() {
    let (mut w, turn, _) = suspended(vec![call("a", false)]);
    let out = w.request(turn, progress("a")).expect("progress");
    assert_eq!(names(&out), ["tool.progress"]);
    assert_eq!(call_state(&w, turn, "a"), Some(ToolCallState::Executing));
    assert_eq!(
        w.sagas.tool_call(turn, "a").map(ToolCall::progress),
        Some(1)
    );
}

#[test]
fn given_an_executing_call_when_its_result_then_tool_result_and_the_last_resumes_the_turn() {
    let (mut w, turn, epoch) = suspended(vec![call("a", false), call("b", false)]);
    let out = w.request(turn, result("a", ToolStatus::Error)).expect("a");
    assert_eq!(names(&out), ["tool.result"]);
    assert_eq!(w.turn_state(turn), Some(TurnState::ToolExecuting));
    let out = w
        .request(turn, result("b", ToolStatus::Success))
        .expect("b");
    assert_eq!(names(&out), ["tool.result", "turn.tools_finished"]);
    let Rune::Turn(TurnRune::ToolsFinished(finished)) = &out.runes[1].rune else {
        panic!("tools_finished");
    };
    let summary = |call_id: &str, status| ToolSummary {
        call_id: call_id.into(),
        status,
    };
    assert_eq!(
        finished.results,
        [
            summary("a", ToolStatus::Error),
            summary("b", ToolStatus::Success)
        ]
    );
    assert_eq!(w.turn_state(turn), Some(TurnState::Streaming));
    assert!(w.turn(turn).is_claimable(), "unleased: claimable again");
    assert!(w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .is_some());
    let (next, _) = w.claim(turn);
    assert!(next > epoch, "a higher epoch");
    let view = w.sagas.turn_view(turn, w.now).expect("view");
    let results: Vec<_> = view.tool_calls.iter().map(|c| c.result.clone()).collect();
    assert!(
        results.iter().all(Option::is_some),
        "every call with its result"
    );
}

#[test]
fn given_a_call_with_its_result_when_the_same_result_again_then_only_acknowledged() {
    let (mut w, turn, _) = suspended(vec![call("a", false), call("b", false)]);
    w.request(turn, result("a", ToolStatus::Success))
        .expect("first");
    let out = w
        .request(turn, result("a", ToolStatus::Success))
        .expect("replay");
    assert!(out.is_empty(), "{out:?}");
    refused_with(
        &mut w,
        turn,
        result("a", ToolStatus::Error),
        TOOL_CALL_TERMINAL,
    );
    refused_with(&mut w, turn, progress("a"), TOOL_CALL_TERMINAL);
}

#[test]
fn given_an_unknown_call_when_any_request_then_tool_call_not_found() {
    let (mut w, turn, _) = suspended(vec![call("a", false)]);
    let missing = ControlError::ToolCallNotFound("zz".into());
    for op in [
        approve("zz"),
        deny("zz"),
        progress("zz"),
        result("zz", ToolStatus::Success),
    ] {
        refused(&mut w, turn, op, &missing);
    }
}

#[test]
fn given_a_call_awaiting_approval_when_the_approval_timeout_falls_due_then_timeout_once() {
    let (mut w, turn, _) = suspended(vec![call("b", true)]);
    let row = call_row(&w, turn, "b", DeadlineKind::ToolApproval).expect("armed");
    let out = w.due(row.instance, row.kind);
    assert_eq!(names(&out), ["tool.result", "turn.tools_finished"]);
    let Rune::Tool(ToolRune::Result(r)) = &out.runes[0].rune else {
        panic!("a result");
    };
    assert_eq!(
        (r.status, r.reason.as_deref()),
        (ToolStatus::Timeout, Some("approval_timeout"))
    );
    // The same row again (a second replica that read it before it was spent) does nothing.
    let again = w.feed(Input::DeadlineDue(&row));
    assert!(again.runes.is_empty(), "{again:?}");
}

#[test]
fn given_an_executing_call_when_its_execution_timeout_falls_due_then_timeout() {
    let (mut w, turn, _) = suspended(vec![call("a", false), call("b", true)]);
    let out = w.due(
        Instance::ToolCall(ids::tool_call_id(turn, "a")),
        DeadlineKind::ToolExecution,
    );
    assert_eq!(names(&out), ["tool.result"]);
    assert_eq!(call_state(&w, turn, "a"), Some(ToolCallState::Timeout));
    // An approval deadline row of an approved call does nothing.
    let stale = call_row(&w, turn, "b", DeadlineKind::ToolApproval).expect("armed");
    w.request(turn, approve("b")).expect("approved");
    assert!(w.feed(Input::DeadlineDue(&stale)).runes.is_empty());
}

#[test]
fn given_a_batch_with_a_resume_deadline_when_it_passes_then_every_open_call_times_out() {
    let (mut w, turn, epoch) = claimed();
    let calls = vec![call("a", false), call("b", true), call("c", false)];
    let report = WorkerOp::ToolCalls {
        turn_epoch: epoch,
        calls,
        resume_deadline: Some(Duration::seconds(45)),
        rules: worker_decides(),
        reporter: REPORTER.into(),
    };
    w.request(turn, report).expect("reported");
    w.request(turn, result("c", ToolStatus::Success))
        .expect("c");
    let out = w.due(Instance::Turn(turn), DeadlineKind::ToolResume);
    assert_eq!(
        names(&out),
        ["tool.result", "tool.result", "turn.tools_finished"]
    );
    for id in ["a", "b"] {
        let r = w
            .sagas
            .tool_call(turn, id)
            .and_then(ToolCall::result)
            .expect("result");
        assert_eq!(
            (r.status, r.reason.as_deref()),
            (ToolStatus::Timeout, Some("resume_deadline"))
        );
    }
    assert_eq!(call_state(&w, turn, "c"), Some(ToolCallState::Success));
    assert_eq!(w.turn_state(turn), Some(TurnState::Streaming));
}

#[test]
fn given_open_calls_when_the_operator_interrupts_then_each_is_cancelled_before_the_turn_ends() {
    let (mut w, turn, _) = suspended(vec![call("a", false), call("b", true), call("c", false)]);
    w.request(turn, result("c", ToolStatus::Success))
        .expect("c");
    let interrupt = WorkerOp::Interrupt {
        reason: "operator".into(),
    };
    let out = w.request(turn, interrupt).expect("interrupted");
    let tools: Vec<_> = out.runes.iter().take(3).map(Recorded::event_type).collect();
    assert_eq!(tools, ["tool.result", "tool.result", "turn.interrupted"]);
    for id in ["a", "b"] {
        let r = w
            .sagas
            .tool_call(turn, id)
            .and_then(ToolCall::result)
            .expect("result");
        assert_eq!(
            (r.status, r.reason.as_deref()),
            (ToolStatus::Cancelled, Some("operator"))
        );
    }
    assert!(w
        .rows
        .keys()
        .all(|(i, _)| !matches!(i, Instance::ToolCall(_))));
    // A late executor's result is told the call ended.
    refused_with(
        &mut w,
        turn,
        result("a", ToolStatus::Success),
        TOOL_CALL_TERMINAL,
    );
}

#[test]
fn given_open_calls_when_the_session_closes_then_they_are_cancelled() {
    let (mut w, turn, _) = suspended(vec![call("a", false)]);
    w.checkpoint(C::CloseConversation);
    assert_eq!(call_state(&w, turn, "a"), Some(ToolCallState::Cancelled));
    assert!(w.turn(turn).is_terminal());
}

#[test]
fn given_open_calls_when_the_agent_is_killed_then_they_are_cancelled() {
    let (mut w, turn, _) = suspended(vec![call("b", true)]);
    w.control(Control::Kill { agent_id: w.root() })
        .expect("killed");
    assert_eq!(call_state(&w, turn, "b"), Some(ToolCallState::Cancelled));
    assert_eq!(w.turn_state(turn), Some(TurnState::Interrupted));
}

/// Every tool rune, from a scenario that reaches them all (for the wire tests).
pub fn every_tool_rune() -> Vec<Rune> {
    let (mut w, turn, _) = suspended(vec![call("a", false), call("b", true), call("c", true)]);
    w.request(turn, progress("a")).expect("progress");
    w.request(turn, result("a", ToolStatus::Success))
        .expect("a");
    w.request(turn, approve("b")).expect("b");
    w.request(turn, result("b", ToolStatus::Cancelled))
        .expect("b");
    w.request(turn, deny("c")).expect("c");
    w.log.into_iter().map(|r| r.rune).collect()
}

/// A random request or deadline on a suspended turn's calls.
#[derive(Debug, Clone)]
enum Step {
    Approve(usize),
    Deny(usize),
    Progress(usize),
    Result(usize, ToolStatus),
    Due(usize, DeadlineKind),
    Resume,
    Interrupt,
    Claim,
    Report(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let statuses = prop_oneof![
        Just(ToolStatus::Success),
        Just(ToolStatus::Error),
        Just(ToolStatus::Cancelled)
    ];
    let kinds = prop_oneof![
        Just(DeadlineKind::ToolApproval),
        Just(DeadlineKind::ToolExecution)
    ];
    prop_oneof![
        (0..4usize).prop_map(Step::Approve),
        (0..4usize).prop_map(Step::Deny),
        (0..4usize).prop_map(Step::Progress),
        (0..4usize, statuses).prop_map(|(i, s)| Step::Result(i, s)),
        (0..4usize, kinds).prop_map(|(i, k)| Step::Due(i, k)),
        Just(Step::Resume),
        Just(Step::Interrupt),
        Just(Step::Claim),
        (1..4usize).prop_map(Step::Report),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    /// Over random approvals, denials, progress, results, deadlines, interrupts, claims
    /// and new batches: the invariants hold at every step (every `tool.call` gets exactly
    /// one `tool.result`, none before its call, no progress or success before approval —
    /// the harness checks them), the turn resumes exactly once per batch, and replaying the
    /// journal with redelivery gives the same state.
    #[test]
    fn given_random_tool_traffic_then_one_result_per_call_and_one_resume_per_batch(
        steps in proptest::collection::vec(step(), 1..40)
    ) {
        let (mut w, turn, _) = suspended(vec![call("c0", true), call("c1", false), call("c2", true)]);
        let mut next = 3;
        for step in steps {
            let calls: Vec<String> = w.turn(turn).tool_call_ids().to_vec();
            let pick = |i: usize| calls[i % calls.len()].clone();
            let _ = match step {
                Step::Approve(i) => w.request(turn, approve(&pick(i))),
                Step::Deny(i) => w.request(turn, deny(&pick(i))),
                Step::Progress(i) => w.request(turn, progress(&pick(i))),
                Step::Result(i, status) => w.request(turn, result(&pick(i), status)),
                Step::Due(i, kind) => {
                    let instance = Instance::ToolCall(ids::tool_call_id(turn, &pick(i)));
                    if w.row(instance, kind).is_some() {
                        w.due(instance, kind);
                    }
                    Ok(Outcome::default())
                }
                Step::Resume => {
                    if w.row(Instance::Turn(turn), DeadlineKind::ToolResume).is_some() {
                        w.due(Instance::Turn(turn), DeadlineKind::ToolResume);
                    }
                    Ok(Outcome::default())
                }
                Step::Interrupt => w.request(turn, WorkerOp::Interrupt { reason: "operator".into() }),
                Step::Claim => {
                    if w.turn(turn).is_claimable() {
                        w.claim(turn);
                    }
                    Ok(Outcome::default())
                }
                Step::Report(n) => match w.turn(turn).lease().map(|l| l.turn_epoch) {
                    Some(epoch) => {
                        let calls = (0..n).map(|k| call(&format!("c{}", next + k), k % 2 == 0)).collect();
                        next += n;
                        w.request(turn, WorkerOp::ToolCalls {
                            turn_epoch: epoch,
                            calls,
                            resume_deadline: Some(Duration::seconds(60)),
                            rules: worker_decides(),
                            reporter: REPORTER.into(),
                        })
                    }
                    None => Ok(Outcome::default()),
                },
            };
        }
        let received = w.log.iter().filter(|r| r.event_type() == "turn.tool_calls_received").count();
        let finished = w.log.iter().filter(|r| r.event_type() == "turn.tools_finished").count();
        let suspended_now = usize::from(w.turn_state(turn) == Some(TurnState::ToolExecuting));
        let ended_suspended = usize::from(
            w.turn(turn).is_terminal()
                && w.log.iter().rev().find(|r| matches!(r.instance, Instance::Turn(_)) && r.event_type().starts_with("turn.tool"))
                    .is_some_and(|r| r.event_type() == "turn.tool_calls_received"),
        );
        prop_assert_eq!(received, finished + suspended_now + ended_suspended, "one resume per batch");
        replay_with_redelivery(&w, &w.journal, w.journal.len() / 2);
    }
}
