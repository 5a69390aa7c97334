//! The read-side rows of the composite (API.md): composite-derived fields included.

use super::support::*;
use crate::saga::*;
use crate::testing::id;
use crate::types::{CheckpointType as C, TaskCheckpointType as K};

#[test]
fn given_a_working_conversation_when_viewed_then_rows_carry_the_composite_fields() {
    let mut w = World::streaming();
    let first = w.active(w.root()).expect("streaming");
    let session = w.sagas.session_view(w.now).expect("a session row");
    assert_eq!(session.state, SessionState::Active);
    assert_eq!(session.conversation_state, Some(ConversationState::Running));
    assert_eq!(
        (session.root_agent_id, session.agent_ids.clone()),
        (Some(w.root()), vec![w.root()])
    );
    let root = w.sagas.agent_view(w.root(), w.now).expect("an agent row");
    assert_eq!(
        (root.state, root.active_turn_id, root.turn_epoch),
        (AgentState::RunningTurn, Some(first), 1)
    );

    w.checkpoint(C::BeginWork);
    let root = w.sagas.agent_view(w.root(), w.now).expect("an agent row");
    assert_eq!(
        (root.state, root.active_turn_id),
        (AgentState::Idle, None),
        "idle once its turn ended"
    );
    let row = w.sagas.turn_view(first, w.now).expect("a turn row");
    assert_eq!(row.state, TurnState::Completed);
    assert_eq!(row.terminal_rune.as_deref(), Some("turn.completed"));
    assert!(row.deliverable.is_some());

    let (a, _) = w.task(Some(id(W)));
    let (b, out) = w.task(Some(id(W)));
    let worker = w.sagas.agent_view(w.worker(), w.now).expect("a worker row");
    assert_eq!(worker.queued_turn_ids, w.task_turns(b));
    assert_eq!(worker.active_turn_id, w.task_turns(a).first().copied());
    assert_eq!(w.sagas.turn_views(w.now).len(), 3);
    assert_eq!(w.sagas.turn_views(w.now)[2].task_id, Some(b));

    let touched = w.sagas.touched(&out);
    assert!(touched.contains(&Instance::Agent(w.worker())));
    assert!(touched.contains(&Instance::Plan(w.conv)));
    let (_, out) = w.task_checkpoint(a, K::WorkCompleted);
    let touched = w.sagas.touched(&out);
    assert!(
        touched.contains(&Instance::Agent(w.worker())),
        "a turn's end changes its agent's row"
    );
}

#[test]
fn given_a_fact_of_another_conversation_when_handled_then_nothing() {
    let mut w = World::started();
    let mut other = World::new_for(id(0xC9));
    other.start(&[id(H), id(L)], &[id(L)]);
    let Some((_, super::journal::Entry::At(_, owned))) = other.journal.first().cloned() else {
        panic!("a journaled start");
    };
    let before = w.sagas.clone();
    let out = w
        .sagas
        .handle(owned.input(), w.now, &w.config)
        .expect("facts never fail");
    assert!(out.is_empty());
    assert_eq!(w.sagas, before);
}
