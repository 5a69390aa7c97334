//! Test support: one conversation driven input by input, as the processor would (log
//! positions, the deadline table), with the invariants checked after every step.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::checkpoint::ConversationCheckpointCreated;
use crate::conversation::ConversationStarted;
use crate::message::MessageAdded;
use crate::saga::*;
use crate::task::{TaskCheckpointCreated, TaskCreated};
use crate::testing::{id, now, text};
use crate::types::{ActorKind, CheckpointType, TaskCheckpointType};

pub use super::invariants::{check_invariants, check_lease_rows, check_tool_rows};
use super::journal::{Entry, Owned};
pub use super::outputs::*;

/// The conversation, its human H, its LLM L, a worker W.
pub const CONV: u128 = 0xC0;
pub const H: u128 = 0xA1;
pub const L: u128 = 0xA2;
pub const W: u128 = 0xA3;
/// The name workers claim turns under, and their lease in seconds.
pub const WORKER: &str = "worker-1";
pub const LEASE: i64 = 30;

/// The deadline table: one row per (instance, kind).
pub type Rows = HashMap<(Instance, DeadlineKind), Deadline>;

/// A row that falls due leaves the table as it is fed (the processor deletes the row it
/// fires); a made-up row (another epoch or time) leaves the armed one alone.
pub fn fire(rows: &mut Rows, owned: &Owned) {
    if let Owned::Due(due) = owned {
        let key = (due.instance, due.kind);
        if rows.get(&key) == Some(due) {
            rows.remove(&key);
        }
    }
}

/// A conversation under test.
pub struct World {
    pub sagas: Sagas,
    pub config: SagaConfig,
    pub now: DateTime<Utc>,
    pub conv: Uuid,
    pub log: Vec<Recorded>,
    pub rows: Rows,
    pub journal: Vec<(DateTime<Utc>, Entry)>,
    position: i64,
    next: u128,
    /// While set, every fact fed is fenced to this turn ([`World::fenced`]).
    fence: Option<Uuid>,
}

impl World {
    /// Nothing has happened yet.
    pub fn new() -> Self {
        Self::new_for(id(CONV))
    }

    /// Nothing has happened yet in conversation `conv`.
    pub fn new_for(conv: Uuid) -> Self {
        Self {
            sagas: Sagas::default(),
            config: SagaConfig::default(),
            now: now(),
            conv,
            log: Vec::new(),
            rows: HashMap::new(),
            journal: Vec::new(),
            position: 0,
            next: 0x1000,
            fence: None,
        }
    }

    /// `conversation.started` with H (human) and L (ai).
    pub fn started() -> Self {
        let mut world = Self::new();
        world.start(&[id(H), id(L)], &[id(L)]);
        world
    }

    /// `started` and the first exchange: the root's conversation turn streams.
    pub fn streaming() -> Self {
        let mut world = Self::started();
        world.human_says();
        world.llm_says();
        world
    }

    pub fn fresh(&mut self) -> Uuid {
        self.next += 1;
        id(self.next)
    }

    /// Records an outcome as the processor would.
    pub fn record(&mut self, out: &Outcome) {
        self.log.extend(out.runes.iter().cloned());
        for op in &out.deadlines {
            match op {
                DeadlineOp::Arm(d) => {
                    self.rows.insert((d.instance, d.kind), *d);
                }
                DeadlineOp::Disarm { instance, kind } => {
                    self.rows.remove(&(*instance, *kind));
                }
            }
        }
        check_invariants(&self.sagas, &self.log, out.runes.len());
        check_lease_rows(&self.sagas, &self.rows);
        check_tool_rows(&self.sagas, &self.rows);
    }

    /// Feeds an input at the next log position.
    pub fn feed(&mut self, input: Input<'_>) -> Outcome {
        self.feed_fenced(None, input)
    }

    /// Feeds an input at the next log position, fenced to `fence` when set.
    fn feed_fenced(&mut self, fence: Option<Uuid>, input: Input<'_>) -> Outcome {
        self.position += 1;
        let out = self
            .sagas
            .handle_fenced_at(self.position, fence, input, self.now, &self.config)
            .expect("facts never fail");
        self.record(&out);
        out
    }

    /// Feeds an input at the next log position and keeps it in the journal; inside
    /// [`World::fenced`] the fact is fenced to that turn.
    pub fn feed_owned(&mut self, owned: Owned) -> Outcome {
        let owned = match self.fence {
            Some(turn_id) if owned.fence().is_none() => Owned::Fenced(turn_id, Box::new(owned)),
            _ => owned,
        };
        self.journal
            .push((self.now, Entry::At(self.position + 1, owned.clone())));
        fire(&mut self.rows, &owned);
        self.feed_fenced(owned.fence(), owned.input())
    }

    /// Runs `f` with every fact it feeds fenced to `turn_id` (the fact's `turn_id`
    /// metadata, WORKERS.md): `w.fenced(t, World::llm_says)`.
    pub fn fenced<T>(&mut self, turn_id: Uuid, f: impl FnOnce(&mut Self) -> T) -> T {
        let outer = self.fence.replace(turn_id);
        let result = f(self);
        self.fence = outer;
        result
    }

    /// A worker's request on a turn (no log position), journaled; a refusal records
    /// nothing.
    pub fn request(&mut self, turn_id: Uuid, op: WorkerOp) -> Result<Outcome, ControlError> {
        self.journal
            .push((self.now, Entry::Worker(turn_id, op.clone())));
        let input = Input::Worker { turn_id, op };
        let out = self.sagas.handle(input, self.now, &self.config)?;
        self.record(&out);
        Ok(out)
    }

    /// Worker W claims `turn_id` for [`LEASE`] seconds; returns the claim's epoch.
    pub fn claim(&mut self, turn_id: Uuid) -> (i64, Outcome) {
        let op = WorkerOp::Claim {
            worker: WORKER.into(),
            lease: chrono::Duration::seconds(LEASE),
        };
        let out = self.request(turn_id, op).expect("claimable");
        let epoch = self.turn(turn_id).lease().expect("leased").turn_epoch;
        (epoch, out)
    }

    pub fn control(&mut self, control: Control) -> Result<Outcome, ControlError> {
        self.journal
            .push((self.now, Entry::Control(control.clone())));
        let out = self
            .sagas
            .handle(Input::Control(control), self.now, &self.config)?;
        self.record(&out);
        Ok(out)
    }

    pub fn start(&mut self, actor_ids: &[Uuid], ai_actors: &[Uuid]) -> Outcome {
        let fact = ConversationStarted {
            id: self.conv,
            actor_ids: actor_ids.to_vec(),
            title: text("Ship the feature"),
            external_id: None,
            external_source: None,
            status: None,
            organization: None,
            created_at: self.now,
            updated_at: self.now,
        };
        self.feed_owned(Owned::Started(fact, ai_actors.to_vec()))
    }

    /// A message; returns its id.
    pub fn says(
        &mut self,
        actor: Uuid,
        author: ActorKind,
        task_id: Option<Uuid>,
    ) -> (Uuid, Outcome) {
        let fact = MessageAdded {
            id: self.fresh(),
            time: self.now,
            actor_id: actor,
            conversation_id: self.conv,
            task_id,
            content: text("hello"),
            external_identity: None,
        };
        (fact.id, self.feed_owned(Owned::Message(fact, author)))
    }

    pub fn human_says(&mut self) -> (Uuid, Outcome) {
        self.says(id(H), ActorKind::Human, None)
    }

    pub fn llm_says(&mut self) -> (Uuid, Outcome) {
        self.says(id(L), ActorKind::Ai, None)
    }

    pub fn checkpoint(&mut self, checkpoint_type: CheckpointType) -> (Uuid, Outcome) {
        let fact = ConversationCheckpointCreated {
            id: self.fresh(),
            conversation_id: self.conv,
            checkpoint_type,
            summary: text("summary"),
            created_at: self.now,
        };
        (fact.id, self.feed_owned(Owned::Checkpoint(fact)))
    }

    /// `task.created`; returns the task id.
    pub fn task(&mut self, assigned_to: Option<Uuid>) -> (Uuid, Outcome) {
        let task_id = self.fresh();
        (task_id, self.task_with(task_id, assigned_to))
    }

    pub fn task_with(&mut self, task_id: Uuid, assigned_to: Option<Uuid>) -> Outcome {
        let fact = TaskCreated {
            id: task_id,
            conversation_id: self.conv,
            checkpoint_id: id(0xBE),
            instructions: text("do it"),
            assigned_to,
            created_at: self.now,
        };
        self.feed_owned(Owned::Task(fact))
    }

    pub fn task_checkpoint(&mut self, task_id: Uuid, kind: TaskCheckpointType) -> (Uuid, Outcome) {
        let fact = TaskCheckpointCreated {
            id: self.fresh(),
            task_id,
            checkpoint_type: kind,
            created_at: self.now,
        };
        let conversation_id = self.conv;
        (
            fact.id,
            self.feed_owned(Owned::TaskCheckpoint(fact, conversation_id)),
        )
    }

    /// The armed row of (instance, kind).
    pub fn row(&self, instance: Instance, kind: DeadlineKind) -> Option<Deadline> {
        self.rows.get(&(instance, kind)).copied()
    }

    /// Lets the armed row of (instance, kind) fall due (the clock moves to it).
    pub fn due(&mut self, instance: Instance, kind: DeadlineKind) -> Outcome {
        let row = self.row(instance, kind).expect("the deadline is armed");
        self.now = row.due_at;
        self.feed_owned(Owned::Due(row))
    }

    pub fn restart(&mut self, overdue: &[Deadline]) -> Outcome {
        self.journal
            .push((self.now, Entry::Restart(overdue.to_vec())));
        let out = self
            .sagas
            .handle(Input::Restart { overdue }, self.now, &self.config)
            .expect("restart never fails");
        self.record(&out);
        out
    }

    pub fn session(&self) -> &Session {
        self.sagas.session().expect("a session")
    }
    pub fn state(&self) -> Option<SessionState> {
        self.session().state()
    }
    pub fn fcmp(&self) -> Option<ConversationState> {
        self.session().conversation_state()
    }
    pub fn root(&self) -> Uuid {
        ids::agent_id(self.conv, Some(id(L)))
    }
    pub fn worker(&self) -> Uuid {
        ids::agent_id(self.conv, Some(id(W)))
    }
    pub fn agent_state(&self, agent: Uuid) -> Option<AgentState> {
        self.sagas.agent_state(agent)
    }
    pub fn active(&self, agent: Uuid) -> Option<Uuid> {
        self.sagas.active_turn(agent).and_then(Turn::id)
    }
    pub fn turn(&self, turn: Uuid) -> &Turn {
        self.sagas.turns().get(&turn).expect("a turn")
    }
    pub fn turn_state(&self, turn: Uuid) -> Option<TurnState> {
        self.turn(turn).state()
    }
    pub fn task_turns(&self, task: Uuid) -> Vec<Uuid> {
        self.sagas.task_turns(task).to_vec()
    }
    pub fn plan_state(&self) -> Option<PlanState> {
        self.sagas.plan().and_then(Plan::state)
    }
    pub fn anomalies(&self) -> usize {
        self.log.iter().filter(|r| r.rune.is_anomaly()).count()
    }
}
