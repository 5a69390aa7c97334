//! [`SagaEngine`]: the machines of recently active conversations in memory, and the three
//! ways inputs reach them — facts (processor batches), due deadlines and the start-up
//! recovery, operators' controls — each ending in one [`SagaStore::commit`].
//!
//! Each conversation has a slot of its own ([`Slots`]): a writer holds the slots of the
//! conversations it decides on — and only those — from loading to commit, so a control on
//! one conversation never waits for a batch or a deadline of another. A batch holds every
//! conversation it touches, taken in id order (no two writers can wait on each other). The
//! store checks each conversation's version at commit: a conversation written elsewhere
//! meanwhile fails the commit, and every conversation of that write — its machines hold
//! decisions that were not written — is reloaded; no other.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt};
use pm_domain::saga::{
    Control, ControlError, Deadline, Input, Instance, Outcome, SagaConfig, WorkerOp, TURN_FENCED,
    TURN_TRANSITION_NOT_ALLOWED,
};
use pm_domain::types::ActorKind;
use uuid::Uuid;

use super::slots::{Held, Machines, Slots};
use super::snapshot::{self, SnapshotPolicy};
use super::{CommitError, Committed, NewRune, PlacedCall, SagaStore, SagaWrite, StoredSnapshot};
use crate::bus::EventMetadata;
use crate::clock::Clock;
use crate::fact::{Fact, FactError};
use crate::log::{LogPosition, LoggedEvent};
use crate::processor::BatchError;
use crate::AppError;

/// Conversations kept in memory at most by default.
const CACHE_CONVERSATIONS: usize = 20_000;

/// Actor kinds kept in memory at most by default.
const CACHE_KINDS: usize = 100_000;

/// How often a writer decides again after finding another writer's changes.
const ATTEMPTS: u32 = 4;

/// Reads (a conversation's runes, an actor's kind) one writer has in flight at most.
const READS_IN_PARALLEL: usize = 16;

/// Conversations whose deadlines or recovery are decided and committed at once.
const CONVERSATIONS_IN_PARALLEL: usize = 8;

/// Snapshots being written at once at most; a snapshot due while they are is taken at a
/// later commit.
const SNAPSHOT_WRITES: usize = 2;

/// What [`SagaEngine::worker`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerDone {
    /// The turn's conversation.
    pub conversation: Uuid,
    /// The position of its last rune, if it wrote any.
    pub position: Option<LogPosition>,
    /// The turn's row after it.
    pub turn: Option<pm_domain::saga::TurnView>,
    /// The actor the turn's agent acts for: what a command fenced by the turn may speak
    /// as (its claimant's replica remembers it, sparing that check a read).
    pub actor: Option<Uuid>,
}

/// What [`SagaEngine::one`] committed, and what its caller read from the machines.
struct Done<T> {
    position: Option<LogPosition>,
    read: T,
}

/// Why [`SagaEngine::one`] did not commit.
enum OneError {
    /// A lease the outcome was decided on is gone.
    LeaseGone,
    /// The store failed.
    App(AppError),
}

impl From<AppError> for OneError {
    fn from(e: AppError) -> Self {
        Self::App(e)
    }
}

/// The role recorded in the metadata of the runes the sagas decide on their own (caused by
/// a fact, a deadline or a restart) — no caller has it, so a rune of this role whose
/// causation is a number was caused by the fact at that log position. Runes of controls
/// and reports carry their caller's role and causation (a client's `X-Causation-Id`).
pub const SAGA_ROLE: &str = "saga";

/// The principal recorded for what the service writes on its own (a deadline's runes, a
/// restart's recovery), and for the runes of a fact that names no principal (written
/// before facts recorded one): the audit trail then says no caller asked for it.
pub const SYSTEM_PRINCIPAL: &str = "system";

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
    slots: Slots,
    kinds: quick_cache::sync::Cache<Uuid, ActorKind>,
    snapshots: SnapshotPolicy,
    snapshot_writes: Arc<tokio::sync::Semaphore>,
}

/// A fact of a batch with the conversation whose machines decide it.
struct Planned<'e> {
    index: usize,
    event: &'e LoggedEvent,
    fact: Fact,
    conversation: Uuid,
}

impl<S: SagaStore> SagaEngine<S> {
    /// An engine over `store` deciding with `config` at the time `clock` tells.
    pub fn new(store: S, config: SagaConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            config,
            clock,
            slots: Slots::new(CACHE_CONVERSATIONS),
            kinds: quick_cache::sync::Cache::new(CACHE_KINDS),
            snapshots: SnapshotPolicy::default(),
            snapshot_writes: Arc::new(tokio::sync::Semaphore::new(SNAPSHOT_WRITES)),
        }
    }

    /// Takes snapshots of conversations' machines as `policy` says ([`snapshot`]).
    pub fn with_snapshots(mut self, policy: SnapshotPolicy) -> Self {
        self.snapshots = policy;
        self
    }

    /// Keeps at most `conversations` conversations' machines and `kinds` actors' kinds in
    /// memory (at least 16 each); past it the least recently used are dropped.
    pub fn with_cache_limits(mut self, conversations: usize, kinds: usize) -> Self {
        self.slots = Slots::new(conversations);
        self.kinds = quick_cache::sync::Cache::new(kinds.max(16));
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
        let planned = plan(events)?;
        let kinds = self.kinds_of(&planned).await.map_err(transient)?;
        let conversations: BTreeSet<Uuid> = planned
            .iter()
            .filter(|p| !matches!(p.fact, Fact::ActorRegistered(_)))
            .map(|p| p.conversation)
            .collect();
        // Conversations started in this batch have no runes yet (runes are committed with
        // the cursor, and nothing else writes a conversation before its session exists):
        // on the first attempt they are begun without a read. A retry follows another
        // writer's commit, which may have decided them.
        let started: BTreeSet<Uuid> = planned
            .iter()
            .filter(|p| matches!(p.fact, Fact::ConversationStarted(_)))
            .map(|p| p.conversation)
            .collect();
        let mut held = self.slots.hold_all(&conversations).await;
        for attempt in 1..=ATTEMPTS {
            let fresh = if attempt == 1 {
                &started
            } else {
                &BTreeSet::new()
            };
            self.load(&mut held, fresh).await.map_err(transient)?;
            let mut write = SagaWrite::default();
            for p in &planned {
                if let Err(e) = self.decide_fact(&mut held, &mut write, p, &kinds) {
                    forget(&mut held);
                    return Err(e);
                }
            }
            match self.commit(&mut held, write, Some((from, last))).await {
                Ok(_) => return Ok(last),
                // After the last attempt: transient, below (the batch is read again).
                Err(CommitError::Conflict { .. }) => {}
                Err(CommitError::CursorMoved) => return Err(BatchError::CursorMoved),
                Err(e) => return Err(BatchError::Transient(e.to_string())),
            }
        }
        Err(BatchError::Transient(
            "saga state kept changing under the batch".into(),
        ))
    }

    /// The kinds of the actors whose kind a batch's decisions need: learnt from the
    /// batch's own registrations, remembered, or read (in parallel).
    async fn kinds_of(
        &self,
        planned: &[Planned<'_>],
    ) -> Result<HashMap<Uuid, ActorKind>, AppError> {
        let mut kinds = HashMap::new();
        let mut wanted = BTreeSet::new();
        for p in planned {
            match &p.fact {
                Fact::ActorRegistered(a) => {
                    self.kinds.insert(a.id, a.kind);
                    kinds.insert(a.id, a.kind);
                }
                Fact::ConversationStarted(c) => wanted.extend(c.actor_ids.iter().copied()),
                Fact::MessageAdded(m) => {
                    wanted.insert(m.actor_id);
                }
                _ => {}
            }
        }
        let missing: Vec<Uuid> = wanted
            .into_iter()
            .filter(|id| match self.kinds.get(id) {
                Some(kind) => {
                    kinds.insert(*id, kind);
                    false
                }
                None => !kinds.contains_key(id),
            })
            .collect();
        let read: Vec<(Uuid, Result<Option<ActorKind>, AppError>)> = stream::iter(missing)
            .map(|id| async move { (id, self.store.actor_kind(id).await) })
            .buffer_unordered(READS_IN_PARALLEL)
            .collect()
            .await;
        for (id, kind) in read {
            if let Some(kind) = kind? {
                self.kinds.insert(id, kind);
                kinds.insert(id, kind);
            }
        }
        Ok(kinds)
    }

    /// Decides what one fact of a batch does.
    fn decide_fact(
        &self,
        held: &mut BTreeMap<Uuid, Held>,
        write: &mut SagaWrite,
        p: &Planned<'_>,
        kinds: &HashMap<Uuid, ActorKind>,
    ) -> Result<(), BatchError> {
        let event = p.event;
        let now = event.recorded_at().unwrap_or_else(|| self.clock.now());
        let ai_actors: Vec<Uuid>;
        let input = match &p.fact {
            Fact::ConversationStarted(fact) => {
                ai_actors = fact
                    .actor_ids
                    .iter()
                    .copied()
                    .filter(|id| kinds.get(id) == Some(&ActorKind::Ai))
                    .collect();
                Input::ConversationStarted {
                    fact,
                    ai_actors: &ai_actors,
                }
            }
            Fact::MessageAdded(fact) => Input::MessageAdded {
                fact,
                author: kinds
                    .get(&fact.actor_id)
                    .copied()
                    .unwrap_or(ActorKind::Human),
            },
            Fact::ConversationCheckpointCreated(fact) => Input::CheckpointCreated(fact),
            Fact::TaskCreated(fact) => Input::TaskCreated(fact),
            Fact::TaskCheckpointCreated(fact) => Input::TaskCheckpointCreated {
                fact,
                conversation_id: p.conversation,
            },
            Fact::ActorRegistered(_) => return Ok(()),
        };
        let machines =
            loaded(held, p.conversation).map_err(|e| BatchError::Transient(e.to_string()))?;
        // A fenced fact (WORKERS.md) names its turn in its metadata.
        let fence = event
            .metadata
            .get("turn_id")
            .and_then(|t| t.as_str())
            .and_then(|t| Uuid::parse_str(t).ok());
        let outcome = machines
            .sagas
            .handle_fenced_at(event.position.value(), fence, input, now, &self.config)
            .map_err(|e| BatchError::Poison {
                index: p.index,
                reason: format!("a fact was refused like a control: {e}"),
            })?;
        let metadata = EventMetadata {
            correlation_id: event
                .metadata
                .get("correlation_id")
                .and_then(|c| c.as_str())
                .map_or_else(|| event.position.to_string(), str::to_string),
            causation_id: Some(event.position.to_string()),
            role: SAGA_ROLE.into(),
            // Whoever wrote the fact asked, through it, for what the sagas decide on it.
            principal: event.principal().unwrap_or(SYSTEM_PRINCIPAL).to_string(),
            recorded_at: now,
            turn: None,
        };
        record(machines, write, p.conversation, outcome, &metadata);
        Ok(())
    }

    /// Fires the deadlines due now (at most `limit`), each once; returns how many fired.
    /// Each conversation's deadlines are one transaction, and conversations go in
    /// parallel; a conversation written elsewhere meanwhile is left for the next call.
    ///
    /// # Errors
    /// The store's error when nothing could be fired.
    #[tracing::instrument(name = "saga_deadlines", skip(self))]
    pub async fn fire_due(&self, limit: u32) -> Result<usize, AppError> {
        let now = self.clock.now();
        let due = self.store.due(now, limit).await?;
        let mut by_conversation: BTreeMap<Uuid, Vec<Deadline>> = BTreeMap::new();
        for (conversation, deadline) in due {
            by_conversation
                .entry(conversation)
                .or_default()
                .push(deadline);
        }
        let results: Vec<Result<usize, AppError>> = stream::iter(by_conversation)
            .map(|(conversation, deadlines)| self.fire(conversation, deadlines, now))
            .buffer_unordered(CONVERSATIONS_IN_PARALLEL)
            .collect()
            .await;
        summed(results)
    }

    /// Fires `deadlines` of `conversation` in one transaction.
    async fn fire(
        &self,
        conversation: Uuid,
        deadlines: Vec<Deadline>,
        now: DateTime<Utc>,
    ) -> Result<usize, AppError> {
        let mut held = self.slots.hold_all(&BTreeSet::from([conversation])).await;
        self.load(&mut held, &BTreeSet::new()).await?;
        let mut write = SagaWrite::default();
        for deadline in &deadlines {
            let metadata = EventMetadata {
                correlation_id: deadline_key(deadline),
                causation_id: Some(format!("{}:{}", deadline_key(deadline), deadline.epoch)),
                role: SAGA_ROLE.into(),
                principal: SYSTEM_PRINCIPAL.into(),
                recorded_at: now,
                turn: None,
            };
            // The row is spent whatever the machine decides (a stale epoch does nothing).
            write.fired.push((conversation, *deadline));
            self.decide(
                &mut held,
                &mut write,
                conversation,
                Input::DeadlineDue(deadline),
                now,
                &metadata,
            )?;
        }
        match self.commit(&mut held, write, None).await {
            Ok(_) => Ok(deadlines.len()),
            // Fired or changed elsewhere: what is still due is due at the next call.
            Err(CommitError::Conflict { .. }) => Ok(0),
            Err(e) => Err(commit_error(e)),
        }
    }

    /// The start-up recovery (FCMP §4) of the open sessions that wait for the user or have
    /// deadlines that fell due while no replica ran the sagas; returns how many sessions
    /// it looked at. Each session is one transaction; sessions go in parallel.
    ///
    /// # Errors
    /// The store's error (the sessions recovered before it stay recovered).
    #[tracing::instrument(name = "saga_restart", skip(self))]
    pub async fn restart(&self) -> Result<usize, AppError> {
        let now = self.clock.now();
        let recovering = self.store.recovering(now).await?;
        let results: Vec<Result<usize, AppError>> = stream::iter(recovering)
            .map(|(conversation, deadlines)| self.recover(conversation, deadlines, now))
            .buffer_unordered(CONVERSATIONS_IN_PARALLEL)
            .collect()
            .await;
        let mut sessions = 0;
        for result in results {
            sessions += result?;
        }
        Ok(sessions)
    }

    /// Recovers one session (see [`SagaEngine::restart`]).
    async fn recover(
        &self,
        conversation: Uuid,
        deadlines: Vec<Deadline>,
        now: DateTime<Utc>,
    ) -> Result<usize, AppError> {
        let overdue: Vec<Deadline> = deadlines.into_iter().filter(|d| d.due_at <= now).collect();
        let metadata = EventMetadata {
            correlation_id: format!("restart:{conversation}"),
            causation_id: Some("restart".into()),
            role: SAGA_ROLE.into(),
            principal: SYSTEM_PRINCIPAL.into(),
            recorded_at: now,
            turn: None,
        };
        let mut held = self.slots.hold_all(&BTreeSet::from([conversation])).await;
        for _ in 0..ATTEMPTS {
            self.load(&mut held, &BTreeSet::new()).await?;
            let mut write = SagaWrite::default();
            let input = Input::Restart { overdue: &overdue };
            self.decide(&mut held, &mut write, conversation, input, now, &metadata)?;
            match self.commit(&mut held, write, None).await {
                Ok(_) => return Ok(1),
                // After the last attempt: `concurrency_conflict` (409), below.
                Err(CommitError::Conflict { .. }) => {}
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
        let input = || Input::Control(control.clone());
        match self.one(conversation, None, input, &metadata, |_| ()).await {
            Ok(done) => Ok(done.map(|d| (conversation, d.position))),
            Err(OneError::App(e)) => Err(e),
            // A control decides on no lease.
            Err(OneError::LeaseGone) => Err(AppError::Internal(
                "a control was decided on a worker's lease".into(),
            )),
        }
    }

    /// A worker's request on a turn (WORKERS.md), decided on its conversation's machines
    /// (`seen`: the conversation and the version a claimable look saw the turn at, when the
    /// caller knows them; else looked up) and committed with the leases it was decided on;
    /// answers the turn's row after it.
    ///
    /// # Errors
    /// `Ok(Err(ControlError))` when the machine refuses it, or when the lease it relied on
    /// was gone at commit (`turn_fenced` for a report; `turn_transition_not_allowed` for an
    /// interrupt that lost to a fenced completion); [`AppError`] for the store.
    #[tracing::instrument(name = "saga_worker", skip(self, op, metadata))]
    pub async fn worker(
        &self,
        turn_id: Uuid,
        seen: Option<(Uuid, i64)>,
        op: WorkerOp,
        metadata: EventMetadata,
    ) -> Result<Result<WorkerDone, ControlError>, AppError> {
        let (conversation, seen) = match seen {
            Some((c, version)) => (c, Some(version)),
            None => match self.store.turn_conversation(turn_id).await? {
                Some(c) => (c, None),
                None => return Ok(Err(ControlError::TurnNotFound)),
            },
        };
        let interrupt = matches!(op, WorkerOp::Interrupt { .. });
        let input = || Input::Worker {
            turn_id,
            op: op.clone(),
        };
        let at = metadata.recorded_at;
        let read = |sagas: &pm_domain::saga::Sagas| {
            let agent = sagas.turns().get(&turn_id).and_then(|t| t.agent_id());
            let actor = agent.and_then(|a| sagas.agents().get(&a)?.actor_id());
            (sagas.turn_view(turn_id, at), actor)
        };
        match self.one(conversation, seen, input, &metadata, read).await {
            Ok(done) => Ok(done.map(|d| WorkerDone {
                conversation,
                position: d.position,
                turn: d.read.0,
                actor: d.read.1,
            })),
            Err(OneError::LeaseGone) if interrupt => Ok(Err(ControlError::NotAllowed {
                code: TURN_TRANSITION_NOT_ALLOWED,
                detail: "the turn is completing: a fenced command ended it first".into(),
            })),
            Err(OneError::LeaseGone) => Ok(Err(ControlError::NotAllowed {
                code: TURN_FENCED,
                detail: "the claim's lease expired or was ended".into(),
            })),
            Err(OneError::App(e)) => Err(e),
        }
    }

    /// Decides one input on one conversation and commits it, deciding again (reloaded)
    /// when another writer changed the conversation meanwhile; `read` takes what the
    /// caller wants from the machines after the input. `seen`: a version of the
    /// conversation the caller read (machines cached at it or later are current).
    async fn one<T>(
        &self,
        conversation: Uuid,
        seen: Option<i64>,
        input: impl Fn() -> Input<'static>,
        metadata: &EventMetadata,
        read: impl Fn(&pm_domain::saga::Sagas) -> T,
    ) -> Result<Result<Done<T>, ControlError>, OneError> {
        let mut held = self.slots.hold_all(&BTreeSet::from([conversation])).await;
        // A refusal is answered without a commit, so no version check would tell machines
        // cached here that another replica changed the conversation: one decided on a
        // cached copy is answered only once the stored version says the copy is current.
        let mut checked = false;
        for _ in 0..ATTEMPTS {
            let cached = held.get(&conversation).is_some_and(|slot| slot.is_some());
            self.load(&mut held, &BTreeSet::new()).await?;
            let now = self.clock.now();
            let machines = loaded(&mut held, conversation)?;
            let refused = if machines.sagas.session().is_none() {
                Err(ControlError::SessionNotFound)
            } else {
                machines.sagas.handle(input(), now, &self.config)
            };
            let outcome = match refused {
                Ok(outcome) => outcome,
                // A refusal changes nothing, in memory either.
                Err(refused) => {
                    if cached && !checked {
                        checked = true;
                        let current = match seen {
                            // Versions only grow: no read needed.
                            Some(version) => machines.version >= version,
                            None => {
                                self.store.conversation_version(conversation).await?
                                    == machines.version
                            }
                        };
                        if !current {
                            forget(&mut held);
                            continue;
                        }
                    }
                    return Ok(Err(refused));
                }
            };
            let mut write = SagaWrite::default();
            let metadata = EventMetadata {
                recorded_at: now,
                ..metadata.clone()
            };
            record(machines, &mut write, conversation, outcome, &metadata);
            let value = read(&machines.sagas);
            match self.commit(&mut held, write, None).await {
                Ok(committed) => {
                    return Ok(Ok(Done {
                        position: committed.last_position,
                        read: value,
                    }))
                }
                // After the last attempt: `concurrency_conflict` (409), below.
                Err(CommitError::Conflict { .. }) => {}
                Err(CommitError::LeaseGone { .. }) => return Err(OneError::LeaseGone),
                Err(e) => return Err(commit_error(e).into()),
            }
        }
        Err(AppError::ConcurrencyConflict { attempts: ATTEMPTS }.into())
    }

    /// Runs `input` through the machines of `conversation` into `write`. Inputs that are
    /// not controls are never refused; a refusal would only mean nothing to write.
    fn decide(
        &self,
        held: &mut BTreeMap<Uuid, Held>,
        write: &mut SagaWrite,
        conversation: Uuid,
        input: Input<'_>,
        now: DateTime<Utc>,
        metadata: &EventMetadata,
    ) -> Result<(), AppError> {
        let machines = loaded(held, conversation)?;
        let outcome = machines
            .sagas
            .handle(input, now, &self.config)
            .unwrap_or_default();
        record(machines, write, conversation, outcome, metadata);
        Ok(())
    }

    /// Loads the machines of the held conversations that are not in memory, in parallel;
    /// those in `fresh` are begun empty instead (see [`SagaEngine::apply_batch`]).
    async fn load(
        &self,
        held: &mut BTreeMap<Uuid, Held>,
        fresh: &BTreeSet<Uuid>,
    ) -> Result<(), AppError> {
        let mut missing = Vec::new();
        for (conversation, slot) in held.iter_mut() {
            if slot.is_some() {
                continue;
            }
            if fresh.contains(conversation) {
                // What loading a conversation without runes gives, without the read.
                **slot = Some(Machines::empty());
            } else {
                missing.push(*conversation);
            }
        }
        let read: Vec<(Uuid, Result<_, AppError>)> = stream::iter(missing)
            .map(|c| async move { (c, self.load_one(c).await) })
            .buffer_unordered(READS_IN_PARALLEL)
            .collect()
            .await;
        let mut failed = None;
        for (conversation, machines) in read {
            match (machines, held.get_mut(&conversation)) {
                (Ok(machines), Some(slot)) => **slot = Some(machines),
                (Err(e), _) => failed = Some(e),
                (Ok(_), None) => {}
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// One conversation's machines: from its snapshot and the runes after it, or — when
    /// the snapshot does not read — from all its runes.
    async fn load_one(&self, conversation: Uuid) -> Result<Machines, AppError> {
        let stored = self
            .store
            .load(conversation, Some(snapshot::FORMAT))
            .await?;
        let from_snapshot = stored.snapshot.is_some();
        let heavy = stored.runes.len() >= HEAVY_RUNES || from_snapshot;
        match cpu_bound(heavy, || Machines::restore(stored)) {
            Ok(machines) => {
                if from_snapshot {
                    metrics::counter!("pm_saga_snapshots_loaded_total").increment(1);
                }
                Ok(machines)
            }
            Err(e) => {
                tracing::warn!(%conversation, error = %e, "a saga snapshot does not read; folding the runes");
                metrics::counter!("pm_saga_snapshots_unreadable_total").increment(1);
                let stored = self.store.load(conversation, None).await?;
                let heavy = stored.runes.len() >= HEAVY_RUNES;
                cpu_bound(heavy, || Machines::restore(stored)).map_err(AppError::Internal)
            }
        }
    }

    /// Writes, beside the saga path, a snapshot of `machines` if one is due; `conversation`
    /// was just committed with runes up to `position`, so they hold every rune of it up to
    /// there.
    fn snapshot(&self, conversation: Uuid, machines: &mut Machines, position: LogPosition) {
        if !self.snapshots.due(machines.runes, machines.covered) {
            return;
        }
        let Ok(permit) = self.snapshot_writes.clone().try_acquire_owned() else {
            return;
        };
        let encoded = cpu_bound(true, || {
            snapshot::encode(&machines.sagas, &machines.streams, machines.runes)
        });
        let state = match encoded {
            Ok(state) => state,
            Err(e) => {
                tracing::error!(%conversation, error = %e, "a saga snapshot does not encode");
                return;
            }
        };
        machines.covered = machines.runes;
        let bytes = state.len();
        let write = self.store.save_snapshot(
            conversation,
            StoredSnapshot {
                position,
                format: snapshot::FORMAT,
                state,
            },
        );
        tokio::spawn(async move {
            let _permit = permit;
            match write.await {
                Ok(()) => {
                    metrics::counter!("pm_saga_snapshots_written_total").increment(1);
                    tracing::debug!(%conversation, %position, bytes, "saga snapshot written");
                }
                // The next due snapshot makes up for it; loads fold more runes meanwhile.
                Err(e) => {
                    tracing::warn!(%conversation, error = %e, "a saga snapshot was not written")
                }
            }
        });
    }

    /// Commits `write` with the version of every held conversation and the rows they
    /// changed. Committed: each held conversation is one version further. Not committed:
    /// the held machines are forgotten — they hold decisions that were not written.
    async fn commit(
        &self,
        held: &mut BTreeMap<Uuid, Held>,
        mut write: SagaWrite,
        batch: Option<(LogPosition, LogPosition)>,
    ) -> Result<Committed, CommitError> {
        write.conversations = held
            .iter()
            .filter_map(|(c, slot)| slot.as_ref().map(|m| (*c, m.version)))
            .collect();
        rows(held, &mut write);
        let written: BTreeSet<Uuid> = write.runes.iter().map(|r| r.conversation_id).collect();
        // The machines leave their slots while the commit runs: if this future is dropped
        // (a client that went away cancels its control or claim), the slots are left
        // empty — reloaded by the next writer — instead of holding decisions that may not
        // have been written.
        let mut taken: Vec<(Uuid, Machines)> = held
            .iter_mut()
            .filter_map(|(c, slot)| slot.take().map(|m| (*c, m)))
            .collect();
        match self.store.commit(write, batch).await {
            Ok(committed) => {
                for (conversation, mut machines) in taken.drain(..) {
                    machines.version += 1;
                    // Runes were appended, so the store names their last position; a
                    // store that did not gets no snapshot (none is taken as of a position
                    // that predates runes the machines hold).
                    if let (true, Some(position)) =
                        (written.contains(&conversation), committed.last_position)
                    {
                        self.snapshot(conversation, &mut machines, position);
                    }
                    if let Some(slot) = held.get_mut(&conversation) {
                        **slot = Some(machines);
                    }
                }
                Ok(committed)
            }
            Err(e) => {
                if let CommitError::Conflict { conversations } = &e {
                    tracing::info!(?conversations, "saga state written elsewhere; reloading");
                    metrics::counter!("pm_saga_conflicts_total").increment(1);
                }
                Err(e)
            }
        }
    }
}

/// Runes from which a conversation's fold counts as heavy work ([`cpu_bound`]).
const HEAVY_RUNES: usize = 1_000;

/// Runs `f` — decoding, folding or encoding a long conversation's machines, milliseconds
/// of CPU — so that the worker's other tasks move to another thread meanwhile
/// (`block_in_place`) when `heavy` and the runtime has other threads; inline otherwise
/// (a current-thread runtime, as in tests, has no other thread to move them to).
fn cpu_bound<T>(heavy: bool, f: impl FnOnce() -> T) -> T {
    let threads = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if heavy && threads {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// The facts of a batch that the machines decide, each with its conversation.
///
/// # Errors
/// [`BatchError::Poison`] for an event that names a fact but does not read as one.
fn plan(events: &[LoggedEvent]) -> Result<Vec<Planned<'_>>, BatchError> {
    let mut planned = Vec::with_capacity(events.len());
    for (index, event) in events.iter().enumerate() {
        let fact = match Fact::from_logged(event) {
            Ok(fact) => fact,
            // Runes and anything else that is not a fact: not the sagas' input.
            Err(FactError::Unknown(_)) => continue,
            Err(e) => {
                return Err(BatchError::Poison {
                    index,
                    reason: e.to_string(),
                })
            }
        };
        let conversation = match &fact {
            // Registrations only teach kinds; they have no machines.
            Fact::ActorRegistered(_) => Uuid::nil(),
            Fact::ConversationStarted(c) => c.id,
            Fact::MessageAdded(m) => m.conversation_id,
            Fact::ConversationCheckpointCreated(c) => c.conversation_id,
            Fact::TaskCreated(t) => t.conversation_id,
            Fact::TaskCheckpointCreated(_) => match event.conversation_id {
                Some(c) => c,
                None => continue,
            },
        };
        planned.push(Planned {
            index,
            event,
            fact,
            conversation,
        });
    }
    // Registrations stay in the plan (their kinds are learnt from it) but hold no slot.
    Ok(planned)
}

/// The loaded machines of a held conversation.
fn loaded(held: &mut BTreeMap<Uuid, Held>, conversation: Uuid) -> Result<&mut Machines, AppError> {
    held.get_mut(&conversation)
        .and_then(|slot| slot.as_mut())
        .ok_or_else(|| {
            AppError::Internal("a conversation was decided on before it was loaded".into())
        })
}

/// Forgets the machines of every held conversation.
fn forget(held: &mut BTreeMap<Uuid, Held>) {
    for slot in held.values_mut() {
        **slot = None;
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
        let version = machines.streams.entry(recorded.instance).or_insert(0);
        *version += 1;
        machines.runes = machines.runes.saturating_add(1);
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
    write.leases.extend(outcome.leases);
}

/// Adds the session, agent, turn and tool call rows that `write`'s runes changed, at the time of the
/// conversation's last rune.
fn rows(held: &BTreeMap<Uuid, Held>, write: &mut SagaWrite) {
    for (conversation, slot) in held {
        let Some(machines) = slot.as_ref() else {
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
                if let Some(agent) = sagas.turns().get(&id).and_then(|t| t.agent_id()) {
                    changed.insert(Instance::Agent(agent));
                }
            }
        }
        let Some(time) = time else { continue };
        if let Some(session) = sagas.session_view(time) {
            write.sessions.push(session);
        }
        for instance in changed {
            match instance {
                Instance::Agent(id) => write.agents.extend(sagas.agent_view(id, time)),
                Instance::Turn(id) => write.turns.extend(sagas.turn_view(id, time)),
                Instance::ToolCall(id) => {
                    write
                        .tool_calls
                        .extend(sagas.tool_call_view(id, time).map(|call| {
                            PlacedCall {
                                place: sagas
                                    .tool_call_place(call.turn_id, &call.call_id)
                                    .and_then(|p| i64::try_from(p).ok())
                                    .unwrap_or(i64::MAX),
                                call,
                            }
                        }))
                }
                Instance::Session(_) | Instance::Plan(_) => {}
            }
        }
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

/// The sum of the counts, or the first error when nothing was counted.
fn summed(results: Vec<Result<usize, AppError>>) -> Result<usize, AppError> {
    let mut total = 0;
    let mut error = None;
    for result in results {
        match result {
            Ok(n) => total += n,
            Err(e) => error = error.or(Some(e)),
        }
    }
    match error {
        Some(e) if total == 0 => Err(e),
        Some(e) => {
            tracing::warn!(error = %e, "some deadlines could not be fired; retrying");
            Ok(total)
        }
        None => Ok(total),
    }
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

#[cfg(test)]
mod tests;
