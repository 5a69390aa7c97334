//! What a test fed, kept so that it can be fed again: the processor's redelivery.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::support::World;
use crate::checkpoint::ConversationCheckpointCreated;
use crate::conversation::ConversationStarted;
use crate::message::MessageAdded;
use crate::saga::*;
use crate::task::{TaskCheckpointCreated, TaskCreated};
use crate::types::ActorKind;

/// An input, owned.
#[derive(Debug, Clone)]
pub enum Owned {
    Started(ConversationStarted, Vec<Uuid>),
    Message(MessageAdded, ActorKind),
    Checkpoint(ConversationCheckpointCreated),
    Task(TaskCreated),
    TaskCheckpoint(TaskCheckpointCreated, Uuid),
    Due(Deadline),
    /// A fact fenced by a worker's claim: its metadata names the turn (WORKERS.md).
    Fenced(Uuid, Box<Owned>),
}

impl Owned {
    pub fn input(&self) -> Input<'_> {
        match self {
            Self::Started(fact, ai_actors) => Input::ConversationStarted { fact, ai_actors },
            Self::Message(fact, author) => Input::MessageAdded {
                fact,
                author: *author,
            },
            Self::Checkpoint(fact) => Input::CheckpointCreated(fact),
            Self::Task(fact) => Input::TaskCreated(fact),
            Self::TaskCheckpoint(fact, conversation_id) => Input::TaskCheckpointCreated {
                fact,
                conversation_id: *conversation_id,
            },
            Self::Due(deadline) => Input::DeadlineDue(deadline),
            Self::Fenced(_, owned) => owned.input(),
        }
    }

    /// The turn a fenced fact belongs to.
    pub fn fence(&self) -> Option<Uuid> {
        match self {
            Self::Fenced(turn_id, _) => Some(*turn_id),
            _ => None,
        }
    }
}

/// One step of a test, at its clock.
#[derive(Debug, Clone)]
pub enum Entry {
    /// An input at a log position.
    At(i64, Owned),
    /// An operator control (no log position); `Err` refusals included.
    Control(Control),
    /// A worker's request on a turn (no log position); `Err` refusals included.
    Worker(Uuid, WorkerOp),
    /// A restart with these overdue rows.
    Restart(Vec<Deadline>),
}

/// Feeds `journal[..k]`, redelivers every positioned input of it (each must change
/// nothing), then feeds the rest; the result must equal `original` rune for rune.
pub fn replay_with_redelivery(original: &World, journal: &[(DateTime<Utc>, Entry)], k: usize) {
    let mut w = World::new_for(original.conv);
    w.config = original.config;
    let feed = |w: &mut World, now: DateTime<Utc>, entry: &Entry| {
        w.now = now;
        match entry {
            Entry::At(position, owned) => {
                if w.sagas.last_position().is_none_or(|last| *position > last) {
                    super::support::fire(&mut w.rows, owned);
                }
                let out = w
                    .sagas
                    .handle_fenced_at(*position, owned.fence(), owned.input(), now, &w.config)
                    .expect("facts never fail");
                w.record(&out);
                out
            }
            Entry::Control(control) => {
                let out = w
                    .sagas
                    .handle(Input::Control(control.clone()), now, &w.config);
                let out = out.unwrap_or_default();
                w.record(&out);
                out
            }
            Entry::Worker(turn_id, op) => {
                let input = Input::Worker {
                    turn_id: *turn_id,
                    op: op.clone(),
                };
                let out = w.sagas.handle(input, now, &w.config).unwrap_or_default();
                w.record(&out);
                out
            }
            Entry::Restart(overdue) => w.restart(overdue),
        }
    };
    for (now, entry) in &journal[..k] {
        feed(&mut w, *now, entry);
    }
    let before = w.sagas.clone();
    for (now, entry) in &journal[..k] {
        if let Entry::At(..) = entry {
            let out = feed(&mut w, *now, entry);
            assert!(
                out.is_empty(),
                "a redelivered input changed something: {out:?}"
            );
        }
    }
    assert_eq!(w.sagas, before, "redelivery changed the state");
    for (now, entry) in &journal[k..] {
        feed(&mut w, *now, entry);
    }
    assert_eq!(w.sagas, original.sagas, "redelivery changed the end state");
    assert_eq!(w.log, original.log, "redelivery changed the runes");
}
