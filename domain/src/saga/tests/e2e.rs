//! The end-to-end script: a conversation from start to archive, through a question, an
//! auto-decide, three tasks worked strictly one at a time, a watchdog timeout and a retry,
//! with no `saga.anomaly` anywhere.

use super::support::*;
use crate::saga::*;
use crate::testing::id;
use crate::types::{ActorKind, CheckpointType as C, TaskCheckpointType as K};

use ConversationState as F;

/// Runs the script, asserting as it goes; returns the world at the end.
pub fn script() -> World {
    let mut w = World::new();
    w.start(&[id(H), id(L)], &[id(L)]);
    assert_eq!(w.state(), Some(SessionState::Created));

    // H asks; L answers: the first conversation turn streams, the plan is being made.
    w.human_says();
    let t1 = w.active(w.root()).expect("dispatched");
    w.llm_says();
    assert_eq!(
        (w.state(), w.fcmp()),
        (Some(SessionState::Active), Some(F::Running))
    );
    assert_eq!(w.turn_state(t1), Some(TurnState::Streaming));
    assert_eq!(w.plan_state(), Some(PlanState::Planning));

    // L needs information; nobody answers: the session timeout auto-decides.
    w.checkpoint(C::NeedInformation);
    assert_eq!(
        (w.fcmp(), w.turn_state(t1)),
        (Some(F::WaitingUser), Some(TurnState::Completed))
    );
    let out = w.due(Instance::Session(w.conv), DeadlineKind::SessionTimeout);
    assert_eq!(names(&out)[0], "interaction.auto_decide.timeout");
    let t2 = w
        .active(w.root())
        .expect("the auto-decide turn is dispatched");
    assert_eq!(w.fcmp(), Some(F::Queued));

    // L begins work and creates three tasks for W.
    w.checkpoint(C::BeginWork);
    assert_eq!(
        (w.fcmp(), w.turn_state(t2)),
        (Some(F::Running), Some(TurnState::Completed))
    );
    assert_eq!(w.plan_state(), Some(PlanState::Executing));
    let tasks: Vec<_> = (0..3).map(|_| w.task(Some(id(W))).0).collect();
    let turn = |w: &World, n: usize| w.task_turns(tasks[n])[0];
    assert_eq!(w.active(w.worker()), Some(turn(&w, 0)));
    for n in [1, 2] {
        assert_eq!(
            w.turn_state(turn(&w, n)),
            Some(TurnState::Queued),
            "strictly one at a time"
        );
    }
    assert_eq!(
        w.sagas.agents()[&w.worker()].inbox(),
        [turn(&w, 1), turn(&w, 2)]
    );

    // Task 1 worked; task 2's turn is leased next (FIFO) and times out.
    w.task_checkpoint(tasks[0], K::WorkStarted);
    let (msg, _) = w.says(id(W), ActorKind::Ai, Some(tasks[0]));
    w.task_checkpoint(tasks[0], K::WorkCompleted);
    assert_eq!(w.turn(turn(&w, 0)).deliverable(), Some(msg));
    assert_eq!(w.active(w.worker()), Some(turn(&w, 1)));
    let out = w.due(Instance::Turn(turn(&w, 1)), DeadlineKind::TurnTimeout);
    assert_eq!(names(&out)[0], "turn.error");
    assert_eq!(w.turn(turn(&w, 1)).deliverable_reason(), Some("watchdog"));
    assert_eq!(w.active(w.worker()), Some(turn(&w, 2)));
    assert_eq!(
        w.state(),
        Some(SessionState::Active),
        "one error is below the threshold"
    );

    // Task 3 worked; task 2 retried.
    w.task_checkpoint(tasks[2], K::WorkStarted);
    w.says(id(W), ActorKind::Ai, Some(tasks[2]));
    w.task_checkpoint(tasks[2], K::WorkCompleted);
    assert_eq!(w.turn_state(turn(&w, 2)), Some(TurnState::Completed));
    assert_eq!(w.agent_state(w.worker()), Some(AgentState::Idle));
    let (_, out) = w.task_checkpoint(tasks[1], K::WorkStarted);
    let retry = w.task_turns(tasks[1])[1];
    assert_eq!(
        names_on(&out, Instance::Turn(retry)),
        ["turn.queued", "turn.dispatched", "turn.started"]
    );

    // L declares the work completed: the session closes, every agent is terminated.
    let (_, out) = w.checkpoint(C::WorkCompleted);
    assert_eq!(names(&out).last(), Some(&"session.closed"));
    assert_eq!(
        (w.state(), w.fcmp()),
        (Some(SessionState::Closed), Some(F::Succeeded))
    );
    assert_eq!(w.plan_state(), Some(PlanState::GoalMet));
    assert_eq!(w.turn(retry).reason(), Some("session_closed"));
    for agent in [w.root(), w.worker()] {
        assert_eq!(w.agent_state(agent), Some(AgentState::Terminated));
    }
    assert!(w.rows.is_empty(), "no deadline outlives the session");

    let out = w
        .control(Control::Archive)
        .expect("closed sessions archive");
    assert_eq!(names(&out), ["session.archived"]);
    w
}

#[test]
fn given_the_end_to_end_script_when_run_then_every_machine_ends_right_and_no_anomaly() {
    let w = script();
    assert_eq!(w.state(), Some(SessionState::Archived));
    assert_eq!(w.anomalies(), 0, "realistic flows record no anomaly");
    let ended: Vec<_> = w.sagas.turns().values().map(Turn::terminal_rune).collect();
    assert_eq!(ended.len(), 6);
    assert!(ended.iter().all(Option::is_some));
    let by = |state| {
        w.sagas
            .turns()
            .values()
            .filter(|t| t.state() == Some(state))
            .count()
    };
    assert_eq!(
        (
            by(TurnState::Completed),
            by(TurnState::Error),
            by(TurnState::Interrupted)
        ),
        (4, 1, 1)
    );
    let fresh = Sagas::restore(w.sagas.last_position(), &w.log);
    assert_eq!(
        fresh, w.sagas,
        "replaying the conversation's runes gives the same sagas"
    );
}
