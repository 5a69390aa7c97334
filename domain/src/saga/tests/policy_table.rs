//! Tool policies and approvals on the tool machine (TRUST.md "Tool policies", "Approvals"):
//! what a reported call becomes under each action, and who may decide a waiting call —
//! given/when/then, each refusal changing nothing.

use std::sync::Arc;

use uuid::Uuid;

use super::support::*;
use super::tool_table::{alice, REPORTER};
use crate::saga::rune::tool::ToolRune;
use crate::saga::rune::Rune;
use crate::saga::*;
use crate::testing::tool_policy as policy;
use crate::tool_policy::{Approver, Decider, PolicyAction, PolicyRules, ToolPolicySet};

fn rules(policies: Vec<ToolPolicySet>) -> PolicyRules {
    PolicyRules {
        policies: Arc::from(policies),
        organization: None,
        default_action: PolicyAction::RequireApproval,
    }
}

/// A call the worker says needs no approval.
fn unasked(call_id: &str, tool: &str) -> NewToolCall {
    NewToolCall {
        call_id: call_id.into(),
        tool_name: tool.into(),
        arguments: serde_json::json!({ "path": "/" }),
        requires_approval: false,
        policy_reason: None,
        timeout_ms: None,
    }
}

/// A claimed turn reports `calls` under `rules`: (world, turn, the report's runes).
fn reported(rules: PolicyRules, calls: Vec<NewToolCall>) -> (World, Uuid, Vec<&'static str>) {
    let mut w = World::started();
    w.human_says();
    let turn = w.active(w.root()).expect("dispatched");
    let (epoch, _) = w.claim(turn);
    let report = WorkerOp::ToolCalls {
        turn_epoch: epoch,
        calls,
        resume_deadline: None,
        rules,
        reporter: REPORTER.into(),
    };
    let out = w.request(turn, report).expect("reported");
    let names = out.runes.iter().map(Recorded::event_type).collect();
    (w, turn, names)
}

fn state(w: &World, turn: Uuid, call_id: &str) -> Option<ToolCallState> {
    w.sagas.tool_call(turn, call_id).and_then(ToolCall::state)
}

fn decide(call_id: &str, decision: Decision) -> WorkerOp {
    WorkerOp::Tool {
        call_id: call_id.into(),
        op: ToolOp::Approve { decision },
    }
}

fn by(name: &str, roles: &[&str]) -> Decision {
    Decision {
        by: Decider {
            name: name.into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            open_mode: false,
        },
        on_behalf_of: None,
        comment: None,
    }
}

/// `op` is refused `403 code`, and nothing changed.
fn forbidden(w: &mut World, turn: Uuid, op: WorkerOp, code: &'static str) {
    let (sagas, log) = (w.sagas.clone(), w.log.clone());
    match w.request(turn, op.clone()) {
        Err(ControlError::Forbidden { code: got, .. }) => assert_eq!(got, code),
        other => panic!("{op:?}: expected {code}, got {other:?}"),
    }
    assert_eq!(w.sagas, sagas, "a refused {op:?} changed the state");
    assert_eq!(w.log, log, "a refused {op:?} recorded runes");
}

#[test]
fn given_a_deny_policy_when_the_call_is_reported_then_it_is_denied_at_once_and_the_turn_resumes() {
    let (w, turn, names) = reported(
        rules(vec![policy("no-rm", "shell.rm*", PolicyAction::Deny)]),
        vec![unasked("a", "shell.rm_rf")],
    );
    assert_eq!(
        names,
        [
            "turn.tool_calls_received",
            "tool.call",
            "tool.denied",
            "tool.result",
            "turn.tools_finished"
        ]
    );
    assert_eq!(state(&w, turn, "a"), Some(ToolCallState::Denied));
    let call = w.sagas.tool_call(turn, "a").expect("called");
    assert_eq!(call.policy(), Some("no-rm"));
    let denied = w.log.iter().find_map(|r| match &r.rune {
        Rune::Tool(ToolRune::Denied(d)) => Some(d.clone()),
        _ => None,
    });
    let denied = denied.expect("tool.denied");
    assert_eq!(denied.reason, "policy:no-rm");
    assert_eq!(denied.approver, None);
}

#[test]
fn given_a_denied_call_beside_a_running_one_when_reported_then_the_turn_waits_for_the_other() {
    let (w, turn, names) = reported(
        rules(vec![
            policy("no-rm", "shell.rm*", PolicyAction::Deny),
            policy("search", "search", PolicyAction::Allow),
        ]),
        vec![unasked("a", "shell.rm_rf"), unasked("b", "search")],
    );
    assert!(!names.contains(&"turn.tools_finished"), "{names:?}");
    assert_eq!(state(&w, turn, "a"), Some(ToolCallState::Denied));
    assert_eq!(state(&w, turn, "b"), Some(ToolCallState::Executing));
    assert_eq!(w.turn_state(turn), Some(TurnState::ToolExecuting));
}

#[test]
fn given_require_approval_when_the_worker_says_none_is_needed_then_the_call_waits() {
    let mut p = policy("shell", "shell.*", PolicyAction::RequireApproval);
    p.reason = Some("shells touch the host".into());
    let (w, turn, names) = reported(rules(vec![p]), vec![unasked("a", "shell.ls")]);
    assert_eq!(
        names,
        [
            "turn.tool_calls_received",
            "tool.call",
            "tool.approval_requested"
        ]
    );
    assert_eq!(state(&w, turn, "a"), Some(ToolCallState::AwaitingApproval));
    let call = w.sagas.tool_call(turn, "a").expect("called");
    assert!(call.requires_approval());
    assert_eq!(call.policy_reason(), Some("shells touch the host"));
    assert_eq!(call.reported_by(), Some(REPORTER));
}

#[test]
fn given_no_policy_when_reported_then_the_default_action_applies_and_is_recorded() {
    let (w, turn, _) = reported(rules(vec![]), vec![unasked("a", "anything")]);
    assert_eq!(state(&w, turn, "a"), Some(ToolCallState::AwaitingApproval));
    let call = w.sagas.tool_call(turn, "a").expect("called");
    assert_eq!(call.policy(), Some("default"));
    assert_eq!(call.approvers(), Approver::defaults());
}

#[test]
fn given_a_waiting_call_when_its_reporter_approves_then_self_approval_is_forbidden() {
    let (mut w, turn, _) = reported(rules(vec![]), vec![unasked("a", "shell.ls")]);
    let op = decide("a", by(REPORTER, &["admin", "llm"]));
    // Listed by role (admin) or not: the reporter never decides its own call.
    forbidden(&mut w, turn, op, SELF_APPROVAL_FORBIDDEN);
}

#[test]
fn given_a_waiting_call_when_a_principal_not_listed_approves_then_approver_forbidden() {
    let mut p = policy("shell", "shell.*", PolicyAction::RequireApproval);
    p.approvers = Some(vec![Approver::Principal("ops-lead".into())]);
    let (mut w, turn, _) = reported(rules(vec![p]), vec![unasked("a", "shell.ls")]);
    forbidden(&mut w, turn, decide("a", alice()), APPROVER_FORBIDDEN);
    let deny = WorkerOp::Tool {
        call_id: "a".into(),
        op: ToolOp::Deny {
            reason: "no".into(),
            decision: by("llm", &["llm"]),
        },
    };
    forbidden(&mut w, turn, deny, APPROVER_FORBIDDEN);
    w.request(turn, decide("a", by("ops-lead", &["analyst"])))
        .expect("the listed principal approves");
    assert_eq!(state(&w, turn, "a"), Some(ToolCallState::Executing));
}

#[test]
fn given_an_approval_when_recorded_then_the_principal_on_behalf_of_and_comment_are_kept() {
    let (mut w, turn, _) = reported(rules(vec![]), vec![unasked("a", "shell.ls")]);
    let person = Uuid::from_u128(42);
    let mut decision = by("ingress", &["ingress"]);
    decision.on_behalf_of = Some(person);
    decision.comment = Some("looked at it".into());
    let out = w.request(turn, decide("a", decision)).expect("approved");
    let approved = out.runes.iter().find_map(|r| match &r.rune {
        Rune::Tool(ToolRune::Approved(a)) => Some(a.clone()),
        _ => None,
    });
    let approved = approved.expect("tool.approved");
    assert_eq!(approved.approver, "ingress");
    assert_eq!(approved.on_behalf_of, Some(person));
    assert_eq!(approved.comment.as_deref(), Some("looked at it"));
}

#[test]
fn given_a_waiting_call_when_its_policy_changes_then_it_keeps_the_approvers_it_was_reported_under()
{
    let mut p = policy("shell", "shell.*", PolicyAction::RequireApproval);
    p.approvers = Some(vec![Approver::Principal("ops-lead".into())]);
    let (mut w, turn, _) = reported(rules(vec![p]), vec![unasked("a", "shell.ls")]);
    // The policy now lets admins decide: the waiting call was reported under the old one,
    // and the machine decides from its own runes, never from the policies of the moment.
    forbidden(&mut w, turn, decide("a", alice()), APPROVER_FORBIDDEN);
    let call = w.sagas.tool_call(turn, "a").expect("called");
    assert_eq!(
        call.approvers(),
        vec![Approver::Principal("ops-lead".into())]
    );
}

#[test]
fn given_allow_when_the_worker_asks_for_approval_then_it_waits_with_the_workers_reason() {
    let mut asked = unasked("a", "http.post");
    asked.requires_approval = true;
    asked.policy_reason = Some("posts to prod".into());
    let (w, turn, _) = reported(
        rules(vec![policy("http", "http.*", PolicyAction::Allow)]),
        vec![asked, unasked("b", "http.get")],
    );
    assert_eq!(state(&w, turn, "a"), Some(ToolCallState::AwaitingApproval));
    assert_eq!(state(&w, turn, "b"), Some(ToolCallState::Executing));
    let call = w.sagas.tool_call(turn, "a").expect("called");
    assert_eq!(call.policy_reason(), Some("posts to prod"));
}
