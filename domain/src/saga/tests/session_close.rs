//! The session table of docs/SAGAS.md, continued: closing (WORK_COMPLETED,
//! CLOSE_CONVERSATION) and what comes after.

use super::session_table::session_rune;
use super::support::*;
use crate::saga::rune::session::SessionRune;
use crate::saga::*;
use crate::testing::id;
use crate::types::CheckpointType as C;

use ConversationState as F;

#[test]
fn given_closed_when_human_message_then_anomaly_and_ai_message_then_nothing() {
    let mut w = World::streaming();
    w.checkpoint(C::WorkCompleted);
    let (_, out) = w.human_says();
    assert_eq!(names_on(&out, Instance::Session(w.conv)), ["saga.anomaly"]);
    assert_eq!(names(&out).len(), 1);
    let (_, out) = w.llm_says();
    assert!(out.is_empty());
    assert_eq!(w.state(), Some(SessionState::Closed));
}

#[test]
fn given_running_when_work_completed_then_succeeded_closing_closed_and_deadlines_disarmed() {
    let mut w = World::streaming();
    let (_, out) = w.checkpoint(C::WorkCompleted);
    assert_eq!(
        names(&out),
        [
            "turn.completed",
            "conversation.state.changed",
            "conversation.completed",
            "plan.state.changed",
            "plan.state.changed",
            "plan.goal_met",
            "session.closing",
            "agent.terminated",
            "session.closed"
        ]
    );
    assert_eq!(
        (w.state(), w.fcmp()),
        (Some(SessionState::Closed), Some(F::Succeeded))
    );
    assert_eq!(w.agent_state(w.root()), Some(AgentState::Terminated));
    assert!(w.rows.is_empty());
}

#[test]
fn given_running_and_queued_turns_when_close_conversation_then_canceled_and_every_turn_ends() {
    let mut w = World::streaming();
    let conversation_turn = w.active(w.root()).expect("streaming");
    let (t1, _) = w.task(Some(id(W)));
    let (t2, _) = w.task(Some(id(W)));
    let (running, waiting) = (w.task_turns(t1)[0], w.task_turns(t2)[0]);
    assert_eq!(w.turn_state(waiting), Some(TurnState::Queued));
    let (_, out) = w.checkpoint(C::CloseConversation);
    assert_eq!(names(&out)[0], "turn.completed");
    assert_eq!(
        names_on(&out, Instance::Turn(conversation_turn)),
        ["turn.completed"]
    );
    assert_eq!(
        names_on(&out, Instance::Session(w.conv)),
        [
            "conversation.state.changed",
            "conversation.failed",
            "session.closing",
            "session.closed"
        ]
    );
    assert_eq!(names_on(&out, Instance::Plan(w.conv)), ["plan.stopped"]);
    for turn in [running, waiting] {
        assert_eq!(names_on(&out, Instance::Turn(turn)), ["turn.interrupted"]);
        assert_eq!(w.turn(turn).reason(), Some("session_closed"));
        assert_eq!(w.turn(turn).deliverable_reason(), Some("session_closed"));
    }
    for agent in [w.root(), w.worker()] {
        assert_eq!(names_on(&out, Instance::Agent(agent)), ["agent.terminated"]);
    }
    let SessionRune::ConversationFailed(f) = session_rune(&out, "conversation.failed") else {
        unreachable!()
    };
    assert_eq!(f.error, "CONVERSATION_CANCELED");
    assert_eq!(w.fcmp(), Some(F::Canceled));
    assert!(w.rows.is_empty());
}

#[test]
fn given_null_state_when_work_completed_or_begin_work_then_direct_changes_without_anomaly() {
    let mut w = World::started();
    let (_, out) = w.checkpoint(C::BeginWork);
    assert_eq!(
        names_on(&out, Instance::Session(w.conv)),
        ["session.activated", "conversation.state.changed"]
    );
    assert_eq!(w.fcmp(), Some(F::Running));
    let mut w = World::started();
    w.checkpoint(C::WorkCompleted);
    assert_eq!(
        (w.state(), w.fcmp()),
        (Some(SessionState::Closed), Some(F::Succeeded))
    );
    assert_eq!(w.anomalies(), 0);
}

#[test]
fn given_closed_when_checkpoint_or_task_created_then_anomaly_and_late_task_reports_no_rune() {
    let mut w = World::streaming();
    w.checkpoint(C::BeginWork);
    let (task, _) = w.task(None);
    w.checkpoint(C::WorkCompleted);
    let session = Instance::Session(w.conv);
    let (_, out) = w.checkpoint(C::NeedInformation);
    assert_eq!(names_on(&out, session), ["saga.anomaly"]);
    let (_, out) = w.task(Some(id(W)));
    assert_eq!(names(&out), ["saga.anomaly"]);
    assert_eq!(out.runes[0].instance, session);
    let (_, out) = w.task_checkpoint(task, crate::types::TaskCheckpointType::WorkApproved);
    assert!(
        out.is_empty(),
        "the plan is past it and the task has no turn"
    );
    assert_eq!(w.state(), Some(SessionState::Closed));
}
