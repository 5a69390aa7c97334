//! The session table of docs/SAGAS.md, continued: waiting for the user (FCMP §2, §3).

use super::session_table::session_rune;
use super::support::*;
use crate::saga::rune::session::SessionRune;
use crate::saga::*;
use crate::types::CheckpointType as C;

use ConversationState as F;

#[test]
fn given_created_when_need_information_first_then_activated_and_null_to_waiting_user() {
    let mut w = World::started();
    let (cp, out) = w.checkpoint(C::NeedInformation);
    assert_eq!(
        names(&out),
        [
            "session.activated",
            "conversation.state.changed",
            "user.input.required"
        ]
    );
    assert_eq!(w.fcmp(), Some(F::WaitingUser));
    assert_eq!(w.session().waiting_checkpoint_id(), Some(cp));
    let row = w.row(Instance::Session(w.conv), DeadlineKind::SessionTimeout);
    assert_eq!(row.map(|r| r.epoch), Some(1));
    assert_eq!(w.anomalies(), 0);
}

#[test]
fn given_waiting_user_when_human_reply_then_reply_accepted_queued_and_timeout_disarmed() {
    let mut w = World::streaming();
    w.checkpoint(C::NeedInformation);
    let (msg, out) = w.human_says();
    assert_eq!(
        names(&out),
        [
            "interaction.reply.accepted",
            "conversation.state.changed",
            "turn.queued",
            "agent.turn_enqueued",
            "agent.turn_dispatched",
            "turn.dispatched"
        ]
    );
    let SessionRune::ReplyAccepted(r) = session_rune(&out, "interaction.reply.accepted") else {
        unreachable!()
    };
    assert_eq!(r.message_id, msg);
    let session = Instance::Session(w.conv);
    assert_eq!(
        op(&out, session, DeadlineKind::SessionTimeout),
        Some(DeadlineOp::Disarm {
            instance: session,
            kind: DeadlineKind::SessionTimeout
        })
    );
    assert_eq!(w.fcmp(), Some(F::Queued));
}

#[test]
fn given_running_when_need_information_then_turn_completed_waiting_user_and_timeout_armed() {
    let mut w = World::streaming();
    let turn = w.active(w.root()).expect("streaming");
    let (cp, out) = w.checkpoint(C::NeedInformation);
    assert_eq!(
        names(&out),
        [
            "turn.completed",
            "conversation.state.changed",
            "user.input.required"
        ]
    );
    assert_eq!(w.fcmp(), Some(F::WaitingUser));
    let row = w
        .row(Instance::Session(w.conv), DeadlineKind::SessionTimeout)
        .expect("armed");
    assert_eq!(
        (row.epoch, row.due_at),
        (1, w.now + w.config.session_timeout)
    );
    assert_eq!(w.row(Instance::Turn(turn), DeadlineKind::TurnTimeout), None);
    assert_eq!(w.session().waiting_checkpoint_id(), Some(cp));
}

#[test]
fn given_waiting_user_when_need_information_again_then_asks_again_with_a_new_wait_epoch() {
    let mut w = World::streaming();
    w.checkpoint(C::NeedInformation);
    let (_, out) = w.checkpoint(C::NeedInformation);
    assert_eq!(names(&out), ["user.input.required"]);
    let row = w.row(Instance::Session(w.conv), DeadlineKind::SessionTimeout);
    assert_eq!(row.map(|r| r.epoch), Some(2));
}

#[test]
fn given_waiting_user_when_session_timeout_due_then_auto_decide_and_a_turn_dispatched() {
    let mut w = World::streaming();
    let (cp, _) = w.checkpoint(C::NeedInformation);
    let out = w.due(Instance::Session(w.conv), DeadlineKind::SessionTimeout);
    assert_eq!(
        names(&out),
        [
            "interaction.auto_decide.timeout",
            "conversation.state.changed",
            "turn.queued",
            "agent.turn_enqueued",
            "agent.turn_dispatched",
            "turn.dispatched"
        ]
    );
    let turn = queued(&out, 0);
    let cause = ids::TurnCause::AutoDecide {
        conversation_id: w.conv,
        wait_epoch: 1,
    };
    assert_eq!(turn, ids::turn_id(w.root(), &cause));
    let input = TurnInput::AutoDecide {
        checkpoint_id: Some(cp),
    };
    assert_eq!(w.turn(turn).input(), Some(&input));
    assert_eq!(w.fcmp(), Some(F::Queued));
}

#[test]
fn given_waiting_user_when_session_timeout_with_stale_epoch_then_nothing_at_all() {
    let mut w = World::streaming();
    w.checkpoint(C::NeedInformation);
    let session = Instance::Session(w.conv);
    let mut stale = w.row(session, DeadlineKind::SessionTimeout).expect("armed");
    w.checkpoint(C::NeedInformation);
    stale.due_at = w.now;
    let out = w.feed(Input::DeadlineDue(&stale));
    assert!(out.is_empty());
    assert_eq!(w.fcmp(), Some(F::WaitingUser));
}

#[test]
fn given_replied_when_old_session_timeout_due_then_nothing_at_all() {
    let mut w = World::streaming();
    w.checkpoint(C::NeedInformation);
    let row = w
        .row(Instance::Session(w.conv), DeadlineKind::SessionTimeout)
        .expect("armed");
    w.human_says();
    assert!(w.feed(Input::DeadlineDue(&row)).is_empty());
}
