//! The turn table of docs/SAGAS.md, row by row.

use super::support::*;
use crate::saga::rune::turn::{FinalOutput, TurnRune};
use crate::saga::*;
use crate::testing::id;
use crate::types::{ActorKind, CheckpointType as C, TaskCheckpointType as K};

/// The conversation is past BEGIN_WORK and W works task `task` (its turn dispatched).
pub fn working() -> (World, Uuid) {
    let mut w = World::streaming();
    w.checkpoint(C::BeginWork);
    let (task, _) = w.task(Some(id(W)));
    (w, task)
}

use uuid::Uuid;

#[test]
fn given_enqueue_then_queued_with_kind_task_and_input() {
    let mut w = World::started();
    let (msg, out) = w.human_says();
    let TurnRune::Queued(q) = turn_rune(&out, "turn.queued") else {
        unreachable!()
    };
    assert_eq!(
        (q.kind, q.task_id, q.agent_id),
        (TurnKind::Conversation, None, w.root())
    );
    assert_eq!(q.input, TurnInput::Message { message_id: msg });
    assert_eq!(
        q.turn_id,
        ids::turn_id(w.root(), &ids::TurnCause::Message(msg))
    );
    let (w, task) = working();
    let turn = w.task_turns(task)[0];
    assert_eq!(
        (w.turn(turn).kind(), w.turn(turn).task_id()),
        (Some(TurnKind::Task), Some(task))
    );
    assert_eq!(turn, ids::turn_id(w.worker(), &ids::TurnCause::Task(task)));
}

#[test]
fn given_queued_when_its_agent_leases_it_then_dispatched_with_the_epoch_and_watchdog_armed() {
    let (w, task) = working();
    let turn = w.task_turns(task)[0];
    assert_eq!(w.turn_state(turn), Some(TurnState::Dispatched));
    assert_eq!(w.turn(turn).turn_epoch(), Some(1));
    let row = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("armed");
    assert_eq!((row.epoch, row.due_at), (1, w.now + w.config.turn_timeout));
}

#[test]
fn given_dispatched_conversation_turn_when_checkpoint_then_started_and_completed_without_message() {
    let mut w = World::started();
    let (_, out) = w.human_says();
    let turn = queued(&out, 0);
    let (cp, out) = w.checkpoint(C::ConversationStarted);
    assert_eq!(
        names_on(&out, Instance::Turn(turn)),
        ["turn.started", "turn.completed"]
    );
    let TurnRune::Completed(c) = turn_rune(&out, "turn.completed") else {
        unreachable!()
    };
    let output = FinalOutput::ConversationCheckpoint {
        checkpoint_id: cp,
        checkpoint_type: C::ConversationStarted,
    };
    assert_eq!(c.final_output, output);
    assert_eq!(
        (c.deliverable, c.deliverable_reason.as_deref()),
        (None, Some("no_message"))
    );
    assert_eq!(c.usage.messages, 0);
}

#[test]
fn given_dispatched_task_turn_when_work_started_then_streaming_and_watchdog_re_armed() {
    let (mut w, task) = working();
    let turn = w.task_turns(task)[0];
    let (_, out) = w.task_checkpoint(task, K::WorkStarted);
    assert_eq!(names_on(&out, Instance::Turn(turn)), ["turn.started"]);
    assert_eq!(w.turn_state(turn), Some(TurnState::Streaming));
    let row = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("armed");
    assert_eq!(row.epoch, 2);
}

#[test]
fn given_streaming_task_turn_when_messages_then_only_the_assignees_with_task_id_are_deltas() {
    let (mut w, task) = working();
    let turn = w.task_turns(task)[0];
    w.task_checkpoint(task, K::WorkStarted);
    let (msg, out) = w.says(id(W), ActorKind::Ai, Some(task));
    assert_eq!(names(&out), ["turn.assistant_delta"]);
    assert_eq!(
        w.row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
            .map(|r| r.epoch),
        Some(3)
    );
    let (_, out) = w.says(id(W), ActorKind::Ai, None);
    assert!(out.is_empty(), "no task_id: not the task's output");
    let (_, out) = w.says(id(0xEE), ActorKind::Ai, Some(task));
    assert!(out.is_empty(), "not the assignee");
    assert_eq!(w.turn(turn).last_message_id(), Some(msg));
}

#[test]
fn given_no_conversation_turn_running_when_llm_message_then_no_rune_and_no_anomaly() {
    let mut w = World::streaming();
    w.checkpoint(C::BeginWork);
    let (_, out) = w.llm_says();
    assert!(out.is_empty());
}

#[test]
fn given_streaming_when_checkpoint_then_completed_with_the_last_message_delivered() {
    let mut w = World::streaming();
    let turn = w.active(w.root()).expect("streaming");
    let (msg, _) = w.llm_says();
    let (cp, out) = w.checkpoint(C::BeginWork);
    let TurnRune::Completed(c) = turn_rune(&out, "turn.completed") else {
        unreachable!()
    };
    assert_eq!(
        (
            c.deliverable,
            c.deliverable_reason.clone(),
            c.usage.messages
        ),
        (Some(msg), None, 2)
    );
    assert_eq!(
        c.final_output,
        FinalOutput::ConversationCheckpoint {
            checkpoint_id: cp,
            checkpoint_type: C::BeginWork
        }
    );
    assert_eq!(w.turn(turn).terminal_rune(), Some("turn.completed"));
    assert_eq!(
        op(&out, Instance::Turn(turn), DeadlineKind::TurnTimeout),
        Some(DeadlineOp::Disarm {
            instance: Instance::Turn(turn),
            kind: DeadlineKind::TurnTimeout
        })
    );
}

#[test]
fn given_streaming_conversation_turn_when_human_steers_then_interrupted_with_partial_output() {
    let mut w = World::streaming();
    let turn = w.active(w.root()).expect("streaming");
    let last = w.turn(turn).last_message_id();
    let (_, out) = w.human_says();
    assert_eq!(
        names(&out)[..2],
        ["turn.interrupted", "conversation.state.changed"]
    );
    let TurnRune::Interrupted(i) = turn_rune(&out, "turn.interrupted") else {
        unreachable!()
    };
    assert_eq!(
        (i.reason.as_str(), i.partial_output.messages, i.deliverable),
        ("steer", 1, last)
    );
    assert_eq!(w.fcmp(), Some(ConversationState::Queued));
    assert_ne!(w.active(w.root()), Some(turn));
}

#[test]
fn given_running_when_watchdog_due_then_error_and_the_agent_takes_its_next_turn() {
    let (mut w, task) = working();
    let (next_task, _) = w.task(Some(id(W)));
    let turn = w.task_turns(task)[0];
    w.task_checkpoint(task, K::WorkStarted);
    let out = w.due(Instance::Turn(turn), DeadlineKind::TurnTimeout);
    let TurnRune::Error(e) = turn_rune(&out, "turn.error") else {
        unreachable!()
    };
    assert_eq!(
        (e.error_type.as_str(), e.deliverable_reason.as_deref()),
        ("timeout", Some("watchdog"))
    );
    assert_eq!(w.active(w.worker()), Some(w.task_turns(next_task)[0]));
    assert_eq!(w.sagas.consecutive_errors(), 1);
    let next = w.task_turns(next_task)[0];
    let out = w.due(Instance::Turn(next), DeadlineKind::TurnTimeout);
    assert_eq!(
        names_on(&out, Instance::Turn(next)),
        ["turn.error"],
        "a dispatched turn that never starts"
    );
}

#[test]
fn given_streaming_when_watchdog_with_stale_epoch_or_after_the_end_then_nothing_at_all() {
    let mut w = World::streaming();
    let turn = w.active(w.root()).expect("streaming");
    let old = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("armed");
    w.llm_says();
    assert!(w.feed(Input::DeadlineDue(&old)).is_empty());
    let current = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("armed");
    w.checkpoint(C::BeginWork);
    assert!(w.feed(Input::DeadlineDue(&current)).is_empty());
    assert_eq!(w.turn_state(turn), Some(TurnState::Completed));
}
