//! The agent table of docs/SAGAS.md, row by row.

use super::support::*;
use crate::saga::rune::agent::AgentRune;
use crate::saga::*;
use crate::testing::id;
use crate::types::CheckpointType as C;

fn agent_rune(w: &World, agent: Uuid, name: &str) -> AgentRune {
    w.log
        .iter()
        .rev()
        .find_map(|r| match (&r.instance, &r.rune) {
            (Instance::Agent(a), Rune::Agent(rune)) if *a == agent && rune.name() == name => {
                Some(rune.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {name} for agent {agent}"))
}

use uuid::Uuid;

#[test]
fn given_a_new_conversation_when_started_then_root_agent_of_the_first_ai_actor() {
    let w = World::started();
    let AgentRune::Spawning(s) = agent_rune(&w, w.root(), "agent.spawning") else {
        unreachable!()
    };
    assert_eq!(
        (s.role, s.parent_id, s.actor_id),
        (AgentRole::Root, None, Some(id(L)))
    );
    assert_eq!(s.conversation_id, w.conv);
    assert_eq!(w.sagas.root_agent().and_then(Agent::id), Some(w.root()));
}

#[test]
fn given_no_ai_actor_when_started_then_default_llm_actor_else_a_root_without_actor() {
    let mut w = World::new();
    w.config.default_llm_actor = Some(id(0xD0));
    w.start(&[id(H)], &[]);
    let root = ids::agent_id(w.conv, Some(id(0xD0)));
    assert_eq!(w.agent_state(root), Some(AgentState::Idle));
    let mut w = World::new();
    w.start(&[id(H)], &[]);
    let root = ids::agent_id(w.conv, None);
    assert_eq!(w.sagas.agents()[&root].actor_id(), None);
    w.human_says();
    let (_, out) = w.says(id(0xAA), crate::types::ActorKind::Ai, None);
    assert_eq!(
        names(&out)[0],
        "turn.started",
        "any ai author speaks for an actorless root"
    );
}

#[test]
fn given_a_task_for_a_new_assignee_when_created_then_worker_spawned_ready_and_dispatched() {
    let mut w = World::streaming();
    w.checkpoint(C::BeginWork);
    let (task, out) = w.task(Some(id(W)));
    assert_eq!(
        names_on(&out, Instance::Agent(w.worker())),
        [
            "agent.spawning",
            "agent.ready",
            "agent.turn_enqueued",
            "agent.turn_dispatched"
        ]
    );
    let AgentRune::Spawning(s) = agent_rune(&w, w.worker(), "agent.spawning") else {
        unreachable!()
    };
    assert_eq!((s.role, s.parent_id), (AgentRole::Worker, Some(w.root())));
    assert_eq!(w.active(w.worker()), Some(w.task_turns(task)[0]));
    assert_eq!(w.agent_state(w.worker()), Some(AgentState::RunningTurn));
}

#[test]
fn given_a_task_for_the_llm_when_created_then_no_spawn_and_the_root_gets_a_task_turn() {
    let mut w = World::streaming();
    let (task, out) = w.task(Some(id(L)));
    assert!(!names(&out).contains(&"agent.spawning"));
    assert_eq!(w.turn(w.task_turns(task)[0]).agent_id(), Some(w.root()));
}

#[test]
fn given_idle_when_turns_enqueued_then_dispatched_one_at_a_time_fifo_with_rising_epochs() {
    let mut w = World::streaming();
    w.checkpoint(C::BeginWork);
    let tasks: Vec<Uuid> = (0..3).map(|_| w.task(Some(id(W))).0).collect();
    let turns: Vec<Uuid> = tasks.iter().map(|t| w.task_turns(*t)[0]).collect();
    assert_eq!(w.sagas.agents()[&w.worker()].inbox(), &turns[1..]);
    for (n, task) in tasks.iter().enumerate() {
        assert_eq!(w.active(w.worker()), Some(turns[n]));
        assert_eq!(w.turn(turns[n]).turn_epoch(), Some(n as i64 + 1));
        w.task_checkpoint(*task, crate::types::TaskCheckpointType::WorkStarted);
        let (_, out) = w.task_checkpoint(*task, crate::types::TaskCheckpointType::WorkCompleted);
        if n < 2 {
            let AgentRune::TurnDispatched(d) = agent_rune(&w, w.worker(), "agent.turn_dispatched")
            else {
                unreachable!()
            };
            assert_eq!((d.turn_id, d.turn_epoch), (turns[n + 1], n as i64 + 2));
            assert!(names(&out).contains(&"turn.dispatched"));
        }
    }
    assert_eq!(w.agent_state(w.worker()), Some(AgentState::Idle));
}

#[test]
fn given_running_turn_when_it_ends_then_idle_without_an_agent_rune() {
    let mut w = World::streaming();
    let (_, out) = w.checkpoint(C::BeginWork);
    assert!(names_on(&out, Instance::Agent(w.root())).is_empty());
    assert_eq!(w.agent_state(w.root()), Some(AgentState::Idle));
    assert_eq!(w.active(w.root()), None);
}

#[test]
fn given_running_and_queued_turns_when_killed_then_killed_agent_terminated_and_turns_ended() {
    let mut w = World::streaming();
    let running = w.active(w.root()).expect("streaming");
    let (task, _) = w.task(Some(id(L)));
    let waiting = w.task_turns(task)[0];
    let out = w
        .control(Control::Kill { agent_id: w.root() })
        .expect("allowed");
    assert_eq!(
        names(&out),
        ["turn.interrupted", "turn.interrupted", "agent.terminated"]
    );
    assert_eq!(w.turn(running).reason(), Some("killed"));
    assert!(w.turn(running).deliverable().is_some());
    assert_eq!(w.turn(waiting).reason(), Some("agent_terminated"));
    assert_eq!(w.turn(waiting).deliverable(), None);
    assert_eq!(w.agent_state(w.root()), Some(AgentState::Terminated));
    assert_eq!(
        w.row(Instance::Turn(running), DeadlineKind::TurnTimeout),
        None
    );
}

#[test]
fn given_terminated_when_killed_again_then_agent_transition_not_allowed() {
    let mut w = World::started();
    w.control(Control::Kill { agent_id: w.root() })
        .expect("idle agents can be killed");
    let result = w.control(Control::Kill { agent_id: w.root() });
    assert!(matches!(
        result,
        Err(ControlError::NotAllowed {
            code: AGENT_TRANSITION_NOT_ALLOWED,
            ..
        })
    ));
}

#[test]
fn given_terminated_when_a_turn_would_be_enqueued_then_anomaly_on_the_agent_not_applied() {
    let mut w = World::started();
    w.human_says();
    w.control(Control::Kill { agent_id: w.root() })
        .expect("allowed");
    let (_, out) = w.human_says();
    assert_eq!(names_on(&out, Instance::Agent(w.root())), ["saga.anomaly"]);
    assert!(!names(&out).contains(&"turn.queued"));
    assert_eq!(w.sagas.agents()[&w.root()].anomalies(), 1);
}

#[test]
fn given_session_closing_when_agents_live_then_each_terminated_with_session_closed() {
    let mut w = World::streaming();
    w.task(Some(id(W)));
    w.checkpoint(C::WorkCompleted);
    for agent in [w.root(), w.worker()] {
        let AgentRune::Terminated(t) = agent_rune(&w, agent, "agent.terminated") else {
            unreachable!()
        };
        assert_eq!(t.reason, "session_closed");
        assert_eq!(w.agent_state(agent), Some(AgentState::Terminated));
    }
    let AgentRune::Terminated(t) = agent_rune(&w, w.root(), "agent.terminated") else {
        unreachable!()
    };
    assert_eq!((t.stats.turn_epoch, t.stats.turns.completed), (1, 1));
}

#[test]
fn given_an_agents_runes_when_their_inbox_changes_are_replayed_then_they_give_its_inbox() {
    // Turns queued behind a running one, one dispatched, then the agent killed.
    let mut w = World::streaming();
    w.checkpoint(C::BeginWork);
    let tasks: Vec<Uuid> = (0..3).map(|_| w.task(Some(id(W))).0).collect();
    let replay = |w: &World| {
        let mut inbox: Vec<Uuid> = Vec::new();
        for r in &w.log {
            let (Instance::Agent(a), Rune::Agent(rune)) = (&r.instance, &r.rune) else {
                continue;
            };
            match (*a == w.worker(), rune.inbox_change()) {
                (true, Some(InboxChange::Enqueued(t))) => inbox.push(t),
                (true, Some(InboxChange::Dequeued(t))) => inbox.retain(|q| *q != t),
                (true, Some(InboxChange::Cleared)) => inbox.clear(),
                _ => {}
            }
        }
        inbox
    };
    assert_eq!(replay(&w), w.sagas.agents()[&w.worker()].inbox());
    assert_eq!(replay(&w).len(), 2, "two turns wait behind the first");
    w.task_checkpoint(tasks[0], crate::types::TaskCheckpointType::WorkStarted);
    w.task_checkpoint(tasks[0], crate::types::TaskCheckpointType::WorkCompleted);
    assert_eq!(replay(&w), w.sagas.agents()[&w.worker()].inbox());
    assert_eq!(replay(&w).len(), 1, "the next one was dispatched");
    w.control(Control::Kill {
        agent_id: w.worker(),
    })
    .expect("killed");
    assert!(replay(&w).is_empty(), "a terminated agent has no inbox");
    assert!(w.sagas.agents()[&w.worker()].inbox().is_empty());
}
