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
//!
//! Every entry point decides through one loop, [`attempt`]: load → decide → commit, with
//! one conflict policy. The entry points are grouped by who asks: the log's facts
//! ([`batch`]), the sagas' own deadlines and the restart ([`deadlines`]), callers'
//! controls and workers' requests ([`controls`]); [`machines`] loads and snapshots the
//! machines the loop holds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use pm_domain::saga::{Deadline, Instance, Outcome, SagaConfig};
use pm_domain::types::ActorKind;
use uuid::Uuid;

use super::slots::{Held, Machines, Slots};
use super::snapshot::SnapshotPolicy;
use super::{NewRune, PlacedCall, SagaStore, SagaWrite};
use crate::bus::EventMetadata;
use crate::clock::Clock;
use crate::AppError;

mod attempt;
mod batch;
mod controls;
mod deadlines;
mod machines;

pub use controls::{ControlTarget, WorkerDone};

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

/// The role recorded in the metadata of the runes the sagas decide on their own (caused by
/// a fact, a deadline or a restart) — no caller has it, so a rune of this role whose
/// causation is a number was caused by the fact at that log position. Runes of controls
/// and reports carry their caller's role and causation (a client's `X-Causation-Id`).
pub const SAGA_ROLE: &str = "saga";

/// The principal recorded for what the service writes on its own (a deadline's runes, a
/// restart's recovery), and for the runes of a fact that names no principal (written
/// before facts recorded one): the audit trail then says no caller asked for it.
pub const SYSTEM_PRINCIPAL: &str = "system";

/// The saga machines of this replica.
pub struct SagaEngine<S> {
    store: S,
    config: SagaConfig,
    clock: Arc<dyn Clock>,
    slots: Slots,
    kinds: quick_cache::sync::Cache<Uuid, ActorKind>,
    snapshots: SnapshotPolicy,
    snapshot_writes: Arc<tokio::sync::Semaphore>,
    /// Where the decisions' spans go, when spans are exported.
    spans: Option<Arc<dyn crate::trace::genai::SpanSink>>,
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
            spans: None,
        }
    }

    /// Hands a span per fact the sagas decided to `spans` (a fact in a trace), once the
    /// decision committed; `None`: no spans.
    #[must_use]
    pub fn with_spans(mut self, spans: Option<Arc<dyn crate::trace::genai::SpanSink>>) -> Self {
        self.spans = spans;
        self
    }

    /// Takes snapshots of conversations' machines as `policy` says ([`snapshot`](super::snapshot)).
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

/// Adds the session, agent, turn and tool call rows that `write`'s runes changed, at the
/// time of the conversation's last rune — each only if it differs from what this replica
/// last wrote for it ([`Written`](super::written::Written)).
fn rows(held: &mut BTreeMap<Uuid, Held>, write: &mut SagaWrite) {
    for (conversation, slot) in held.iter_mut() {
        let Some(Machines { sagas, written, .. }) = slot.as_mut() else {
            continue;
        };
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
        let session = Instance::Session(*conversation);
        write
            .sessions
            .extend(written.row(session, time, |at| sagas.session_view(at), always));
        for instance in changed {
            match instance {
                Instance::Agent(id) => write.agents.extend(written.row(
                    instance,
                    time,
                    |at| sagas.agent_view(id, at),
                    always,
                )),
                Instance::Turn(id) => write.turns.extend(written.row(
                    instance,
                    time,
                    |at| sagas.turn_view(id, at),
                    |turn| turn.terminal_rune.is_none(),
                )),
                Instance::ToolCall(id) => {
                    let call = written.row(
                        instance,
                        time,
                        |at| sagas.tool_call_view(id, at),
                        |call| call.result.is_none(),
                    );
                    write.tool_calls.extend(call.map(|call| {
                        PlacedCall {
                            place: sagas
                                .tool_call_place(call.turn_id, &call.call_id)
                                .and_then(|p| i64::try_from(p).ok())
                                .unwrap_or(i64::MAX),
                            call,
                        }
                    }));
                }
                Instance::Session(_) | Instance::Plan(_) => {}
            }
        }
    }
}

/// Rows remembered whatever they say (sessions and agents: a conversation has few).
fn always<T>(_: &T) -> bool {
    true
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

#[cfg(test)]
mod tests;
