//! Token budgets (WORKERS.md "Budgets"; ECHS INV-AGENT-BUDGET, session `budget_exhausted`
//! and `budget_replenished`), row by row: usage adds up per turn, agent and session; the
//! budget's end suspends the session; only budget lifts that.

use super::journal::replay_with_redelivery;
use super::support::*;
use crate::saga::rune::session::{BudgetInfo, SessionRune};
use crate::saga::rune::Rune;
use crate::saga::*;
use crate::testing::id;

/// A conversation whose sessions get `budget` tokens.
fn budgeted(budget: Option<u64>) -> World {
    let mut w = World::new();
    w.config.token_budget = budget;
    w.start(&[id(H), id(L)], &[id(L)]);
    w
}

/// A human message, and the root's dispatched turn claimed: (turn, epoch).
fn claimed(w: &mut World) -> (uuid::Uuid, i64) {
    w.human_says();
    let turn = w.active(w.root()).expect("dispatched");
    let (epoch, _) = w.claim(turn);
    (turn, epoch)
}

fn usage(turn_epoch: i64, input_tokens: u64, output_tokens: u64) -> WorkerOp {
    WorkerOp::Usage {
        turn_epoch,
        input_tokens,
        output_tokens,
    }
}

#[test]
fn given_a_budget_when_the_session_is_created_then_its_config_and_view_carry_it() {
    let w = budgeted(Some(1000));
    assert_eq!(w.session().token_budget(), Some(1000));
    let view = w.sagas.session_view(w.now).expect("session");
    assert_eq!((view.tokens_used, view.token_budget), (0, Some(1000)));
    assert_eq!(budgeted(None).session().token_budget(), None);
}

#[test]
fn given_usage_below_the_budget_when_reported_then_it_adds_up_on_turn_agent_and_session() {
    let mut w = budgeted(Some(1000));
    let (turn, epoch) = claimed(&mut w);
    w.request(turn, usage(epoch, 100, 20)).expect("usage");
    let out = w.request(turn, usage(epoch, 30, 5)).expect("usage");
    assert_eq!(names(&out), ["turn.usage_reported"]);
    assert_eq!(w.turn(turn).usage(), Some((130, 25)));
    assert_eq!(
        w.sagas.agent_view(w.root(), w.now).map(|a| a.tokens_used),
        Some(155)
    );
    assert_eq!(
        w.sagas.session_view(w.now).map(|s| s.tokens_used),
        Some(155)
    );
    assert_eq!(w.state(), Some(SessionState::Active));
}

#[test]
fn given_usage_reaching_the_budget_when_reported_then_suspended_budget_exhausted_and_nothing_dispatched(
) {
    let mut w = budgeted(Some(100));
    // A second message while the first turn is only dispatched queues behind it.
    w.human_says();
    let (turn, epoch) = claimed(&mut w);
    let out = w.request(turn, usage(epoch, 80, 20)).expect("usage");
    assert_eq!(names(&out), ["turn.usage_reported", "session.suspended"]);
    let suspended = out.runes.iter().find_map(|r| match &r.rune {
        Rune::Session(SessionRune::Suspended(s)) => Some(s.clone()),
        _ => None,
    });
    let suspended = suspended.expect("session.suspended");
    assert_eq!(suspended.reason, BUDGET_EXHAUSTED);
    assert_eq!(
        suspended.budget_info,
        BudgetInfo::Tokens {
            tokens_used: 100,
            token_budget: 100
        }
    );
    assert!(w.session().budget_exhausted());
    // The running turn may finish; the queued one is not dispatched.
    let (_, done) = w.fenced(turn, |w| {
        w.checkpoint(crate::types::CheckpointType::BeginWork)
    });
    assert!(
        names(&done).contains(&"turn.completed"),
        "{:?}",
        names(&done)
    );
    assert_eq!(w.active(w.root()), None);
    replay_with_redelivery(&w, &w.journal, 3);
}

#[test]
fn given_budget_exhausted_when_a_human_speaks_or_the_operator_resumes_then_still_suspended() {
    let mut w = budgeted(Some(10));
    let (turn, epoch) = claimed(&mut w);
    w.request(turn, usage(epoch, 10, 0)).expect("usage");
    let (_, out) = w.human_says();
    assert!(
        !names(&out).contains(&"session.unsuspended"),
        "{:?}",
        names(&out)
    );
    assert_eq!(w.state(), Some(SessionState::Suspended));
    let refused = w.control(Control::Resume).expect_err("refused");
    assert!(
        matches!(refused, ControlError::NotAllowed { code, .. } if code == SESSION_TRANSITION_NOT_ALLOWED)
    );
    assert_eq!(w.state(), Some(SessionState::Suspended));
}

#[test]
fn given_budget_exhausted_when_budget_added_beyond_the_use_then_unsuspended_and_dispatching_again()
{
    let mut w = budgeted(Some(10));
    w.human_says();
    let (turn, epoch) = claimed(&mut w);
    w.request(turn, usage(epoch, 10, 0)).expect("usage");
    let (_, _) = w.fenced(turn, |w| {
        w.checkpoint(crate::types::CheckpointType::BeginWork)
    });
    assert_eq!(w.active(w.root()), None);
    let out = w
        .control(Control::AddBudget { add_tokens: 500 })
        .expect("added");
    assert_eq!(
        names_on(&out, Instance::Session(w.conv))[..2],
        ["session.budget_added", "session.unsuspended"]
    );
    assert_eq!(w.session().token_budget(), Some(510));
    assert_eq!(w.state(), Some(SessionState::Active));
    assert!(
        w.active(w.root()).is_some(),
        "the queued turn is dispatched"
    );
    replay_with_redelivery(&w, &w.journal, 2);
}

#[test]
fn given_budget_exhausted_when_too_little_is_added_then_budget_added_and_still_suspended() {
    let mut w = budgeted(Some(10));
    let (turn, epoch) = claimed(&mut w);
    w.request(turn, usage(epoch, 40, 0)).expect("usage");
    let out = w
        .control(Control::AddBudget { add_tokens: 5 })
        .expect("added");
    assert_eq!(names(&out), ["session.budget_added"]);
    assert_eq!(w.state(), Some(SessionState::Suspended));
}

#[test]
fn given_an_error_suspension_when_budget_added_then_budget_added_and_still_suspended() {
    let mut w = budgeted(Some(1000));
    w.config.error_threshold = 1;
    let (turn, epoch) = claimed(&mut w);
    let error = WorkerOp::Error {
        turn_epoch: epoch,
        error_type: "model_error".into(),
        message: "failed".into(),
    };
    w.request(turn, error).expect("error");
    assert_eq!(w.state(), Some(SessionState::Suspended));
    let out = w
        .control(Control::AddBudget { add_tokens: 5 })
        .expect("added");
    assert_eq!(names(&out), ["session.budget_added"]);
    assert_eq!(w.state(), Some(SessionState::Suspended));
    // An error suspension is still lifted by a human message.
    let (_, out) = w.human_says();
    assert!(names(&out).contains(&"session.unsuspended"));
}

#[test]
fn given_an_unlimited_or_closed_session_when_budget_added_then_refused_and_nothing_written() {
    let mut w = budgeted(None);
    let before = w.log.len();
    let refused = w
        .control(Control::AddBudget { add_tokens: 5 })
        .expect_err("refused");
    assert!(matches!(refused, ControlError::NotAllowed { .. }));
    assert_eq!(w.log.len(), before);
    let mut w = budgeted(Some(10));
    w.checkpoint(crate::types::CheckpointType::CloseConversation);
    let before = w.log.len();
    assert!(w.control(Control::AddBudget { add_tokens: 5 }).is_err());
    assert_eq!(w.log.len(), before);
}
