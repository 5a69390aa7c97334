//! The workloads: what each worker sends, through `pm-client` as a service calling
//! project-manager would.
//!
//! - `messages`: AI messages into one conversation (a new `Message` aggregate each).
//! - `task-checkpoints`: `WORK_STARTED` spread over 64 tasks (appends to existing
//!   aggregates).
//! - `ingest`: what an ingress service sends — per ten commands a new person, a new
//!   conversation of that person and the AI, and eight of the person's messages (each a
//!   turn for the sagas).
//! - `llm`: what the LLM service sends — per five commands a `BEGIN_WORK` checkpoint, a
//!   task under it, `WORK_STARTED`, an AI message about the task, `WORK_COMPLETED`.
//! - `read`: what an analyst reads — a conversation, a page of tasks, a page of messages,
//!   a task with its history, the task statistics.
//! - `mixed`: of every four workers two ingest, one works as the LLM service, one reads.
//! - `workers`: people's messages become turns that workers claim and answer, fenced
//!   (its own driver: see [`crate::workers`]).
//!
//! Every mix works on a [`World`] made first: the AI actor, a conversation of it alone, a
//! `BEGIN_WORK` checkpoint and 64 tasks under it.

use std::collections::BTreeMap;
use std::time::Instant;

use pm_client::{
    text, ActorKind, AddMessageInput, CheckpointType, Client, ConversationCheckpointCreated,
    ConversationStarted, CreateConversationCheckpointInput, CreateTaskCheckpointInput,
    CreateTaskInput, Error, Label, MessageQuery, RegisterActorInput, StartConversationInput,
    StatsGroup, TaskCheckpointType, TaskQuery, Uuid, Written,
};

use crate::stats::Samples;

/// A workload, as `--mix` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// AI messages into one conversation.
    Messages,
    /// `WORK_STARTED` over 64 existing tasks.
    TaskCheckpoints,
    /// People, conversations and their messages.
    Ingest,
    /// Checkpoints, tasks, task checkpoints, AI messages.
    Llm,
    /// The query API.
    Read,
    /// Ingest, LLM and reads together (2:1:1).
    Mixed,
    /// Human messages; workers claim each turn and answer it, fenced.
    Workers,
}

/// What one worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// See [`Mix::Messages`].
    Messages,
    /// See [`Mix::TaskCheckpoints`].
    TaskCheckpoints,
    /// See [`Mix::Ingest`].
    Ingest,
    /// See [`Mix::Llm`].
    Llm,
    /// See [`Mix::Read`].
    Read,
}

impl Mix {
    /// The role of worker `i`.
    pub fn role(self, i: usize) -> Role {
        match self {
            Mix::Messages => Role::Messages,
            Mix::TaskCheckpoints => Role::TaskCheckpoints,
            Mix::Ingest => Role::Ingest,
            Mix::Llm => Role::Llm,
            Mix::Read => Role::Read,
            Mix::Mixed => match i % 4 {
                0 | 1 => Role::Ingest,
                2 => Role::Llm,
                _ => Role::Read,
            },
            // Not driven by roles (see `crate::workers`); what its ingress sends.
            Mix::Workers => Role::Ingest,
        }
    }
}

/// What the workers share: made once before the load.
#[derive(Debug, Clone)]
pub struct World {
    /// The AI actor of every conversation.
    pub ai: Uuid,
    /// A conversation of the AI alone (the `messages` mix).
    pub conversation: Uuid,
    /// 64 tasks under it.
    pub tasks: Vec<Uuid>,
}

/// One worker's results.
#[derive(Debug, Default)]
pub struct Tally {
    /// Commands answered `201`/`200`.
    pub commands: u64,
    /// Queries answered `200`.
    pub queries: u64,
    /// Command latencies, ms.
    pub command_ms: Samples,
    /// Query latencies, ms.
    pub query_ms: Samples,
    /// Failures by status (`"transport"` without one).
    pub errors: BTreeMap<String, u64>,
}

impl Tally {
    /// Adds `other` into this one.
    pub fn merge(&mut self, other: Tally) {
        self.commands += other.commands;
        self.queries += other.queries;
        self.command_ms.extend(other.command_ms);
        self.query_ms.extend(other.query_ms);
        for (k, v) in other.errors {
            *self.errors.entry(k).or_default() += v;
        }
    }

    /// Counts a failure by its status (`"transport"` without one).
    pub fn fail(&mut self, e: &Error) {
        let key = e
            .status()
            .map_or_else(|| "transport".into(), |s| s.to_string());
        self.fail_with(key);
    }

    /// Counts a failure under `key`.
    pub fn fail_with(&mut self, key: String) {
        *self.errors.entry(key).or_default() += 1;
    }

    /// Records a command's outcome; its entity when it succeeded.
    fn command<T>(&mut self, started: Instant, r: Result<Written<T>, Error>) -> Option<T> {
        match r {
            Ok(w) => {
                self.commands += 1;
                self.command_ms.push(ms(started));
                Some(w.entity)
            }
            Err(e) => {
                self.fail(&e);
                None
            }
        }
    }

    fn query<T>(&mut self, started: Instant, r: Result<T, Error>) -> Option<T> {
        match r {
            Ok(answer) => {
                self.queries += 1;
                self.query_ms.push(ms(started));
                Some(answer)
            }
            Err(e) => {
                self.fail(&e);
                None
            }
        }
    }
}

/// Milliseconds since `t`.
pub fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn content(s: &str) -> pm_client::NonEmptyText {
    text(s).unwrap_or_else(|_| unreachable!("a non-empty literal"))
}

/// A person's registration.
pub fn person(name: &str) -> RegisterActorInput {
    RegisterActorInput {
        kind: ActorKind::Human,
        display_name: content(name),
        external_identity: None,
    }
}

/// The organization every conversation is started in (`--organization`): a scoped
/// principal must name one of its own.
pub static ORGANIZATION: std::sync::OnceLock<Label> = std::sync::OnceLock::new();

/// A conversation of `actors`.
pub fn conversation(actors: Vec<Uuid>) -> StartConversationInput {
    StartConversationInput {
        actor_ids: actors,
        title: content("bench: fix the login bug"),
        external_id: None,
        external_source: None,
        status: None,
        organization: ORGANIZATION.get().cloned(),
    }
}

/// A message by `actor`.
pub fn message(actor: Uuid, task: Option<Uuid>) -> AddMessageInput {
    AddMessageInput {
        actor_id: actor,
        content: content("hello from the benchmark"),
        task_id: task,
        external_identity: None,
        time: None,
    }
}

fn begin_work() -> CreateConversationCheckpointInput {
    CreateConversationCheckpointInput {
        checkpoint_type: CheckpointType::BeginWork,
        summary: content("bench: reproduced, fixing"),
    }
}

fn task(checkpoint: Uuid, assignee: Option<Uuid>) -> CreateTaskInput {
    CreateTaskInput {
        checkpoint_id: checkpoint,
        instructions: content("bench: patch the middleware"),
        assigned_to: assignee,
    }
}

fn progress(t: TaskCheckpointType) -> CreateTaskCheckpointInput {
    CreateTaskCheckpointInput { checkpoint_type: t }
}

/// Makes the [`World`] with `count` tasks, assigned to the AI when `assigned` (each then has
/// a task turn, queued behind the AI's active turn, so each `WORK_STARTED` of the mix is an
/// anomaly the sagas record).
///
/// # Errors
/// When the service refuses or cannot be reached.
pub async fn world(client: &Client, count: usize, assigned: bool) -> Result<World, Error> {
    let ai = client
        .register_actor(RegisterActorInput {
            kind: ActorKind::Ai,
            display_name: content("bench assistant"),
            external_identity: None,
        })
        .await?
        .entity
        .id;
    let conversation: ConversationStarted = client
        .start_conversation(conversation_of_ai(ai))
        .await?
        .entity;
    let checkpoint: ConversationCheckpointCreated = client
        .create_conversation_checkpoint(conversation.id, begin_work())
        .await?
        .entity;
    let mut tasks = Vec::with_capacity(count);
    for _ in 0..count {
        let t = client
            .create_task(conversation.id, task(checkpoint.id, assigned.then_some(ai)))
            .await?;
        tasks.push(t.entity.id);
    }
    Ok(World {
        ai,
        conversation: conversation.id,
        tasks,
    })
}

fn conversation_of_ai(ai: Uuid) -> StartConversationInput {
    conversation(vec![ai])
}

/// A worker's state between its steps.
#[derive(Debug, Default)]
pub struct Worker {
    step: usize,
    person: Option<Uuid>,
    conversation: Option<Uuid>,
    checkpoint: Option<Uuid>,
    task: Option<Uuid>,
}

impl Worker {
    /// Sends the worker's next request and records it in `tally`; whether it succeeded.
    pub async fn step(
        &mut self,
        i: usize,
        role: Role,
        c: &Client,
        w: &World,
        tally: &mut Tally,
    ) -> bool {
        let step = self.step;
        self.step += 1;
        let t = Instant::now();
        match role {
            Role::Messages => {
                let r = c.add_message(w.conversation, message(w.ai, None)).await;
                tally.command(t, r).is_some()
            }
            Role::TaskCheckpoints => {
                let task = w.tasks[(i + step * 7) % w.tasks.len()];
                let r = c
                    .create_task_checkpoint(task, progress(TaskCheckpointType::WorkStarted))
                    .await;
                tally.command(t, r).is_some()
            }
            Role::Ingest => self.ingest(step, c, w, tally).await,
            Role::Llm => self.llm(step, c, w, tally).await,
            Role::Read => read(i + step, c, w, tally).await,
        }
    }

    async fn ingest(&mut self, step: usize, c: &Client, w: &World, tally: &mut Tally) -> bool {
        let t = Instant::now();
        match (step % 10, self.person, self.conversation) {
            (0, _, _) | (_, None, _) => {
                self.conversation = None;
                let r = c.register_actor(person("bench person")).await;
                self.person = tally.command(t, r).map(|a| a.id);
                self.person.is_some()
            }
            (1, Some(p), _) | (_, Some(p), None) => {
                let r = c.start_conversation(conversation(vec![p, w.ai])).await;
                self.conversation = tally.command(t, r).map(|c| c.id);
                self.conversation.is_some()
            }
            (_, Some(p), Some(cid)) => {
                let r = c.add_message(cid, message(p, None)).await;
                tally.command(t, r).is_some()
            }
        }
    }

    async fn llm(&mut self, step: usize, c: &Client, w: &World, tally: &mut Tally) -> bool {
        let t = Instant::now();
        let cid = w.conversation;
        match (step % 5, self.checkpoint, self.task) {
            (0, _, _) | (_, None, _) => {
                self.task = None;
                let r = c.create_conversation_checkpoint(cid, begin_work()).await;
                self.checkpoint = tally.command(t, r).map(|c| c.id);
                self.checkpoint.is_some()
            }
            (1, Some(cp), _) | (_, Some(cp), None) => {
                let r = c.create_task(cid, task(cp, Some(w.ai))).await;
                self.task = tally.command(t, r).map(|t| t.id);
                self.task.is_some()
            }
            (2, _, Some(task)) => {
                let r = c
                    .create_task_checkpoint(task, progress(TaskCheckpointType::WorkStarted))
                    .await;
                tally.command(t, r).is_some()
            }
            (3, _, Some(task)) => {
                let r = c.add_message(cid, message(w.ai, Some(task))).await;
                tally.command(t, r).is_some()
            }
            (_, _, Some(task)) => {
                let r = c
                    .create_task_checkpoint(task, progress(TaskCheckpointType::WorkCompleted))
                    .await;
                tally.command(t, r).is_some()
            }
        }
    }
}

async fn read(n: usize, c: &Client, w: &World, tally: &mut Tally) -> bool {
    let r = c.read();
    let t = Instant::now();
    match n % 5 {
        0 => tally
            .query(t, r.conversation(w.conversation).await)
            .is_some(),
        1 => tally
            .query(t, r.tasks(&TaskQuery::new().limit(50)).await)
            .is_some(),
        2 => {
            let q = MessageQuery::of(w.conversation).limit(50);
            tally.query(t, r.messages(&q).await).is_some()
        }
        3 => tally
            .query(t, r.task(w.tasks[n % w.tasks.len()]).await)
            .is_some(),
        _ => tally
            .query(t, r.task_stats(StatsGroup::All).await)
            .is_some(),
    }
}
