//! The session table of docs/SAGAS.md (lifecycle + FCMP), row by row: facts and deadlines.

use super::support::*;
use crate::saga::rune::session::SessionRune;
use crate::saga::*;
use crate::testing::id;
use crate::types::{ActorKind, CheckpointType as C};

use ConversationState as F;

pub fn session_rune(out: &Outcome, name: &str) -> SessionRune {
    out.runes
        .iter()
        .find_map(|r| match &r.rune {
            Rune::Session(s) if s.name() == name => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {name} in {:?}", names(out)))
}

#[test]
fn given_nothing_when_conversation_started_then_session_created_root_agent_ready_goal_received() {
    let mut w = World::new();
    let out = w.start(&[id(H), id(L)], &[id(L)]);
    assert_eq!(
        names(&out),
        [
            "session.created",
            "agent.spawning",
            "agent.ready",
            "plan.goal_received"
        ]
    );
    assert_eq!(w.state(), Some(SessionState::Created));
    assert_eq!(w.fcmp(), None);
    assert_eq!(w.agent_state(w.root()), Some(AgentState::Idle));
    assert!(out.deadlines.is_empty());
}

#[test]
fn given_a_started_session_when_conversation_started_again_then_anomaly_on_the_session() {
    let mut w = World::started();
    let out = w.start(&[id(H), id(L)], &[id(L)]);
    assert_eq!(names(&out), ["saga.anomaly"]);
    assert_eq!(out.runes[0].instance, Instance::Session(w.conv));
    assert_eq!(w.state(), Some(SessionState::Created));
}

#[test]
fn given_created_when_first_human_message_then_activated_queued_and_turn_dispatched() {
    let mut w = World::started();
    let (_, out) = w.human_says();
    assert_eq!(
        names(&out),
        [
            "session.activated",
            "conversation.state.changed",
            "turn.queued",
            "agent.turn_enqueued",
            "agent.turn_dispatched",
            "turn.dispatched"
        ]
    );
    let SessionRune::Activated(a) = session_rune(&out, "session.activated") else {
        unreachable!()
    };
    assert_eq!(a.root_agent_id, w.root());
    assert_eq!(
        (w.state(), w.fcmp()),
        (Some(SessionState::Active), Some(F::Queued))
    );
    let turn = queued(&out, 0);
    let row = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("armed");
    assert_eq!((row.epoch, row.due_at), (1, w.now + w.config.turn_timeout));
}

#[test]
fn given_created_when_first_message_is_the_llms_then_activated_and_no_turn() {
    let mut w = World::started();
    let (_, out) = w.llm_says();
    assert_eq!(names(&out), ["session.activated"]);
    assert_eq!(w.fcmp(), None);
}

#[test]
fn given_created_when_conversation_started_checkpoint_then_nothing() {
    let mut w = World::started();
    let (_, out) = w.checkpoint(C::ConversationStarted);
    assert!(out.is_empty());
    assert_eq!(w.state(), Some(SessionState::Created));
}

#[test]
fn given_running_without_a_turn_when_human_message_then_queued_and_turn_enqueued() {
    let mut w = World::streaming();
    w.checkpoint(C::BeginWork);
    assert_eq!(w.fcmp(), Some(F::Running));
    let (_, out) = w.human_says();
    assert_eq!(
        names(&out),
        [
            "conversation.state.changed",
            "turn.queued",
            "agent.turn_enqueued",
            "agent.turn_dispatched",
            "turn.dispatched"
        ]
    );
    assert_eq!(w.fcmp(), Some(F::Queued));
}

#[test]
fn given_queued_when_another_human_message_then_no_state_change_and_turn_waits_fifo() {
    let mut w = World::started();
    let (_, first) = w.human_says();
    let (_, out) = w.human_says();
    assert_eq!(names(&out), ["turn.queued", "agent.turn_enqueued"]);
    assert_eq!(w.active(w.root()), Some(queued(&first, 0)));
    let inbox = w.sagas.agents()[&w.root()].inbox().to_vec();
    assert_eq!(inbox, [queued(&out, 0)]);
}

#[test]
fn given_suspended_when_human_message_then_unsuspended_failed_to_queued_and_dispatched() {
    let mut w = suspended();
    let (_, out) = w.human_says();
    assert_eq!(
        names(&out)[..4],
        [
            "session.unsuspended",
            "conversation.state.changed",
            "turn.queued",
            "agent.turn_enqueued"
        ]
    );
    assert!(names(&out).contains(&"turn.dispatched"));
    assert_eq!(
        (w.state(), w.fcmp()),
        (Some(SessionState::Active), Some(F::Queued))
    );
    assert_eq!(w.sagas.consecutive_errors(), 0);
}

#[test]
fn given_no_session_when_message_then_anomaly_on_the_session() {
    let mut w = World::new();
    let (_, out) = w.says(id(H), ActorKind::Human, None);
    assert_eq!(names_on(&out, Instance::Session(w.conv)), ["saga.anomaly"]);
    assert_eq!(w.session().state(), None);
    assert_eq!(w.session().anomalies(), 1);
}

#[test]
fn given_queued_with_dispatched_turn_when_llm_message_then_started_running_and_delta() {
    let mut w = World::started();
    w.human_says();
    let (msg, out) = w.llm_says();
    assert_eq!(
        names(&out),
        [
            "turn.started",
            "conversation.state.changed",
            "plan.created",
            "turn.assistant_delta"
        ]
    );
    assert_eq!(w.fcmp(), Some(F::Running));
    let turn = w.active(w.root()).expect("running");
    assert_eq!(w.turn(turn).last_message_id(), Some(msg));
    let row = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("re-armed");
    assert_eq!(row.epoch, 3);
}

#[test]
fn given_queued_with_dispatched_turn_when_begin_work_then_started_completed_and_running() {
    let mut w = World::started();
    w.human_says();
    let (_, out) = w.checkpoint(C::BeginWork);
    assert_eq!(
        names(&out),
        [
            "turn.started",
            "conversation.state.changed",
            "plan.created",
            "turn.completed",
            "plan.state.changed"
        ]
    );
    assert_eq!(w.fcmp(), Some(F::Running));
}

#[test]
fn given_running_when_begin_work_then_no_state_change() {
    let mut w = World::streaming();
    let (_, out) = w.checkpoint(C::BeginWork);
    assert_eq!(names(&out), ["turn.completed", "plan.state.changed"]);
    assert_eq!(w.fcmp(), Some(F::Running));
}

#[test]
fn given_active_when_error_threshold_reached_then_suspended_failed_and_no_dispatch() {
    let mut w = suspended();
    assert_eq!(w.state(), Some(SessionState::Suspended));
    assert_eq!(w.fcmp(), Some(F::Failed));
    let SessionRune::Suspended(s) = w
        .log
        .iter()
        .find_map(|r| match &r.rune {
            Rune::Session(s @ SessionRune::Suspended(_)) => Some(s.clone()),
            _ => None,
        })
        .expect("suspended")
    else {
        unreachable!()
    };
    assert_eq!(s.reason.as_str(), "error_threshold");
    assert_eq!(
        s.budget_info,
        crate::saga::rune::session::BudgetInfo::Errors {
            consecutive_errors: 3,
            threshold: 3
        }
    );
    let (_, out) = w.task(Some(id(W)));
    assert!(
        !names(&out).contains(&"agent.turn_dispatched"),
        "suspended sessions do not dispatch"
    );
}

/// Three conversation turns time out in a row: the session is suspended.
pub fn suspended() -> World {
    let mut w = World::started();
    for n in 0..3 {
        w.human_says();
        let turn = w.active(w.root()).expect("dispatched");
        let out = w.due(Instance::Turn(turn), DeadlineKind::TurnTimeout);
        assert_eq!(names(&out)[0], "turn.error");
        if n < 2 {
            assert_eq!(w.state(), Some(SessionState::Active));
        } else {
            assert_eq!(
                names(&out),
                [
                    "turn.error",
                    "session.suspended",
                    "conversation.state.changed",
                    "conversation.failed"
                ]
            );
        }
    }
    w
}

#[test]
fn given_a_message_already_applied_when_redelivered_at_its_position_then_nothing_changes() {
    let mut w = World::started();
    w.human_says();
    let before = w.sagas.clone();
    let fact = crate::message::MessageAdded {
        id: id(0x77),
        time: w.now,
        actor_id: id(H),
        conversation_id: w.conv,
        task_id: None,
        content: crate::testing::text("again"),
        external_identity: None,
    };
    let input = Input::MessageAdded {
        fact: &fact,
        author: ActorKind::Human,
    };
    let last = w.sagas.last_position().expect("applied");
    let out = w
        .sagas
        .handle_at(last, input, w.now, &w.config)
        .expect("ok");
    assert!(out.is_empty());
    assert_eq!(w.sagas, before);
}
