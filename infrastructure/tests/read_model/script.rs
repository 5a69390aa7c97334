//! Random logs of valid facts, as the domain would produce them: actors; conversations
//! of one or two registered actors; conversation checkpoints; tasks on a `BEGIN_WORK`
//! checkpoint of their conversation; task checkpoints numbered on in their task's stream;
//! messages by a member, sometimes about one of the conversation's tasks, sometimes
//! backdated — and the sagas' runes in between, which the read model passes over. Server
//! times mostly grow with the log, with the skew concurrent writers give.
//!
//! Actors and conversations are forgotten now and then; from then on the log reads the
//! texts their keys sealed as `null`, the payload marked `"forgotten": true` (as
//! `DbLogReader` does once a key is destroyed) — for the facts logged after the forgetting
//! only, as the live projection meets them, or for every fact of the party, as a rebuild
//! after the forgetting reads the log ([`log`]'s `read_after_forgetting`).

use std::collections::HashSet;

use chrono::{DateTime, Duration, TimeZone, Utc};
use pm_application::log::{LogPosition, LoggedEvent};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::forgetting::{ACTOR_FORGOTTEN, CONVERSATION_FORGOTTEN};
use pm_domain::message::MessageAdded;
use pm_domain::personal::personal_fields;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use pm_domain::types::{CheckpointType, TaskCheckpointType};
use proptest::prelude::*;
use serde_json::{json, Value};
use uuid::Uuid;

/// Every conversation checkpoint type and task checkpoint type the domain knows: a new one
/// is generated as soon as it exists.
const CHECKPOINTS: &[CheckpointType] = CheckpointType::ALL;
const TASK_TYPES: &[TaskCheckpointType] = TaskCheckpointType::ALL;
const ORGS: [Option<&str>; 3] = [Some("acme"), Some("globex"), None];

/// One step of a script; indexes pick among the entities made so far (modulo), and a
/// step that needs an entity there is none of yet makes it first (a task's conversation
/// gets a `BEGIN_WORK` checkpoint first when it has none).
#[derive(Debug, Clone)]
pub enum Step {
    /// An actor registers (an AI when `true`, with an external identity when `true`).
    Actor(bool, bool),
    /// A conversation of actors `.0` and `.1` (one actor when they are the same), of
    /// organization `.2`, with its optional labels when `.3`.
    Conversation(usize, usize, usize, bool),
    /// A checkpoint of type `.1` in conversation `.0`.
    Checkpoint(usize, usize),
    /// A task in conversation `.0`, maybe assigned.
    Task(usize, Option<usize>),
    /// A checkpoint of type `.1` of task `.0`.
    TaskCheckpoint(usize, usize),
    /// A message in conversation `.0` by member `.1`, maybe about one of its tasks, maybe
    /// backdated by some seconds.
    Message(usize, usize, Option<usize>, Option<i64>),
    /// A saga's rune.
    Rune,
    /// Actor `.0` is forgotten (once: forgetting again logs nothing).
    ForgetActor(usize),
    /// Conversation `.0` is forgotten (once).
    ForgetConversation(usize),
}

/// A step and the server clock's skew (seconds back) at its event.
pub fn step() -> impl Strategy<Value = (Step, i64)> {
    let ix = || 0usize..1000;
    let step = prop_oneof![
        2 => (any::<bool>(), any::<bool>()).prop_map(|(ai, ext)| Step::Actor(ai, ext)),
        2 => (ix(), ix(), 0usize..3, any::<bool>())
            .prop_map(|(a, b, o, l)| Step::Conversation(a, b, o, l)),
        3 => (ix(), 0..CHECKPOINTS.len()).prop_map(|(c, k)| Step::Checkpoint(c, k)),
        3 => (ix(), proptest::option::of(ix())).prop_map(|(c, a)| Step::Task(c, a)),
        5 => (ix(), 0..TASK_TYPES.len()).prop_map(|(t, k)| Step::TaskCheckpoint(t, k)),
        4 => (ix(), ix(), proptest::option::of(ix()), proptest::option::of(0i64..5000))
            .prop_map(|(c, a, t, back)| Step::Message(c, a, t, back)),
        1 => Just(Step::Rune),
        1 => ix().prop_map(Step::ForgetActor),
        1 => ix().prop_map(Step::ForgetConversation),
    ];
    (step, prop_oneof![3 => Just(0i64), 1 => 0i64..3])
}

struct Conversation {
    id: Uuid,
    members: Vec<Uuid>,
    begin_work: Option<Uuid>,
    tasks: Vec<Uuid>,
}

struct Task {
    id: Uuid,
    sequence: i64,
}

/// The log a script writes.
#[derive(Default)]
struct Log {
    events: Vec<LoggedEvent>,
    actors: Vec<Uuid>,
    conversations: Vec<Conversation>,
    tasks: Vec<Task>,
    ids: u128,
    forgotten_actors: HashSet<Uuid>,
    forgotten_conversations: HashSet<Uuid>,
}

/// The actor and the conversation whose keys seal the texts of a payload of `name`.
fn parties(name: &str, payload: &Value) -> (Option<Uuid>, Option<Uuid>) {
    let id = |field: &str| {
        payload
            .get(field)
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
    };
    match name {
        ActorRegistered::NAME => (id("id"), None),
        MessageAdded::NAME => (id("actor_id"), id("conversation_id")),
        ConversationStarted::NAME => (None, id("id")),
        _ => (None, id("conversation_id")),
    }
}

fn pick<T>(items: &[T], ix: usize) -> Option<&T> {
    (!items.is_empty()).then(|| &items[ix % items.len()])
}

fn time(t: DateTime<Utc>) -> String {
    pm_domain::time::format(&t)
}

impl Log {
    /// Appends a fact (or rune) at the next position, recorded at `at`.
    fn push(&mut self, at: DateTime<Utc>, kind: (&str, Uuid, i64), name: &str, payload: Value) {
        let mut payload = payload;
        self.unreadable(name, &mut payload);
        let conversation_id = payload
            .get("conversation_id")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok());
        self.events.push(LoggedEvent {
            position: LogPosition(self.events.len() as i64 + 1),
            aggregate_type: kind.0.into(),
            aggregate_id: kind.1.to_string(),
            sequence: kind.2,
            event_type: name.into(),
            event_version: "1.0".into(),
            payload: payload.into(),
            metadata: json!({"correlation_id": "test", "role": "test", "recorded_at": time(at)})
                .into(),
            conversation_id,
            organization: None,
        });
    }

    /// Nulls the personal texts of `payload` (an event of `name`) when one of the parties
    /// whose keys seal them is forgotten, and marks it, as the log reader does.
    fn unreadable(&self, name: &str, payload: &mut Value) {
        let fields = personal_fields(name);
        let (actor, conversation) = parties(name, payload);
        let forgotten = actor.is_some_and(|a| self.forgotten_actors.contains(&a))
            || conversation.is_some_and(|c| self.forgotten_conversations.contains(&c));
        let Some(object) = payload.as_object_mut().filter(|_| forgotten) else {
            return;
        };
        let mut any = false;
        for field in fields {
            if let Some(value) = object.get_mut(field.field) {
                *value = Value::Null;
                any = true;
            }
        }
        if any {
            object.insert("forgotten".into(), Value::Bool(true));
        }
    }

    /// Every fact of a forgotten party read as a rebuild after the forgetting reads it.
    fn read_after_forgetting(&mut self) {
        let mut events = std::mem::take(&mut self.events);
        for e in &mut events {
            let mut payload = e.payload.value().clone();
            self.unreadable(&e.event_type, &mut payload);
            if &payload != e.payload.value() {
                e.payload = payload.into();
            }
        }
        self.events = events;
    }

    fn forget(&mut self, at: DateTime<Utc>, actor: Option<usize>, conversation: Option<usize>) {
        let p = |id: Uuid| json!({"id": id, "forgotten_at": time(at)});
        if let Some(ix) = actor {
            let id = self.some_actor(at, ix);
            if self.forgotten_actors.insert(id) {
                self.push(at, ("actor", id, 2), ACTOR_FORGOTTEN, p(id));
            }
        }
        if let Some(ix) = conversation {
            let c = self.some_conversation(at, ix);
            let id = self.conversations[c].id;
            if self.forgotten_conversations.insert(id) {
                self.push(at, ("conversation", id, 2), CONVERSATION_FORGOTTEN, p(id));
            }
        }
    }

    fn id(&mut self) -> (Uuid, u128) {
        self.ids += 1;
        (Uuid::from_u128(self.ids), self.ids)
    }

    fn actor(&mut self, at: DateTime<Utc>, ai: bool, ext: bool) -> Uuid {
        let (id, n) = self.id();
        let kind = if ai { "ai" } else { "human" };
        let mut p = json!({"id": id, "kind": kind, "display_name": format!("actor {n}"),
            "created_at": time(at)});
        if ext {
            p["external_identity"] = json!(format!("ext-{n}"));
        }
        self.actors.push(id);
        self.push(at, ("actor", id, 1), ActorRegistered::NAME, p);
        id
    }

    /// Actor `ix`, registering one when there is none.
    fn some_actor(&mut self, at: DateTime<Utc>, ix: usize) -> Uuid {
        match pick(&self.actors, ix) {
            Some(a) => *a,
            None => self.actor(at, false, false),
        }
    }

    fn conversation(
        &mut self,
        at: DateTime<Utc>,
        (a, b, org, labels): (usize, usize, usize, bool),
    ) -> usize {
        let (a, b) = (self.some_actor(at, a), self.some_actor(at, b));
        let (id, n) = self.id();
        let members = if a == b { vec![a] } else { vec![a, b] };
        let now = time(at);
        let mut p = json!({"id": id, "actor_ids": members, "title": format!("title {n}"),
            "created_at": now, "updated_at": now});
        if let Some(org) = ORGS[org] {
            p["organization"] = json!(org);
        }
        if labels {
            p["external_id"] = json!(format!("x-{n}"));
            p["external_source"] = json!("crm");
            p["status"] = json!("open");
        }
        self.conversations.push(Conversation {
            id,
            members,
            begin_work: None,
            tasks: Vec::new(),
        });
        self.push(at, ("conversation", id, 1), ConversationStarted::NAME, p);
        self.conversations.len() - 1
    }

    /// Conversation `ix`, starting one when there is none.
    fn some_conversation(&mut self, at: DateTime<Utc>, ix: usize) -> usize {
        match self.conversations.len() {
            0 => self.conversation(at, (ix, ix / 2, ix % 3, ix.is_multiple_of(2))),
            len => ix % len,
        }
    }

    fn checkpoint(&mut self, at: DateTime<Utc>, c: usize, kind: usize) {
        let c = self.some_conversation(at, c);
        let (id, n) = self.id();
        let conversation = &mut self.conversations[c];
        if CHECKPOINTS[kind] == CheckpointType::BeginWork {
            conversation.begin_work = Some(id);
        }
        let p = json!({"id": id, "conversation_id": conversation.id,
            "checkpoint_type": CHECKPOINTS[kind].as_str(), "summary": format!("summary {n}"),
            "created_at": time(at)});
        self.push(
            at,
            ("checkpoint", id, 1),
            ConversationCheckpointCreated::NAME,
            p,
        );
    }

    /// A task in conversation `c`, after a `BEGIN_WORK` checkpoint there when it has none.
    fn task(&mut self, at: DateTime<Utc>, c: usize, assignee: Option<usize>) -> usize {
        let c = self.some_conversation(at, c);
        if self.conversations[c].begin_work.is_none() {
            self.checkpoint(at, c, 1);
        }
        let assigned = assignee.map(|a| self.some_actor(at, a));
        let (id, n) = self.id();
        let conversation = &mut self.conversations[c];
        let mut p = json!({"id": id, "conversation_id": conversation.id,
            "checkpoint_id": conversation.begin_work, "instructions": format!("do {n}"),
            "created_at": time(at)});
        if let Some(actor) = assigned {
            p["assigned_to"] = json!(actor);
        }
        conversation.tasks.push(id);
        self.tasks.push(Task { id, sequence: 1 });
        self.push(at, ("task", id, 1), TaskCreated::NAME, p);
        self.tasks.len() - 1
    }

    fn task_checkpoint(&mut self, at: DateTime<Utc>, t: usize, kind: usize) {
        let t = match self.tasks.len() {
            0 => self.task(at, t, None),
            len => t % len,
        };
        let (id, _) = self.id();
        let task = &mut self.tasks[t];
        task.sequence += 1;
        let (task_id, sequence) = (task.id, task.sequence);
        let p = json!({"id": id, "task_id": task_id, "type": TASK_TYPES[kind].as_str(),
            "created_at": time(at)});
        self.push(
            at,
            ("task", task_id, sequence),
            TaskCheckpointCreated::NAME,
            p,
        );
    }

    fn message(
        &mut self,
        at: DateTime<Utc>,
        (c, a, t, back): (usize, usize, Option<usize>, Option<i64>),
    ) {
        let c = self.some_conversation(at, c);
        let (id, n) = self.id();
        let conversation = &self.conversations[c];
        let actor = conversation.members[a % conversation.members.len()];
        let task = t.and_then(|t| pick(&conversation.tasks, t).copied());
        let sent = at - Duration::seconds(back.unwrap_or(0));
        let mut p = json!({"id": id, "time": time(sent), "actor_id": actor,
            "conversation_id": conversation.id, "content": format!("message {n}")});
        if let Some(task) = task {
            p["task_id"] = json!(task);
        }
        if n % 3 == 0 {
            p["external_identity"] = json!(format!("m-{n}"));
        }
        self.push(at, ("message", id, 1), MessageAdded::NAME, p);
    }

    fn step(&mut self, step: &Step, at: DateTime<Utc>) {
        match *step {
            Step::Actor(ai, ext) => {
                self.actor(at, ai, ext);
            }
            Step::Conversation(a, b, org, labels) => {
                self.conversation(at, (a, b, org, labels));
            }
            Step::Checkpoint(c, kind) => self.checkpoint(at, c, kind),
            Step::Task(c, assignee) => {
                self.task(at, c, assignee);
            }
            Step::TaskCheckpoint(t, kind) => self.task_checkpoint(at, t, kind),
            Step::Message(c, a, t, back) => self.message(at, (c, a, t, back)),
            Step::Rune => {
                let (id, _) = self.id();
                let p = json!({"instance": id});
                self.push(at, ("saga", id, 1), "saga.session.created", p);
            }
            Step::ForgetActor(a) => self.forget(at, Some(a), None),
            Step::ForgetConversation(c) => self.forget(at, None, Some(c)),
        }
    }
}

/// The log of `steps`: positions from 1, server times one second apart (minus each
/// step's skew) from 2026-11-22, with microseconds; read as a rebuild after the last
/// forgetting would read it when `read_after_forgetting`.
pub fn log(steps: &[(Step, i64)], read_after_forgetting: bool) -> Vec<LoggedEvent> {
    let start = Utc
        .with_ymd_and_hms(2026, 11, 22, 0, 0, 0)
        .single()
        .unwrap_or_default();
    let mut log = Log::default();
    for (n, (step, skew)) in steps.iter().enumerate() {
        let at = start + Duration::seconds(n as i64 - skew) + Duration::microseconds(n as i64 * 7);
        log.step(step, at);
    }
    if read_after_forgetting {
        log.read_after_forgetting();
    }
    log.events
}
