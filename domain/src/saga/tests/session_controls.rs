//! The session table of docs/SAGAS.md, continued: operator controls, dispatch withheld
//! while paused, and the restart recovery of FCMP §4.

use super::session_table::suspended;
use super::support::*;
use crate::saga::*;
use crate::testing::id;
use crate::types::CheckpointType as C;

use ConversationState as F;

fn not_allowed(result: Result<Outcome, ControlError>, code: &str) {
    match result {
        Err(ControlError::NotAllowed { code: got, .. }) => assert_eq!(got, code),
        other => panic!("expected NotAllowed({code}), got {other:?}"),
    }
}

fn pause() -> Control {
    Control::Pause {
        reason: "operator".into(),
    }
}

#[test]
fn given_active_when_pause_then_paused_and_queued_turns_wait_until_resume() {
    let mut w = World::started();
    w.human_says();
    let out = w.control(pause()).expect("allowed");
    assert_eq!(names(&out), ["session.paused"]);
    assert_eq!(w.session().reason(), Some("operator"));
    let (_, out) = w.human_says();
    assert_eq!(names(&out), ["turn.queued", "agent.turn_enqueued"]);
    let waiting = queued(&out, 0);
    w.llm_says();
    let (_, out) = w.checkpoint(C::BeginWork);
    assert!(
        !names(&out).contains(&"agent.turn_dispatched"),
        "no dispatch while paused"
    );
    assert_eq!(w.turn_state(waiting), Some(TurnState::Queued));
    let out = w.control(Control::Resume).expect("allowed");
    assert_eq!(
        names(&out),
        [
            "session.resumed",
            "agent.turn_dispatched",
            "turn.dispatched"
        ]
    );
    assert_eq!(w.turn_state(waiting), Some(TurnState::Dispatched));
}

#[test]
fn given_not_active_when_pause_then_session_transition_not_allowed_and_nothing_written() {
    let mut w = World::started();
    not_allowed(w.control(pause()), SESSION_TRANSITION_NOT_ALLOWED);
    w.human_says();
    w.control(pause()).expect("allowed");
    let before = w.sagas.clone();
    not_allowed(w.control(pause()), SESSION_TRANSITION_NOT_ALLOWED);
    assert_eq!(w.sagas, before);
}

#[test]
fn given_suspended_when_resume_then_unsuspended_and_queued_turns_dispatched() {
    let mut w = suspended();
    let (task, _) = w.task(Some(id(W)));
    let out = w.control(Control::Resume).expect("allowed");
    assert_eq!(
        names(&out),
        [
            "session.unsuspended",
            "agent.turn_dispatched",
            "turn.dispatched"
        ]
    );
    assert_eq!(
        w.turn_state(w.task_turns(task)[0]),
        Some(TurnState::Dispatched)
    );
    assert_eq!(w.state(), Some(SessionState::Active));
    assert_eq!(
        w.fcmp(),
        Some(F::Failed),
        "the FCMP state moves with the next turn"
    );
    assert_eq!(w.sagas.consecutive_errors(), 0);
}

#[test]
fn given_active_when_resume_then_not_allowed() {
    let mut w = World::started();
    w.human_says();
    not_allowed(w.control(Control::Resume), SESSION_TRANSITION_NOT_ALLOWED);
}

#[test]
fn given_closed_when_archive_then_archived_and_only_once() {
    let mut w = World::streaming();
    not_allowed(w.control(Control::Archive), SESSION_TRANSITION_NOT_ALLOWED);
    w.checkpoint(C::WorkCompleted);
    let out = w.control(Control::Archive).expect("allowed");
    assert_eq!(names(&out), ["session.archived"]);
    assert_eq!(w.state(), Some(SessionState::Archived));
    not_allowed(w.control(Control::Archive), SESSION_TRANSITION_NOT_ALLOWED);
    not_allowed(w.control(pause()), SESSION_TRANSITION_NOT_ALLOWED);
}

#[test]
fn given_no_conversation_when_controls_then_not_found() {
    let mut w = World::new();
    assert_eq!(
        w.control(Control::Resume),
        Err(ControlError::SessionNotFound)
    );
    let kill = Control::Kill { agent_id: id(9) };
    assert_eq!(w.control(kill), Err(ControlError::AgentNotFound));
    let mut w = World::started();
    let kill = Control::Kill { agent_id: id(9) };
    assert_eq!(w.control(kill), Err(ControlError::AgentNotFound));
}

#[test]
fn given_waiting_user_when_restart_then_preserve_waiting_and_the_deadline_fires_normally() {
    let mut w = World::streaming();
    w.checkpoint(C::NeedInformation);
    let session = Instance::Session(w.conv);
    let row = w.row(session, DeadlineKind::SessionTimeout);
    let out = w.restart(&[]);
    assert_eq!(names(&out), ["restart.preserve_waiting"]);
    assert!(out.deadlines.is_empty());
    assert_eq!(w.row(session, DeadlineKind::SessionTimeout), row);
    assert_eq!(w.fcmp(), Some(F::WaitingUser));
    let out = w.due(session, DeadlineKind::SessionTimeout);
    assert_eq!(names(&out)[0], "interaction.auto_decide.timeout");
}

#[test]
fn given_running_turn_with_overdue_watchdog_when_restart_then_reconciled_to_failed() {
    let mut w = World::streaming();
    let turn = w.active(w.root()).expect("streaming");
    let overdue = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("armed");
    let out = w.restart(&[overdue]);
    assert_eq!(
        names(&out),
        [
            "restart.reconcile_failed",
            "turn.error",
            "conversation.state.changed",
            "conversation.failed"
        ]
    );
    assert_eq!(w.turn(turn).reason(), Some("session_resume_failed"));
    assert_eq!(w.fcmp(), Some(F::Failed));
    assert_eq!(w.row(Instance::Turn(turn), DeadlineKind::TurnTimeout), None);
    let (_, out) = w.human_says();
    assert_eq!(names(&out)[0], "conversation.state.changed");
    assert_eq!(w.fcmp(), Some(F::Queued));
}

#[test]
fn given_dispatched_turn_with_overdue_watchdog_when_restart_then_queued_to_failed() {
    let mut w = World::started();
    w.human_says();
    let turn = w.active(w.root()).expect("dispatched");
    let overdue = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("armed");
    let out = w.restart(&[overdue]);
    assert_eq!(names(&out)[..2], ["restart.reconcile_failed", "turn.error"]);
    assert_eq!(w.fcmp(), Some(F::Failed));
}

#[test]
fn given_nothing_overdue_or_a_stale_row_when_restart_then_nothing() {
    let mut w = World::streaming();
    assert!(w.restart(&[]).is_empty());
    let turn = w.active(w.root()).expect("streaming");
    let mut stale = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("armed");
    stale.epoch -= 1;
    assert!(w.restart(&[stale]).is_empty());
    w.checkpoint(C::WorkCompleted);
    assert!(w.restart(&[]).is_empty());
}

#[test]
fn given_paused_when_turns_time_out_past_the_threshold_then_it_stays_paused() {
    let mut w = World::started();
    w.config.error_threshold = 1;
    w.human_says();
    w.control(pause()).expect("allowed");
    let turn = w.active(w.root()).expect("dispatched before the pause");
    let out = w.due(Instance::Turn(turn), DeadlineKind::TurnTimeout);
    assert_eq!(names(&out), ["turn.error"]);
    assert_eq!(w.state(), Some(SessionState::Paused));
    assert_eq!(w.sagas.consecutive_errors(), 1);
}
