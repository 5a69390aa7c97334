//! The engine against an in-memory [`SagaStore`] whose commits can be held open: writers of
//! different conversations do not wait for each other, a conversation written elsewhere
//! is reloaded, a deadline fired elsewhere fires no more, and the cache stays bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use pm_domain::saga::{Control, Deadline, DeadlineKind, DeadlineOp, Instance, SagaConfig};
use pm_domain::types::ActorKind;
use serde_json::json;
use tokio::sync::Notify;
use uuid::Uuid;

use super::{ControlTarget, SagaEngine, SAGA_ROLE, SYSTEM_PRINCIPAL};
use crate::bus::EventMetadata;
use crate::clock::{Clock, SystemClock};
use crate::log::{LogPosition, LoggedEvent};
use crate::sagas::snapshot::{self, SnapshotPolicy};
use crate::sagas::{
    CommitError, Committed, SagaStore, SagaWrite, StoredConversation, StoredRune, StoredSnapshot,
};
use crate::AppError;

#[derive(Clone, Default)]
struct Stored {
    versions: HashMap<Uuid, i64>,
    runes: Vec<(Uuid, StoredRune)>,
    /// The metadata each rune of `runes` was committed with.
    written: Vec<EventMetadata>,
    deadlines: HashMap<(Instance, DeadlineKind), (Uuid, Deadline)>,
    cursor: LogPosition,
    head: i64,
    loads: HashMap<Uuid, usize>,
    commits: usize,
    snapshots: HashMap<Uuid, StoredSnapshot>,
    /// Runes each load returned.
    loaded_runes: Vec<usize>,
    /// A conversation another writer moves on before every commit that touches it.
    contended: Option<Uuid>,
    /// What the next commits answer, in order, before anything is checked or written.
    scripted: Vec<fn() -> CommitError>,
    /// The rows each commit wrote.
    rows: Vec<Rows>,
}

/// The rows one commit wrote, by id.
#[derive(Clone, Debug, Default, PartialEq)]
struct Rows {
    sessions: Vec<Uuid>,
    agents: Vec<Uuid>,
    turns: Vec<Uuid>,
}

/// A commit of `conversation` waits at the gate until released.
#[derive(Default)]
struct Gate {
    conversation: Mutex<Option<Uuid>>,
    entered: Notify,
    release: Notify,
}

#[derive(Clone, Default)]
struct FakeStore {
    stored: Arc<Mutex<Stored>>,
    gate: Arc<Gate>,
}

impl FakeStore {
    fn with<T>(&self, f: impl FnOnce(&mut Stored) -> T) -> T {
        f(&mut self.stored.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn loads(&self, conversation: Uuid) -> usize {
        self.with(|s| s.loads.get(&conversation).copied().unwrap_or(0))
    }
}

impl SagaStore for FakeStore {
    async fn load(
        &self,
        conversation_id: Uuid,
        format: Option<i32>,
    ) -> Result<StoredConversation, AppError> {
        Ok(self.with(|s| {
            *s.loads.entry(conversation_id).or_default() += 1;
            let snapshot = s
                .snapshots
                .get(&conversation_id)
                .filter(|snap| Some(snap.format) == format)
                .cloned();
            let after = snapshot
                .as_ref()
                .map_or(LogPosition(0), |snap| snap.position);
            let runes: Vec<StoredRune> = s
                .runes
                .iter()
                .filter(|(c, r)| *c == conversation_id && r.position > after)
                .map(|(_, r)| r.clone())
                .collect();
            s.loaded_runes.push(runes.len());
            StoredConversation {
                version: s.versions.get(&conversation_id).copied().unwrap_or(0),
                snapshot,
                runes,
            }
        }))
    }

    fn save_snapshot(
        &self,
        conversation_id: Uuid,
        snapshot: StoredSnapshot,
    ) -> impl std::future::Future<Output = Result<(), AppError>> + Send + 'static {
        let store = self.clone();
        async move {
            store.with(|s| {
                let newer = s.snapshots.get(&conversation_id).is_some_and(|old| {
                    old.format == snapshot.format && old.position >= snapshot.position
                });
                if !newer {
                    s.snapshots.insert(conversation_id, snapshot);
                }
            });
            Ok(())
        }
    }

    async fn actor_kind(&self, actor_id: Uuid) -> Result<Option<ActorKind>, AppError> {
        Ok((actor_id == ai())
            .then_some(ActorKind::Ai)
            .or(Some(ActorKind::Human)))
    }

    async fn agent_conversation(&self, _: Uuid) -> Result<Option<Uuid>, AppError> {
        Ok(None)
    }

    async fn turn_conversation(&self, _: Uuid) -> Result<Option<Uuid>, AppError> {
        Ok(None)
    }

    async fn conversation_version(&self, conversation_id: Uuid) -> Result<i64, AppError> {
        Ok(self.with(|s| s.versions.get(&conversation_id).copied().unwrap_or(0)))
    }

    async fn turn_logged_through(&self, _: Uuid) -> Result<Option<LogPosition>, AppError> {
        Ok(None)
    }

    async fn claimable(
        &self,
        _: &crate::sagas::ClaimFilter,
        _: u32,
    ) -> Result<Vec<crate::sagas::ClaimableTurn>, AppError> {
        Ok(Vec::new())
    }

    async fn renew_lease(
        &self,
        _: Uuid,
        _: i64,
        _: DateTime<Utc>,
        _: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, AppError> {
        Ok(None)
    }

    async fn commit(
        &self,
        write: SagaWrite,
        batch: Option<(LogPosition, LogPosition)>,
    ) -> Result<Committed, CommitError> {
        let gated = *self
            .gate
            .conversation
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if gated.is_some_and(|g| write.conversations.iter().any(|(c, _)| *c == g)) {
            self.gate.entered.notify_one();
            self.gate.release.notified().await;
        }
        self.with(|s| {
            if !s.scripted.is_empty() {
                return Err((s.scripted.remove(0))());
            }
            if let Some((from, _)) = batch {
                if s.cursor != from {
                    return Err(CommitError::CursorMoved);
                }
            }
            if let Some(c) = s.contended {
                if write.conversations.iter().any(|(w, _)| *w == c) {
                    *s.versions.entry(c).or_default() += 1;
                }
            }
            let conflicts: Vec<Uuid> = write
                .conversations
                .iter()
                .filter(|(c, v)| s.versions.get(c).copied().unwrap_or(0) != *v)
                .map(|(c, _)| *c)
                .collect();
            let fired_elsewhere = write.fired.iter().any(|(_, d)| {
                s.deadlines
                    .get(&(d.instance, d.kind))
                    .map(|(_, stored)| stored)
                    != Some(d)
            });
            if !conflicts.is_empty() || fired_elsewhere {
                return Err(CommitError::Conflict {
                    conversations: conflicts,
                });
            }
            for (c, _) in &write.conversations {
                *s.versions.entry(*c).or_default() += 1;
            }
            for (_, d) in &write.fired {
                s.deadlines.remove(&(d.instance, d.kind));
            }
            for (c, op) in &write.deadlines {
                match op {
                    DeadlineOp::Arm(d) => {
                        s.deadlines.insert((d.instance, d.kind), (*c, *d));
                    }
                    DeadlineOp::Disarm { instance, kind } => {
                        s.deadlines.remove(&(*instance, *kind));
                    }
                }
            }
            let mut last = None;
            for rune in &write.runes {
                s.head += 1;
                last = Some(LogPosition(s.head));
                let cause = rune
                    .metadata
                    .causation_id
                    .as_deref()
                    .and_then(|c| c.parse().ok());
                s.written.push(rune.metadata.clone());
                s.runes.push((
                    rune.conversation_id,
                    StoredRune {
                        recorded: rune.recorded.clone(),
                        sequence: rune.sequence,
                        cause,
                        position: LogPosition(s.head),
                    },
                ));
            }
            if let Some((_, to)) = batch {
                s.cursor = to;
            }
            s.rows.push(Rows {
                sessions: write.sessions.iter().map(|r| r.conversation_id).collect(),
                agents: write.agents.iter().map(|r| r.id).collect(),
                turns: write.turns.iter().map(|r| r.id).collect(),
            });
            s.commits += 1;
            Ok(Committed {
                last_position: last,
            })
        })
    }

    async fn park(
        &self,
        _: LogPosition,
        event: &LoggedEvent,
        _: &str,
    ) -> Result<LogPosition, CommitError> {
        Ok(event.position)
    }

    async fn due(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<(Uuid, Deadline)>, AppError> {
        Ok(self.with(|s| {
            let mut due: Vec<(Uuid, Deadline)> = s
                .deadlines
                .values()
                .filter(|(_, d)| d.due_at <= now)
                .copied()
                .collect();
            due.sort_by_key(|(_, d)| d.due_at);
            due.truncate(limit as usize);
            due
        }))
    }

    async fn recovering(&self, _: DateTime<Utc>) -> Result<Vec<(Uuid, Vec<Deadline>)>, AppError> {
        Ok(Vec::new())
    }
}

fn human() -> Uuid {
    Uuid::from_u128(0xA1)
}

fn ai() -> Uuid {
    Uuid::from_u128(0xA2)
}

fn at() -> String {
    pm_domain::time::format(&SystemClock.now())
}

/// A log under test: facts at increasing positions.
struct Log {
    head: i64,
}

impl Log {
    fn event(
        &mut self,
        event_type: &str,
        payload: serde_json::Value,
        conversation: Option<Uuid>,
    ) -> LoggedEvent {
        self.head += 1;
        LoggedEvent {
            position: LogPosition(self.head),
            aggregate_type: "fact".into(),
            aggregate_id: Uuid::new_v4().to_string(),
            sequence: 1,
            event_type: event_type.into(),
            event_version: "1.0".into(),
            payload: payload.into(),
            metadata: json!({ "recorded_at": at() }).into(),
            conversation_id: conversation,
            organization: None,
        }
    }

    fn actors(&mut self) -> Vec<LoggedEvent> {
        [(human(), "human"), (ai(), "ai")]
            .into_iter()
            .map(|(id, kind)| {
                self.event(
                    "project_manager.actor.registered",
                    json!({ "id": id, "kind": kind, "display_name": "someone", "created_at": at() }),
                    None,
                )
            })
            .collect()
    }

    fn started(&mut self, conversation: Uuid) -> LoggedEvent {
        self.event(
            "project_manager.conversation.started",
            json!({ "id": conversation, "actor_ids": [human(), ai()], "title": "a title",
                    "created_at": at(), "updated_at": at() }),
            Some(conversation),
        )
    }

    fn human_says(&mut self, conversation: Uuid) -> LoggedEvent {
        self.event(
            "project_manager.message.added",
            json!({ "id": Uuid::new_v4(), "time": at(), "actor_id": human(),
                    "conversation_id": conversation, "content": "hello" }),
            Some(conversation),
        )
    }
}

struct World {
    store: FakeStore,
    engine: Arc<SagaEngine<FakeStore>>,
    log: Log,
    cursor: LogPosition,
}

impl World {
    fn new(config: SagaConfig) -> Self {
        let store = FakeStore::default();
        let engine = SagaEngine::new(store.clone(), config, Arc::new(SystemClock));
        Self {
            store,
            engine: Arc::new(engine),
            log: Log { head: 0 },
            cursor: LogPosition(0),
        }
    }

    /// Applies `events` as the processor would.
    async fn apply(&mut self, events: Vec<LoggedEvent>) {
        let to = self
            .engine
            .apply_batch(self.cursor, &events)
            .await
            .expect("the batch applies");
        self.cursor = to;
    }

    /// Registers the actors and starts `conversations`.
    async fn started(&mut self, conversations: &[Uuid]) {
        let mut events = self.log.actors();
        for c in conversations {
            events.push(self.log.started(*c));
        }
        self.apply(events).await;
    }

    /// A world with one started conversation whose person has spoken (its session active).
    async fn active() -> (Self, Uuid) {
        let a = Uuid::new_v4();
        let mut world = World::new(SagaConfig::default());
        world.started(&[a]).await;
        let active = vec![world.log.human_says(a)];
        world.apply(active).await;
        (world, a)
    }
}

fn pause() -> Control {
    Control::Pause {
        reason: "operator".into(),
    }
}

fn metadata() -> EventMetadata {
    EventMetadata {
        correlation_id: "test".into(),
        causation_id: None,
        role: "admin".into(),
        principal: "admin".into(),
        recorded_at: Utc::now(),
        turn: None,
        trace: None,
    }
}

#[tokio::test]
async fn given_a_commit_of_one_conversation_held_open_when_another_is_controlled_then_the_control_does_not_wait(
) {
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let mut world = World::new(SagaConfig::default());
    world.started(&[a, b]).await;
    let active = vec![world.log.human_says(b)];
    world.apply(active).await;
    *world
        .store
        .gate
        .conversation
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(a);

    let message = vec![world.log.human_says(a)];
    let engine = world.engine.clone();
    let cursor = world.cursor;
    let batch = tokio::spawn(async move { engine.apply_batch(cursor, &message).await });
    tokio::time::timeout(Duration::from_secs(5), world.store.gate.entered.notified())
        .await
        .expect("the batch reaches its commit");

    let control = tokio::time::timeout(
        Duration::from_secs(2),
        world
            .engine
            .control(ControlTarget::Session(b), pause(), metadata()),
    )
    .await
    .expect("a control on another conversation does not wait for the batch");
    let (conversation, position) = control.expect("stored").expect("accepted");
    assert_eq!(conversation, b);
    assert!(position.is_some(), "the control recorded runes");

    world.store.gate.release.notify_one();
    let to = batch
        .await
        .expect("joined")
        .expect("the held batch commits");
    assert_eq!(to, LogPosition(world.log.head));
}

#[tokio::test]
async fn given_a_conversation_written_elsewhere_when_a_batch_touches_it_then_it_is_reloaded_and_no_other(
) {
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let mut world = World::new(SagaConfig::default());
    world.started(&[a, b, c]).await;
    let loads = |w: &World| [a, b, c].map(|x| w.store.loads(x));
    // Started in the batch: begun without a read.
    assert_eq!(loads(&world), [0, 0, 0]);

    // Another replica's writer moves `a` on.
    world.store.with(|s| *s.versions.entry(a).or_default() += 1);
    let commits = world.store.with(|s| s.commits);
    let events = vec![world.log.human_says(a), world.log.human_says(b)];
    world.apply(events).await;

    assert_eq!(
        world.store.with(|s| s.commits),
        commits + 1,
        "one commit landed"
    );
    // The batch's conversations are read again (its decisions were not written), `c` not.
    assert_eq!(loads(&world), [1, 1, 0]);
    assert_eq!(world.store.with(|s| s.versions[&a]), 3);
    assert_eq!(world.store.with(|s| s.versions[&b]), 2);
    assert_eq!(world.store.with(|s| s.versions[&c]), 1);
}

#[tokio::test]
async fn given_a_deadline_fired_elsewhere_when_it_is_fired_here_then_nothing_is_written() {
    let config = SagaConfig {
        turn_timeout: chrono::Duration::zero(),
        ..SagaConfig::default()
    };
    let a = Uuid::new_v4();
    let mut world = World::new(config);
    world.started(&[a]).await;
    let message = vec![world.log.human_says(a)];
    world.apply(message).await;
    let due = world
        .store
        .due(Utc::now(), 10)
        .await
        .expect("due deadlines");
    assert!(!due.is_empty(), "the turn's watchdog is due at once");

    // Another replica fires it (its row is gone) before this one commits.
    let gate_conversation = a;
    *world
        .store
        .gate
        .conversation
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(gate_conversation);
    let engine = world.engine.clone();
    let firing = tokio::spawn(async move { engine.fire_due(10).await });
    tokio::time::timeout(Duration::from_secs(5), world.store.gate.entered.notified())
        .await
        .expect("the firing reaches its commit");
    world.store.with(|s| s.deadlines.clear());
    let runes = world.store.with(|s| s.runes.len());
    world.store.gate.release.notify_one();

    let fired = firing.await.expect("joined").expect("no store error");
    assert_eq!(fired, 0);
    assert_eq!(
        world.store.with(|s| s.runes.len()),
        runes,
        "no rune was written"
    );
}

/// The principals of the runes committed since the `from`-th, each once, in order.
fn principals_since(world: &World, from: usize) -> Vec<String> {
    let mut principals: Vec<String> = world.store.with(|s| {
        s.written[from..]
            .iter()
            .map(|m| m.principal.clone())
            .collect()
    });
    principals.dedup();
    principals
}

#[tokio::test]
async fn given_a_fact_of_a_principal_when_the_sagas_decide_on_it_then_its_runes_carry_that_principal_and_a_deadlines_carry_system(
) {
    let config = SagaConfig {
        turn_timeout: chrono::Duration::zero(),
        ..SagaConfig::default()
    };
    let a = Uuid::new_v4();
    let mut world = World::new(config);
    // Facts written before facts named their principal: the service's own.
    world.started(&[a]).await;
    assert_eq!(principals_since(&world, 0), [SYSTEM_PRINCIPAL]);

    let from = world.store.with(|s| s.written.len());
    let mut says = world.log.human_says(a);
    says.metadata = json!({ "recorded_at": at(), "role": "ingress", "principal": "alice" }).into();
    world.apply(vec![says]).await;
    assert_eq!(principals_since(&world, from), ["alice"]);
    assert!(world
        .store
        .with(|s| s.written[from..].iter().all(|m| m.role == SAGA_ROLE)));

    let from = world.store.with(|s| s.written.len());
    let fired = world.engine.fire_due(10).await.expect("fired");
    assert!(fired > 0, "the turn's watchdog was due at once");
    assert_eq!(principals_since(&world, from), [SYSTEM_PRINCIPAL]);

    // A control carries its caller's.
    let from = world.store.with(|s| s.written.len());
    world
        .engine
        .control(ControlTarget::Session(a), pause(), metadata())
        .await
        .expect("stored")
        .expect("accepted");
    assert_eq!(principals_since(&world, from), ["admin"]);
}

#[tokio::test]
async fn given_more_conversations_than_the_cache_holds_then_it_keeps_its_limit_and_the_latest() {
    let mut world = World::new(SagaConfig::default());
    world.engine = Arc::new(
        world
            .engine_over(world.store.clone())
            .with_cache_limits(16, 16),
    );
    let conversations: Vec<Uuid> = (0..64).map(|_| Uuid::new_v4()).collect();
    for c in &conversations {
        world.started(&[*c]).await;
    }
    let cached = world.engine.slots.len();
    assert!(cached <= 16, "{cached} conversations cached");
    assert!(
        cached >= 8,
        "a full cache drops some, not all: {cached} left"
    );

    let latest = conversations[63];
    let message = vec![world.log.human_says(latest)];
    world.apply(message).await;
    assert_eq!(
        world.store.loads(latest),
        0,
        "the latest conversation stayed in memory"
    );
}

#[tokio::test]
async fn given_a_control_cancelled_while_it_commits_when_the_next_control_comes_then_it_decides_on_what_was_stored(
) {
    let (world, a) = World::active().await;
    *world
        .store
        .gate
        .conversation
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(a);
    // A pause whose client goes away while its commit is in flight: never written.
    let engine = world.engine.clone();
    let cancelled = tokio::spawn(async move {
        engine
            .control(ControlTarget::Session(a), pause(), metadata())
            .await
    });
    tokio::time::timeout(Duration::from_secs(5), world.store.gate.entered.notified())
        .await
        .expect("the pause reaches its commit");
    cancelled.abort();
    assert!(cancelled.await.is_err(), "the pause was cancelled");
    *world
        .store
        .gate
        .conversation
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = None;
    let loads = world.store.with(|s| s.loads.get(&a).copied().unwrap_or(0));
    // The machines did not keep the unwritten pause: the session is still active, so a
    // pause is accepted (a kept decision would refuse it as `paused` already), and the
    // conversation was read again.
    let again = world
        .engine
        .control(ControlTarget::Session(a), pause(), metadata())
        .await
        .expect("stored");
    assert!(again.is_ok(), "{again:?}");
    assert_eq!(
        world.store.with(|s| s.loads.get(&a).copied().unwrap_or(0)),
        loads + 1
    );
}

#[tokio::test]
async fn given_machines_cached_here_and_changed_by_another_replica_when_a_control_is_refused_on_them_then_it_is_decided_again_on_what_was_stored(
) {
    let (world, a) = World::active().await;
    let paused = world
        .engine
        .control(ControlTarget::Session(a), pause(), metadata())
        .await
        .expect("stored");
    assert!(paused.is_ok(), "{paused:?}");
    // Another replica resumes the session: this one's machines still say `paused`.
    let other = world.engine_over(world.store.clone());
    let resumed = other
        .control(ControlTarget::Session(a), Control::Resume, metadata())
        .await
        .expect("stored");
    assert!(resumed.is_ok(), "{resumed:?}");

    let loads = world.store.loads(a);
    let again = world
        .engine
        .control(ControlTarget::Session(a), pause(), metadata())
        .await
        .expect("stored");
    assert!(again.is_ok(), "refused on a stale copy: {again:?}");
    assert_eq!(world.store.loads(a), loads + 1, "read again");
    // A refusal on a current copy is answered without reading it again.
    let refused = world
        .engine
        .control(ControlTarget::Session(a), pause(), metadata())
        .await
        .expect("stored");
    assert!(refused.is_err(), "paused twice: {refused:?}");
    assert_eq!(world.store.loads(a), loads + 1);
}

#[tokio::test]
async fn given_a_conversation_another_writer_keeps_moving_when_a_control_has_tried_every_attempt_then_it_is_a_concurrency_conflict(
) {
    let (world, a) = World::active().await;
    world.store.with(|s| s.contended = Some(a));
    let commits = world.store.with(|s| s.commits);
    let refused = world
        .engine
        .control(ControlTarget::Session(a), pause(), metadata())
        .await;
    assert!(
        matches!(refused, Err(AppError::ConcurrencyConflict { .. })),
        "{refused:?}"
    );
    assert_eq!(world.store.with(|s| s.commits), commits, "nothing written");
}

impl World {
    /// A new engine over `store` with the default settings — as a restarted replica has
    /// it: nothing in memory.
    fn engine_over(&self, store: FakeStore) -> SagaEngine<FakeStore> {
        SagaEngine::new(store, SagaConfig::default(), Arc::new(SystemClock))
    }

    /// A copy of the store as it is now, without its snapshots.
    fn copy_without_snapshots(&self) -> FakeStore {
        let copy = FakeStore::default();
        let stored = self.store.with(|s| s.clone());
        copy.with(|s| {
            *s = stored;
            s.snapshots.clear();
        });
        copy
    }

    /// Decides `message` with a restarted engine over this world's store and with one over
    /// `control` (a copy of it).
    async fn decide_after_restart(&self, control: &FakeStore, message: &[LoggedEvent]) {
        for store in [self.store.clone(), control.clone()] {
            self.engine_over(store)
                .apply_batch(self.cursor, message)
                .await
                .expect("applies");
        }
    }

    /// The runes after the first `from` of `store`, with their sequences.
    fn runes_after(store: &FakeStore, from: usize) -> Vec<(pm_domain::saga::Recorded, i64)> {
        store.with(|s| {
            s.runes[from..]
                .iter()
                .map(|(_, r)| (r.recorded.clone(), r.sequence))
                .collect()
        })
    }
}

/// A conversation of `messages` human messages, applied one batch each by an engine that
/// takes a snapshot every 10 runes; answers with the conversation and its runes once a
/// snapshot is stored.
async fn long_conversation(messages: usize) -> (World, Uuid, usize) {
    let a = Uuid::new_v4();
    let mut world = World::new(SagaConfig::default());
    world.engine = Arc::new(
        world
            .engine_over(world.store.clone())
            .with_snapshots(SnapshotPolicy { every: 10 }),
    );
    world.started(&[a]).await;
    for _ in 0..messages {
        let message = vec![world.log.human_says(a)];
        world.apply(message).await;
        // Snapshots are written beside the saga path, by tasks of their own: let them run
        // (the fake store never makes the engine wait).
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }
    assert!(
        world.store.with(|s| s.snapshots.contains_key(&a)),
        "a snapshot was written"
    );
    let runes = world
        .store
        .with(|s| s.runes.iter().filter(|(c, _)| *c == a).count());
    (world, a, runes)
}

#[tokio::test]
async fn given_a_long_conversation_when_a_restarted_engine_loads_it_then_from_its_snapshot_and_it_decides_as_the_whole_fold_does(
) {
    let (mut world, a, total) = long_conversation(60).await;

    // The snapshot and the runes after it fold to what every rune folds to.
    let (snap, all): (_, Vec<StoredRune>) = world.store.with(|s| {
        let runes = s
            .runes
            .iter()
            .filter(|(c, _)| *c == a)
            .map(|(_, r)| r.clone());
        (s.snapshots[&a].clone(), runes.collect())
    });
    assert_eq!(snap.format, snapshot::FORMAT);
    let cause = |runes: &[StoredRune]| runes.iter().filter_map(|r| r.cause).max();
    let whole = pm_domain::saga::Sagas::restore(cause(&all), all.iter().map(|r| &r.recorded));
    let tail: Vec<StoredRune> = all
        .iter()
        .filter(|r| r.position > snap.position)
        .cloned()
        .collect();
    let mut folded = snapshot::decode(&snap.state).expect("decodes").sagas;
    folded.apply_all(cause(&tail), tail.iter().map(|r| &r.recorded));
    assert_eq!(folded, whole);

    // Given a restart: one engine loads the snapshot, another (on a copy without it) every rune.
    let control = world.copy_without_snapshots();
    let runes_before = world.store.with(|s| s.runes.len());
    let message = vec![world.log.human_says(a)];
    world.decide_after_restart(&control, &message).await;

    let loaded = world
        .store
        .with(|s| s.loaded_runes.last().copied())
        .expect("a load");
    assert!(loaded < total / 2, "read {loaded} of {total} runes");
    assert_eq!(
        control.with(|s| s.loaded_runes.last().copied()),
        Some(total)
    );
    let written = World::runes_after(&world.store, runes_before);
    assert!(!written.is_empty(), "the message was decided");
    assert_eq!(written, World::runes_after(&control, runes_before));
}

#[tokio::test]
async fn given_a_snapshot_that_does_not_read_when_the_conversation_is_loaded_then_every_rune_is_folded_instead(
) {
    let (mut world, a, total) = long_conversation(20).await;
    let control = world.copy_without_snapshots();
    world.store.with(|s| {
        if let Some(snap) = s.snapshots.get_mut(&a) {
            snap.state = b"garbage".to_vec();
        }
    });
    let loads = world.store.loads(a);
    let runes_before = world.store.with(|s| s.runes.len());
    let message = vec![world.log.human_says(a)];
    world.decide_after_restart(&control, &message).await;

    assert_eq!(
        world.store.loads(a),
        loads + 2,
        "read with the snapshot, then without"
    );
    assert_eq!(
        world.store.with(|s| s.loaded_runes.last().copied()),
        Some(total)
    );
    assert_eq!(
        World::runes_after(&world.store, runes_before),
        World::runes_after(&control, runes_before)
    );
}

mod attempt;

/// The rows the last commit wrote.
fn last_rows(world: &World) -> Rows {
    world
        .store
        .with(|s| s.rows.last().cloned().unwrap_or_default())
}

/// The turn queued in `conversation` (its first).
fn queued_turn(world: &World, conversation: Uuid) -> Uuid {
    world.store.with(|s| {
        s.runes
            .iter()
            .find_map(|(c, r)| match r.recorded.instance {
                Instance::Turn(id) if *c == conversation => Some(id),
                _ => None,
            })
            .expect("a turn was queued")
    })
}

#[tokio::test]
async fn given_a_turn_under_way_when_the_person_says_more_then_the_new_turn_and_the_agent_are_written_and_not_the_unchanged_session(
) {
    let (mut world, a) = World::active().await;
    let first = queued_turn(&world, a);
    let said = last_rows(&world);
    assert_eq!(said.sessions, [a], "the first message changed the session");

    let more = vec![world.log.human_says(a)];
    world.apply(more).await;

    let again = last_rows(&world);
    assert_eq!(again.turns.len(), 1, "a second turn: {again:?}");
    assert_ne!(again.turns, [first]);
    assert_eq!(again.agents.len(), 1, "its agent queues it");
    assert!(
        again.sessions.is_empty(),
        "the session is as it was: {again:?}"
    );
}

#[tokio::test]
async fn given_a_commit_that_failed_when_the_conversation_is_written_again_then_every_row_it_touches_is_written(
) {
    let (world, a) = World::active().await;
    world.store.with(|s| {
        s.scripted
            .push(|| CommitError::Store(AppError::Unavailable("down".into())))
    });
    let refused = world
        .engine
        .control(ControlTarget::Session(a), pause(), metadata())
        .await;
    assert!(refused.is_err(), "the store was down");

    world
        .engine
        .control(ControlTarget::Session(a), pause(), metadata())
        .await
        .expect("stored")
        .expect("accepted");
    let paused = last_rows(&world);
    assert_eq!(paused.sessions, [a]);
}
