//! [`SagaEngine`]: the machines of recently active conversations in memory, and the three
//! ways inputs reach them — facts (processor batches), due deadlines and the start-up
//! recovery, operators' controls — each ending in one [`SagaStore::commit`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use pm_domain::saga::{
    Control, ControlError, Deadline, DeadlineOp, Input, Instance, Outcome, SagaConfig, Sagas,
};
use pm_domain::types::ActorKind;
use tokio::sync::Mutex;
use uuid::Uuid;

use super::{CommitError, Committed, NewRune, SagaStore, SagaWrite};
use crate::bus::EventMetadata;
use crate::clock::Clock;
use crate::fact::{Fact, FactError};
use crate::log::{LogPosition, LoggedEvent};
use crate::processor::BatchError;
use crate::AppError;

/// Conversations kept in memory at most by default; past it the cache starts over.
const CACHE_CONVERSATIONS: usize = 20_000;

/// How often a writer decides again after finding another writer's changes.
const ATTEMPTS: u32 = 4;

/// The role recorded in the metadata of runes.
const SAGA_ROLE: &str = "saga";

/// One conversation's machines and the last sequence of each instance's stream.
struct Machines {
    sagas: Sagas,
    versions: HashMap<Instance, i64>,
}

#[derive(Default)]
struct State {
    conversations: HashMap<Uuid, Machines>,
    kinds: HashMap<Uuid, ActorKind>,
    /// The saga write count the cached machines reflect; `None` until first read.
    writes: Option<i64>,
}

/// What an operator's control is aimed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlTarget {
    /// A session (by its conversation).
    Session(Uuid),
    /// An agent.
    Agent(Uuid),
}

/// The saga machines of this replica.
pub struct SagaEngine<S> {
    store: S,
    config: SagaConfig,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    cache_limit: usize,
}

/// How deciding on a batch went wrong.
enum Failed {
    Batch(BatchError),
    Store(AppError),
}

impl From<AppError> for Failed {
    fn from(e: AppError) -> Self {
        Self::Store(e)
    }
}

/// One transaction being decided: what it writes and the conversations it decided on.
#[derive(Default)]
struct Draft {
    write: SagaWrite,
    touched: BTreeSet<Uuid>,
    /// Whether a conversation started in this batch may be begun without reading its
    /// runes from the store: it has none, since its start fact is being decided now and
    /// runes are committed with the cursor. Only on a batch's first attempt — a retry
    /// follows another writer's commit, which may have decided it.
    fresh_starts: bool,
}

impl<S: SagaStore> SagaEngine<S> {
    /// An engine over `store` deciding with `config` at the time `clock` tells.
    pub fn new(store: S, config: SagaConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            config,
            clock,
            state: Mutex::new(State::default()),
            cache_limit: CACHE_CONVERSATIONS,
        }
    }

    /// Keeps at most `conversations` conversations' machines in memory (at least 16).
    pub fn with_cache_limit(mut self, conversations: usize) -> Self {
        self.cache_limit = conversations.max(16);
        self
    }

    /// The settings the machines decide with.
    pub fn config(&self) -> &SagaConfig {
        &self.config
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The clock deadlines are measured with.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Applies a batch of the log (the events after `from`) and moves the processor's
    /// cursor to its last event, in one transaction.
    ///
    /// # Errors
    /// [`BatchError`]: a fact that cannot be read is poison; store trouble is transient
    /// (the batch is decided again).
    #[tracing::instrument(name = "saga_batch", skip_all, fields(from = %from, events = events.len()))]
    pub async fn apply_batch(
        &self,
        from: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        let Some(last) = events.last().map(|e| e.position) else {
            return Ok(from);
        };
        let mut state = self.state.lock().await;
        for attempt in 1..=ATTEMPTS {
            let writes = self.writes(&mut state).await.map_err(transient)?;
            let mut draft = Draft {
                fresh_starts: attempt == 1,
                ..Draft::default()
            };
            let mut decided = Ok(());
            for (index, event) in events.iter().enumerate() {
                decided = self.apply_event(&mut state, &mut draft, index, event).await;
                if decided.is_err() {
                    break;
                }
            }
            if let Err(failed) = decided {
                evict(&mut state, &draft.touched);
                return Err(match failed {
                    Failed::Batch(e) => e,
                    Failed::Store(e) => transient(e),
                });
            }
            match self
                .commit(&mut state, draft, Some((from, last)), writes)
                .await
            {
                Ok(_) => return Ok(last),
                Err(CommitError::Stale { .. }) if attempt < ATTEMPTS => {}
                Err(CommitError::CursorMoved) => return Err(BatchError::CursorMoved),
                Err(e) => return Err(BatchError::Transient(e.to_string())),
            }
        }
        Err(BatchError::Transient(
            "saga state kept changing under the batch".into(),
        ))
    }

    /// Decides what one event of a batch does.
    async fn apply_event(
        &self,
        state: &mut State,
        draft: &mut Draft,
        index: usize,
        event: &LoggedEvent,
    ) -> Result<(), Failed> {
        let fact = match Fact::from_logged(event) {
            Ok(fact) => fact,
            // Runes and anything else that is not a fact: not the sagas' input.
            Err(FactError::Unknown(_)) => return Ok(()),
            Err(e) => {
                return Err(Failed::Batch(BatchError::Poison {
                    index,
                    reason: e.to_string(),
                }))
            }
        };
        let now = event.recorded_at().unwrap_or_else(|| self.clock.now());
        let mut ai_actors = Vec::new();
        let mut author = ActorKind::Human;
        let conversation = match &fact {
            Fact::ActorRegistered(a) => {
                state.kinds.insert(a.id, a.kind);
                return Ok(());
            }
            Fact::ConversationStarted(c) => {
                for id in &c.actor_ids {
                    if self.kind(state, *id).await? == Some(ActorKind::Ai) {
                        ai_actors.push(*id);
                    }
                }
                c.id
            }
            Fact::MessageAdded(m) => {
                author = self
                    .kind(state, m.actor_id)
                    .await?
                    .unwrap_or(ActorKind::Human);
                m.conversation_id
            }
            Fact::ConversationCheckpointCreated(c) => c.conversation_id,
            Fact::TaskCreated(t) => t.conversation_id,
            Fact::TaskCheckpointCreated(_) => match event.conversation_id {
                Some(c) => c,
                None => return Ok(()),
            },
        };
        let input = match &fact {
            Fact::ConversationStarted(fact) => Input::ConversationStarted {
                fact,
                ai_actors: &ai_actors,
            },
            Fact::MessageAdded(fact) => Input::MessageAdded { fact, author },
            Fact::ConversationCheckpointCreated(fact) => Input::CheckpointCreated(fact),
            Fact::TaskCreated(fact) => Input::TaskCreated(fact),
            Fact::TaskCheckpointCreated(fact) => Input::TaskCheckpointCreated {
                fact,
                conversation_id: conversation,
            },
            Fact::ActorRegistered(_) => return Ok(()),
        };
        draft.touched.insert(conversation);
        let fresh = draft.fresh_starts && matches!(fact, Fact::ConversationStarted(_));
        if fresh && !state.conversations.contains_key(&conversation) {
            // What loading a conversation without runes gives, without the read.
            let machines = Machines {
                sagas: Sagas::restore(None, std::iter::empty()),
                versions: HashMap::new(),
            };
            remember(state, conversation, machines, self.cache_limit);
        }
        let machines = self.machines(state, conversation).await?;
        let outcome = machines
            .sagas
            .handle_at(event.position.value(), input, now, &self.config)
            .map_err(|e| {
                Failed::Batch(BatchError::Poison {
                    index,
                    reason: format!("a fact was refused like a control: {e}"),
                })
            })?;
        let metadata = EventMetadata {
            correlation_id: event
                .metadata
                .get("correlation_id")
                .and_then(|c| c.as_str())
                .map_or_else(|| event.position.to_string(), str::to_string),
            causation_id: Some(event.position.to_string()),
            role: SAGA_ROLE.into(),
            recorded_at: now,
        };
        record(machines, &mut draft.write, conversation, outcome, &metadata);
        Ok(())
    }

    /// Fires the deadlines due now (at most `limit`), each once; returns how many fired.
    ///
    /// # Errors
    /// The store's error; nothing fired then.
    #[tracing::instrument(name = "saga_deadlines", skip(self))]
    pub async fn fire_due(&self, limit: u32) -> Result<usize, AppError> {
        let mut state = self.state.lock().await;
        for attempt in 1..=ATTEMPTS {
            let writes = self.writes(&mut state).await?;
            let now = self.clock.now();
            let due = self.store.due(now, limit).await?;
            if due.is_empty() {
                return Ok(0);
            }
            let mut draft = Draft::default();
            for (conversation, deadline) in &due {
                let metadata = EventMetadata {
                    correlation_id: deadline_key(deadline),
                    causation_id: Some(format!("{}:{}", deadline_key(deadline), deadline.epoch)),
                    role: SAGA_ROLE.into(),
                    recorded_at: now,
                };
                // The row is spent whatever the machine decides (a stale epoch does nothing).
                draft.write.deadlines.push((
                    *conversation,
                    DeadlineOp::Disarm {
                        instance: deadline.instance,
                        kind: deadline.kind,
                    },
                ));
                self.decide(
                    &mut state,
                    &mut draft,
                    *conversation,
                    Input::DeadlineDue(deadline),
                    now,
                    &metadata,
                )
                .await?;
            }
            match self.commit(&mut state, draft, None, writes).await {
                Ok(_) => return Ok(due.len()),
                Err(CommitError::Stale { .. }) if attempt < ATTEMPTS => {}
                Err(e) => return Err(commit_error(e)),
            }
        }
        Err(AppError::ConcurrencyConflict { attempts: ATTEMPTS })
    }

    /// The start-up recovery (FCMP §4) of the open sessions that wait for the user or have
    /// deadlines that fell due while no replica ran the sagas; returns how many sessions
    /// it looked at.
    ///
    /// # Errors
    /// The store's error.
    #[tracing::instrument(name = "saga_restart", skip(self))]
    pub async fn restart(&self) -> Result<usize, AppError> {
        let mut state = self.state.lock().await;
        for attempt in 1..=ATTEMPTS {
            let writes = self.writes(&mut state).await?;
            let now = self.clock.now();
            let recovering = self.store.recovering(now).await?;
            let mut draft = Draft::default();
            for (conversation, deadlines) in &recovering {
                let overdue: Vec<Deadline> = deadlines
                    .iter()
                    .copied()
                    .filter(|d| d.due_at <= now)
                    .collect();
                let metadata = EventMetadata {
                    correlation_id: format!("restart:{conversation}"),
                    causation_id: Some("restart".into()),
                    role: SAGA_ROLE.into(),
                    recorded_at: now,
                };
                let input = Input::Restart { overdue: &overdue };
                self.decide(&mut state, &mut draft, *conversation, input, now, &metadata)
                    .await?;
            }
            match self.commit(&mut state, draft, None, writes).await {
                Ok(_) => return Ok(recovering.len()),
                Err(CommitError::Stale { .. }) if attempt < ATTEMPTS => {}
                Err(e) => return Err(commit_error(e)),
            }
        }
        Err(AppError::ConcurrencyConflict { attempts: ATTEMPTS })
    }

    /// An operator's control; answers the conversation whose machines it changed and the
    /// position of its last rune.
    ///
    /// # Errors
    /// `Ok(Err(ControlError))` when the machine refuses it (nothing is written);
    /// [`AppError`] for the store.
    #[tracing::instrument(name = "saga_control", skip(self, metadata))]
    pub async fn control(
        &self,
        target: ControlTarget,
        control: Control,
        metadata: EventMetadata,
    ) -> Result<Result<(Uuid, Option<LogPosition>), ControlError>, AppError> {
        let conversation = match target {
            ControlTarget::Session(c) => c,
            ControlTarget::Agent(a) => match self.store.agent_conversation(a).await? {
                Some(c) => c,
                None => return Ok(Err(ControlError::AgentNotFound)),
            },
        };
        let mut state = self.state.lock().await;
        for attempt in 1..=ATTEMPTS {
            let writes = self.writes(&mut state).await?;
            let now = self.clock.now();
            let machines = self.machines(&mut state, conversation).await?;
            if machines.sagas.session().is_none() {
                return Ok(Err(ControlError::SessionNotFound));
            }
            let outcome =
                match machines
                    .sagas
                    .handle(Input::Control(control.clone()), now, &self.config)
                {
                    Ok(outcome) => outcome,
                    // A refusal changes nothing, in memory either.
                    Err(refused) => return Ok(Err(refused)),
                };
            let mut draft = Draft::default();
            draft.touched.insert(conversation);
            let metadata = EventMetadata {
                recorded_at: now,
                ..metadata.clone()
            };
            record(machines, &mut draft.write, conversation, outcome, &metadata);
            match self.commit(&mut state, draft, None, writes).await {
                Ok(committed) => return Ok(Ok((conversation, committed.last_position))),
                Err(CommitError::Stale { .. }) if attempt < ATTEMPTS => {}
                Err(e) => return Err(commit_error(e)),
            }
        }
        Err(AppError::ConcurrencyConflict { attempts: ATTEMPTS })
    }

    /// Runs `input` through the machines of `conversation` into `draft`. Inputs that are
    /// not controls are never refused; a refusal would only mean nothing to write.
    async fn decide(
        &self,
        state: &mut State,
        draft: &mut Draft,
        conversation: Uuid,
        input: Input<'_>,
        now: DateTime<Utc>,
        metadata: &EventMetadata,
    ) -> Result<(), AppError> {
        draft.touched.insert(conversation);
        let machines = match self.machines(state, conversation).await {
            Ok(m) => m,
            Err(e) => {
                evict(state, &draft.touched);
                return Err(e);
            }
        };
        let outcome = machines
            .sagas
            .handle(input, now, &self.config)
            .unwrap_or_default();
        record(machines, &mut draft.write, conversation, outcome, metadata);
        Ok(())
    }

    /// The write count the cache reflects, read from the store the first time.
    async fn writes(&self, state: &mut State) -> Result<i64, AppError> {
        if let Some(w) = state.writes {
            return Ok(w);
        }
        // Machines loaded from here on reflect at least this many writes.
        state.conversations.clear();
        let w = self.store.writes().await?;
        state.writes = Some(w);
        Ok(w)
    }

    /// Commits `draft` (with the rows of the conversations it touched). On failure
    /// forgets the conversations it decided on — their machines in memory hold decisions
    /// that were not written — and, when another writer was found, everything cached.
    async fn commit(
        &self,
        state: &mut State,
        mut draft: Draft,
        batch: Option<(LogPosition, LogPosition)>,
        writes: i64,
    ) -> Result<Committed, CommitError> {
        rows(state, &draft.touched, &mut draft.write);
        match self.store.commit(draft.write, batch, writes).await {
            Ok(committed) => {
                state.writes = Some(committed.writes);
                Ok(committed)
            }
            Err(e) => {
                evict(state, &draft.touched);
                match &e {
                    CommitError::Stale { writes } => {
                        tracing::info!(writes, "saga state written elsewhere; reloading");
                        state.conversations.clear();
                        state.writes = Some(*writes);
                    }
                    // The outcome is unknown: read the count again before the next write.
                    _ => state.writes = None,
                }
                Err(e)
            }
        }
    }

    /// The machines of `conversation`, loaded from the store when not in memory.
    async fn machines<'s>(
        &self,
        state: &'s mut State,
        conversation: Uuid,
    ) -> Result<&'s mut Machines, AppError> {
        if !state.conversations.contains_key(&conversation) {
            let runes = self.store.load(conversation).await?;
            let mut versions = HashMap::new();
            let mut last = None;
            for r in &runes {
                versions.insert(r.recorded.instance, r.sequence);
                last = last.max(r.cause);
            }
            let sagas = Sagas::restore(last, runes.iter().map(|r| &r.recorded));
            remember(
                state,
                conversation,
                Machines { sagas, versions },
                self.cache_limit,
            );
        }
        state
            .conversations
            .get_mut(&conversation)
            .ok_or_else(|| AppError::Internal("a loaded conversation vanished".into()))
    }

    /// An actor's kind, from memory or the store.
    async fn kind(&self, state: &mut State, actor: Uuid) -> Result<Option<ActorKind>, AppError> {
        if let Some(kind) = state.kinds.get(&actor) {
            return Ok(Some(*kind));
        }
        let kind = self.store.actor_kind(actor).await?;
        if let Some(kind) = kind {
            state.kinds.insert(actor, kind);
        }
        Ok(kind)
    }
}

/// Adds an outcome's runes (numbered in their streams) and deadline changes to `write`.
fn record(
    machines: &mut Machines,
    write: &mut SagaWrite,
    conversation: Uuid,
    outcome: Outcome,
    metadata: &EventMetadata,
) {
    for recorded in outcome.runes {
        let version = machines.versions.entry(recorded.instance).or_insert(0);
        *version += 1;
        write.runes.push(NewRune {
            conversation_id: conversation,
            recorded,
            sequence: *version,
            metadata: metadata.clone(),
        });
    }
    write
        .deadlines
        .extend(outcome.deadlines.into_iter().map(|op| (conversation, op)));
}

/// Adds the session, agent and turn rows that `write`'s runes changed, at the time of the
/// conversation's last rune.
fn rows(state: &State, touched: &BTreeSet<Uuid>, write: &mut SagaWrite) {
    for conversation in touched {
        let Some(machines) = state.conversations.get(conversation) else {
            continue;
        };
        let sagas = &machines.sagas;
        let mut time = None;
        let mut changed = BTreeSet::new();
        for rune in write
            .runes
            .iter()
            .filter(|r| r.conversation_id == *conversation)
        {
            time = time.max(Some(rune.metadata.recorded_at));
            changed.insert(rune.recorded.instance);
            if let Instance::Turn(id) = rune.recorded.instance {
                if let Some(turn) = sagas.turn_view(id) {
                    changed.insert(Instance::Agent(turn.agent_id));
                }
            }
        }
        let Some(time) = time else { continue };
        if let Some(session) = sagas.session_view() {
            write.sessions.push((session, time));
        }
        for instance in changed {
            match instance {
                Instance::Agent(id) => write.agents.extend(sagas.agent_view(id).map(|a| (a, time))),
                Instance::Turn(id) => write.turns.extend(sagas.turn_view(id).map(|t| (t, time))),
                Instance::Session(_) | Instance::Plan(_) => {}
            }
        }
    }
}

fn evict(state: &mut State, touched: &BTreeSet<Uuid>) {
    for c in touched {
        state.conversations.remove(c);
    }
}

/// `<aggregate_type>:<id>:<kind>`: what a deadline's runes are correlated with.
fn deadline_key(deadline: &Deadline) -> String {
    format!(
        "deadline:{}:{}:{}",
        deadline.instance.aggregate_type(),
        deadline.instance.id(),
        deadline.kind
    )
}

fn transient(e: AppError) -> BatchError {
    BatchError::Transient(e.to_string())
}

fn commit_error(e: CommitError) -> AppError {
    match e {
        CommitError::Store(e) => e,
        other => AppError::Unavailable(other.to_string()),
    }
}

/// Keeps `machines` of `conversation` in memory; a full cache starts over.
fn remember(state: &mut State, conversation: Uuid, machines: Machines, cache_limit: usize) {
    if state.conversations.len() >= cache_limit {
        state.conversations.clear();
    }
    state.conversations.insert(conversation, machines);
}
