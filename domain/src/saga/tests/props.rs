//! Property tests: random input sequences over two conversations (facts from small pools
//! of actors and tasks, random checkpoint types, deadlines due with current or stale
//! epochs, controls, restarts). After every step [`check_invariants`] holds (every rune
//! an edge, INV-TURN-SEQUENTIAL, one terminal rune per turn with its delivery, the fold
//! equal to the live state, closed sessions with terminated agents); a stale deadline
//! changes nothing; and redelivering any prefix changes nothing.

use proptest::prelude::*;
use uuid::Uuid;

use super::journal::{replay_with_redelivery, Owned};
use super::support::*;
use crate::saga::*;
use crate::testing::id;
use crate::types::{ActorKind, CheckpointType, TaskCheckpointType};

#[derive(Debug, Clone, Copy)]
enum Who {
    Human,
    Llm,
    Worker,
    Reviewer,
}

impl Who {
    fn actor(self) -> (Uuid, ActorKind) {
        match self {
            Self::Human => (id(H), ActorKind::Human),
            Self::Llm => (id(L), ActorKind::Ai),
            Self::Worker => (id(W), ActorKind::Ai),
            Self::Reviewer => (id(0xA4), ActorKind::Human),
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Start {
        with_ai: bool,
    },
    Say {
        who: Who,
        task: Option<usize>,
    },
    Checkpoint(CheckpointType),
    Task {
        task: usize,
        assignee: Option<Who>,
    },
    TaskCheckpoint {
        task: usize,
        kind: TaskCheckpointType,
    },
    Due {
        pick: usize,
    },
    Stale {
        pick: usize,
        delta: i64,
    },
    Control(usize),
    Kill(Who),
    Restart {
        overdue: bool,
    },
}

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![
        3 => Just(Who::Human),
        3 => Just(Who::Llm),
        2 => Just(Who::Worker),
        1 => Just(Who::Reviewer),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let task = 0..3usize;
    prop_oneof![
        1 => any::<bool>().prop_map(|with_ai| Op::Start { with_ai }),
        6 => (who(), proptest::option::of(task.clone())).prop_map(|(who, task)| Op::Say { who, task }),
        3 => proptest::sample::select(&CheckpointType::ALL[..3]).prop_map(Op::Checkpoint),
        1 => proptest::sample::select(&CheckpointType::ALL[3..]).prop_map(Op::Checkpoint),
        3 => (task.clone(), proptest::option::of(who()))
            .prop_map(|(task, assignee)| Op::Task { task, assignee }),
        5 => (task, proptest::sample::select(TaskCheckpointType::ALL))
            .prop_map(|(task, kind)| Op::TaskCheckpoint { task, kind }),
        4 => any::<usize>().prop_map(|pick| Op::Due { pick }),
        2 => (any::<usize>(), prop_oneof![Just(-2i64), Just(-1), Just(1)])
            .prop_map(|(pick, delta)| Op::Stale { pick, delta }),
        2 => (0..3usize).prop_map(Op::Control),
        1 => who().prop_map(Op::Kill),
        1 => any::<bool>().prop_map(|overdue| Op::Restart { overdue }),
    ]
}

/// The armed rows, in a stable order.
fn rows(w: &World) -> Vec<Deadline> {
    let mut rows: Vec<Deadline> = w.rows.values().copied().collect();
    rows.sort_by_key(|d| (d.instance, d.kind.as_str()));
    rows
}

fn step(w: &mut World, conv: usize, op: &Op) {
    let task_id = |task: usize| id(0x5000 + 16 * conv as u128 + task as u128);
    match op {
        Op::Start { with_ai } => {
            let ai: &[Uuid] = if *with_ai { &[id(L)] } else { &[] };
            w.start(&[id(H), id(L)], ai);
        }
        Op::Say { who, task } => {
            let (actor, kind) = who.actor();
            w.says(actor, kind, task.map(task_id));
        }
        Op::Checkpoint(kind) => {
            w.checkpoint(*kind);
        }
        Op::Task { task, assignee } => {
            w.task_with(task_id(*task), assignee.map(|a| a.actor().0));
        }
        Op::TaskCheckpoint { task, kind } => {
            w.task_checkpoint(task_id(*task), *kind);
        }
        Op::Due { pick } => {
            let rows = rows(w);
            if let Some(row) = rows.get(pick % rows.len().max(1)) {
                w.due(row.instance, row.kind);
            }
        }
        Op::Stale { pick, delta } => {
            let rows = rows(w);
            if let Some(row) = rows.get(pick % rows.len().max(1)) {
                let stale = Deadline {
                    epoch: row.epoch + delta,
                    ..*row
                };
                let out = w.feed_owned(Owned::Due(stale));
                assert!(
                    out.is_empty(),
                    "a stale deadline changed something: {out:?}"
                );
            }
        }
        Op::Control(n) => {
            let control = [
                Control::Pause {
                    reason: "operator".into(),
                },
                Control::Resume,
                Control::Archive,
            ][*n]
                .clone();
            let before = w.sagas.clone();
            if w.control(control).is_err() {
                assert_eq!(w.sagas, before, "a refused control changed the state");
            }
        }
        Op::Kill(who) => {
            let agent_id = ids::agent_id(w.conv, Some(who.actor().0));
            let before = w.sagas.clone();
            if w.control(Control::Kill { agent_id }).is_err() {
                assert_eq!(w.sagas, before, "a refused kill changed the state");
            }
        }
        Op::Restart { overdue } => {
            let overdue = if *overdue { rows(w) } else { Vec::new() };
            w.restart(&overdue);
        }
    }
    w.now += chrono::Duration::seconds(7);
}

fn worlds() -> Vec<World> {
    let mut second = World::new_for(id(CONV + 1));
    second.config.default_llm_actor = Some(id(0xD0));
    second.config.error_threshold = 2;
    vec![World::new(), second]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn given_random_inputs_when_handled_then_invariants_hold_after_every_step(
        ops in proptest::collection::vec((0..2usize, op()), 1..60),
        cut in any::<usize>(),
    ) {
        let mut worlds = worlds();
        for (conv, op) in &ops {
            step(&mut worlds[*conv], *conv, op);
        }
        for w in &worlds {
            let k = cut % (w.journal.len() + 1);
            replay_with_redelivery(w, &w.journal, k);
        }
    }

    #[test]
    fn given_started_conversations_when_random_inputs_then_invariants_hold(
        ops in proptest::collection::vec(op(), 1..80),
        cut in any::<usize>(),
    ) {
        let mut w = World::started();
        for op in &ops {
            step(&mut w, 0, op);
        }
        let k = cut % (w.journal.len() + 1);
        replay_with_redelivery(&w, &w.journal, k);
    }
}
