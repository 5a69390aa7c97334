//! The turn table of docs/SAGAS.md, continued: task turns and their task checkpoints.

use super::support::*;
use super::turn_table::working;
use crate::saga::rune::turn::{FinalOutput, TurnRune};
use crate::saga::*;
use crate::testing::id;
use crate::types::{CheckpointType as C, TaskCheckpointType as K};

#[test]
fn given_streaming_task_turn_when_work_completed_then_completed_and_next_dispatched() {
    let (mut w, task) = working();
    let (next_task, _) = w.task(Some(id(W)));
    let turn = w.task_turns(task)[0];
    w.task_checkpoint(task, K::WorkStarted);
    let (cp, out) = w.task_checkpoint(task, K::WorkCompleted);
    let TurnRune::Completed(c) = turn_rune(&out, "turn.completed") else {
        unreachable!()
    };
    let output = FinalOutput::TaskCheckpoint {
        task_checkpoint_id: cp,
        checkpoint_type: K::WorkCompleted,
    };
    assert_eq!(c.final_output, output);
    assert_eq!(w.turn_state(turn), Some(TurnState::Completed));
    assert_eq!(w.active(w.worker()), Some(w.task_turns(next_task)[0]));
}

#[test]
fn given_streaming_task_turn_when_work_paused_then_interrupted() {
    let (mut w, task) = working();
    let turn = w.task_turns(task)[0];
    w.task_checkpoint(task, K::WorkStarted);
    let (_, out) = w.task_checkpoint(task, K::WorkPaused);
    assert_eq!(names_on(&out, Instance::Turn(turn)), ["turn.interrupted"]);
    assert_eq!(w.turn(turn).reason(), Some("work_paused"));
    assert_eq!(w.turn(turn).deliverable_reason(), Some("work_paused"));
}

#[test]
fn given_paused_task_when_work_started_again_then_a_resume_turn_dispatched_and_started() {
    let (mut w, task) = working();
    w.task_checkpoint(task, K::WorkStarted);
    w.task_checkpoint(task, K::WorkPaused);
    let (cp, out) = w.task_checkpoint(task, K::WorkStarted);
    let turn = w.task_turns(task)[1];
    assert_eq!(
        names_on(&out, Instance::Turn(turn)),
        ["turn.queued", "turn.dispatched", "turn.started"]
    );
    assert_eq!(
        turn,
        ids::turn_id(w.worker(), &ids::TurnCause::TaskCheckpoint(cp))
    );
    let resume = TurnInput::TaskResume {
        task_id: task,
        task_checkpoint_id: cp,
    };
    assert_eq!(w.turn(turn).input(), Some(&resume));
    assert_eq!(
        w.row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
            .map(|r| r.epoch),
        Some(3)
    );
}

#[test]
fn given_a_task_turn_queued_behind_another_when_work_started_then_anomaly_not_applied() {
    let (mut w, first) = working();
    let (second, _) = w.task(Some(id(W)));
    let turn = w.task_turns(second)[0];
    let (_, out) = w.task_checkpoint(second, K::WorkStarted);
    assert_eq!(names_on(&out, Instance::Turn(turn)), ["saga.anomaly"]);
    assert_eq!(w.turn_state(turn), Some(TurnState::Queued));
    assert_eq!(w.active(w.worker()), Some(w.task_turns(first)[0]));
}

#[test]
fn given_completed_task_when_work_rejected_then_a_retry_turn_is_dispatched() {
    let (mut w, task) = working();
    w.task_checkpoint(task, K::WorkStarted);
    w.task_checkpoint(task, K::WorkCompleted);
    let (cp, out) = w.task_checkpoint(task, K::WorkRejected);
    let retry = w.task_turns(task)[1];
    assert_eq!(
        names_on(&out, Instance::Turn(retry)),
        ["turn.queued", "turn.dispatched"]
    );
    let input = TurnInput::TaskRetry {
        task_id: task,
        task_checkpoint_id: cp,
    };
    assert_eq!(w.turn(retry).input(), Some(&input));
}

#[test]
fn given_completed_task_when_work_completed_again_then_anomaly_on_its_turn() {
    let (mut w, task) = working();
    w.task_checkpoint(task, K::WorkStarted);
    w.task_checkpoint(task, K::WorkCompleted);
    let turn = w.task_turns(task)[0];
    let (_, out) = w.task_checkpoint(task, K::WorkCompleted);
    assert_eq!(names_on(&out, Instance::Turn(turn)), ["saga.anomaly"]);
    assert_eq!(w.turn(turn).anomalies(), 1);
}

#[test]
fn given_task_without_assignee_when_its_checkpoints_then_no_turn_rune_and_no_anomaly() {
    let mut w = World::streaming();
    w.checkpoint(C::BeginWork);
    let (task, out) = w.task(None);
    assert!(!names(&out).contains(&"turn.queued"));
    for kind in [
        K::WorkStarted,
        K::WorkPaused,
        K::WorkStarted,
        K::WorkCompleted,
        K::WorkRejected,
    ] {
        let (_, out) = w.task_checkpoint(task, kind);
        assert!(out
            .runes
            .iter()
            .all(|r| matches!(r.instance, Instance::Plan(_))));
    }
    assert_eq!(w.anomalies(), 0);
}

#[test]
fn given_completed_task_when_work_approved_then_no_turn_effect() {
    let (mut w, task) = working();
    w.task(Some(id(W)));
    w.task_checkpoint(task, K::WorkStarted);
    w.task_checkpoint(task, K::WorkCompleted);
    let (_, out) = w.task_checkpoint(task, K::WorkApproved);
    assert_eq!(names(&out), ["plan.critique"]);
}
