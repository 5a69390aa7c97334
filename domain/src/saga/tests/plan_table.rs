//! The autonomy-loop (plan) table of docs/SAGAS.md, row by row.

use uuid::Uuid;

use super::support::*;
use crate::saga::rune::plan::PlanRune;
use crate::saga::*;
use crate::testing::id;
use crate::types::{CheckpointType as C, TaskCheckpointType as K};

use PlanState as P;

/// The plan runes of an outcome, by name, with `plan.state.changed` as `from>to:trigger`.
fn plan(out: &Outcome) -> Vec<String> {
    out.runes
        .iter()
        .filter_map(|r| match &r.rune {
            Rune::Plan(PlanRune::StateChanged(c)) => {
                Some(format!("{}>{}:{}", c.from, c.to, c.trigger))
            }
            Rune::Plan(p) => Some(p.name().to_string()),
            _ => None,
        })
        .collect()
}

/// Executing with two tasks assigned to W (the first dispatched).
fn executing() -> (World, Uuid, Uuid) {
    let mut w = World::streaming();
    w.checkpoint(C::BeginWork);
    let (a, _) = w.task(Some(id(W)));
    let (b, _) = w.task(Some(id(W)));
    (w, a, b)
}

fn complete(w: &mut World, task: Uuid) -> Outcome {
    w.task_checkpoint(task, K::WorkStarted);
    w.task_checkpoint(task, K::WorkCompleted).1
}

/// Both tasks completed: reviewing.
fn reviewing() -> (World, Uuid, Uuid) {
    let (mut w, a, b) = executing();
    complete(&mut w, a);
    let out = complete(&mut w, b);
    assert_eq!(
        plan(&out),
        [
            "plan.task_completed",
            "executing>reviewing:all_tasks_terminal"
        ]
    );
    (w, a, b)
}

#[test]
fn given_conversation_started_then_goal_received_with_the_title() {
    let w = World::started();
    assert_eq!(w.plan_state(), Some(P::GoalReceived));
    assert_eq!(
        w.sagas.plan().and_then(Plan::goal_description),
        Some("Ship the feature")
    );
}

#[test]
fn given_goal_received_when_first_conversation_turn_starts_then_planning_once() {
    let mut w = World::started();
    w.human_says();
    let (_, out) = w.llm_says();
    assert_eq!(plan(&out), ["plan.created"]);
    assert_eq!(
        w.sagas.plan().and_then(Plan::plan_id),
        Some(ids::plan_id(w.conv))
    );
    w.human_says();
    let (_, out) = w.llm_says();
    assert!(plan(&out).is_empty());
    assert_eq!(w.plan_state(), Some(P::Planning));
}

#[test]
fn given_planning_when_begin_work_then_executing_plan_approved() {
    let mut w = World::streaming();
    let (_, out) = w.checkpoint(C::BeginWork);
    assert_eq!(plan(&out), ["planning>executing:plan_approved"]);
}

#[test]
fn given_planning_or_goal_received_when_task_created_then_executing_auto_start_and_assigned() {
    let mut w = World::streaming();
    let (_, out) = w.task(Some(id(W)));
    assert_eq!(
        plan(&out),
        [
            "planning>executing:auto_start",
            "plan.updated",
            "plan.task_assigned"
        ]
    );
    let mut w = World::started();
    let (_, out) = w.task(None);
    assert_eq!(
        plan(&out),
        [
            "plan.created",
            "planning>executing:auto_start",
            "plan.updated"
        ]
    );
}

#[test]
fn given_executing_when_tasks_start_and_complete_then_task_runes_until_all_are_done() {
    let (mut w, a, b) = executing();
    let (_, out) = w.task_checkpoint(a, K::WorkStarted);
    assert_eq!(plan(&out), ["plan.task_started"]);
    let (_, out) = w.task_checkpoint(a, K::WorkCompleted);
    assert_eq!(plan(&out), ["plan.task_completed"]);
    assert_eq!(w.plan_state(), Some(P::Executing));
    complete(&mut w, b);
    assert_eq!(w.plan_state(), Some(P::Reviewing));
}

#[test]
fn given_a_started_task_when_work_started_again_then_no_plan_rune() {
    let (mut w, a, _) = executing();
    w.task_checkpoint(a, K::WorkStarted);
    let (_, out) = w.task_checkpoint(a, K::WorkStarted);
    assert!(plan(&out).is_empty(), "{:?}", plan(&out));
    w.task_checkpoint(a, K::WorkPaused);
    let (_, out) = w.task_checkpoint(a, K::WorkStarted);
    assert!(plan(&out).is_empty(), "a resumption: {:?}", plan(&out));
    assert_eq!(w.plan_state(), Some(P::Executing));
}

#[test]
fn given_blocked_with_a_started_task_when_it_is_started_again_then_executing_and_no_task_rune() {
    let (mut w, a, _) = executing();
    w.task_checkpoint(a, K::WorkStarted);
    w.llm_says();
    w.checkpoint(C::NeedInformation);
    assert_eq!(w.plan_state(), Some(P::Blocked));
    let (_, out) = w.task_checkpoint(a, K::WorkStarted);
    assert_eq!(plan(&out), ["blocked>executing:dependency_resolved"]);
}

#[test]
fn given_reviewing_when_work_rejected_then_critique_and_back_to_executing() {
    let (mut w, a, _) = reviewing();
    let (_, out) = w.task_checkpoint(a, K::WorkRejected);
    assert_eq!(
        plan(&out),
        ["plan.critique", "reviewing>executing:critique_found_issues"]
    );
    let (_, out) = w.task_checkpoint(a, K::WorkRejected);
    assert_eq!(
        plan(&out),
        ["plan.critique"],
        "executing: a critique without a move"
    );
}

#[test]
fn given_reviewing_when_every_task_approved_then_goal_met() {
    let (mut w, a, b) = reviewing();
    let (_, out) = w.task_checkpoint(a, K::WorkApproved);
    assert_eq!(plan(&out), ["plan.critique"]);
    let (_, out) = w.task_checkpoint(b, K::WorkApproved);
    assert_eq!(plan(&out), ["plan.critique", "plan.goal_met"]);
    assert_eq!(w.plan_state(), Some(P::GoalMet));
    let (_, out) = w.task(Some(id(W)));
    assert!(plan(&out).is_empty(), "goal_met is final");
}

#[test]
fn given_executing_when_the_last_approval_comes_then_reviewing_then_goal_met() {
    let (mut w, a, b) = executing();
    complete(&mut w, a);
    w.task_checkpoint(a, K::WorkApproved);
    let (_, out) = w.task_checkpoint(b, K::WorkApproved);
    assert_eq!(
        plan(&out),
        [
            "plan.critique",
            "executing>reviewing:all_tasks_terminal",
            "plan.goal_met"
        ]
    );
}

#[test]
fn given_executing_or_planning_when_work_completed_checkpoint_then_goal_met_via_reviewing() {
    let (mut w, _, _) = executing();
    let (_, out) = w.checkpoint(C::WorkCompleted);
    assert_eq!(
        plan(&out),
        ["executing>reviewing:all_tasks_terminal", "plan.goal_met"]
    );
    let mut w = World::streaming();
    let (_, out) = w.checkpoint(C::WorkCompleted);
    assert_eq!(
        plan(&out),
        [
            "planning>executing:auto_start",
            "executing>reviewing:all_tasks_terminal",
            "plan.goal_met"
        ]
    );
}

#[test]
fn given_executing_when_need_information_then_blocked_until_the_user_answers() {
    let (mut w, _, _) = executing();
    w.llm_says();
    let (_, out) = w.checkpoint(C::NeedInformation);
    assert_eq!(plan(&out), ["executing>blocked:all_runnable_blocked"]);
    let (_, out) = w.human_says();
    assert_eq!(plan(&out), ["blocked>executing:dependency_resolved"]);
}

#[test]
fn given_blocked_when_auto_decide_or_begin_work_then_executing_dependency_resolved() {
    let (mut w, _, _) = executing();
    w.checkpoint(C::NeedInformation);
    let out = w.due(Instance::Session(w.conv), DeadlineKind::SessionTimeout);
    assert_eq!(plan(&out), ["blocked>executing:dependency_resolved"]);
    let (mut w, _, _) = executing();
    w.checkpoint(C::NeedInformation);
    let (_, out) = w.checkpoint(C::BeginWork);
    assert_eq!(plan(&out), ["blocked>executing:dependency_resolved"]);
}

#[test]
fn given_planning_executing_or_blocked_when_close_conversation_then_stopped_user_cancel() {
    let mut w = World::streaming();
    let (_, out) = w.checkpoint(C::CloseConversation);
    assert_eq!(plan(&out), ["plan.stopped"]);
    let (mut w, _, _) = executing();
    w.checkpoint(C::NeedInformation);
    let (_, out) = w.checkpoint(C::CloseConversation);
    assert_eq!(plan(&out), ["plan.stopped"]);
    assert_eq!(w.plan_state(), Some(P::Stopped));
}

#[test]
fn given_goal_received_when_close_conversation_then_not_a_plan_input() {
    let mut w = World::started();
    let (_, out) = w.checkpoint(C::CloseConversation);
    assert!(plan(&out).is_empty());
    assert_eq!(w.plan_state(), Some(P::GoalReceived));
}

#[test]
fn given_reviewing_when_new_work_then_replanned_and_executing() {
    let (mut w, _, _) = reviewing();
    w.human_says();
    w.llm_says();
    let (_, out) = w.checkpoint(C::BeginWork);
    assert_eq!(
        plan(&out),
        [
            "reviewing>planning:needs_replan",
            "planning>executing:plan_approved"
        ]
    );
    let (mut w, _, _) = reviewing();
    let (_, out) = w.task(None);
    assert_eq!(
        plan(&out),
        [
            "reviewing>planning:needs_replan",
            "planning>executing:auto_start",
            "plan.updated"
        ]
    );
}

#[test]
fn given_planning_when_need_information_then_not_a_plan_input() {
    let mut w = World::streaming();
    let (_, out) = w.checkpoint(C::NeedInformation);
    assert!(plan(&out).is_empty());
    assert_eq!(w.plan_state(), Some(P::Planning));
}

#[test]
fn given_reviewing_when_a_task_is_worked_again_then_executing_critique_found_issues() {
    let (mut w, a, _) = reviewing();
    let (_, out) = w.task_checkpoint(a, K::WorkStarted);
    assert_eq!(
        plan(&out),
        [
            "reviewing>executing:critique_found_issues",
            "plan.task_started"
        ]
    );
    assert_eq!(
        names_on(&out, Instance::Turn(w.task_turns(a)[1])),
        ["turn.queued", "turn.dispatched", "turn.started"]
    );
}
