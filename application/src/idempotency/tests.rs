//! The decorator against in-memory fakes of its ports: a key store that behaves like the
//! table (and an append that writes or completes its rows as the real one does), replica
//! liveness, and the log.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use chrono::Utc;
use serde_json::json;
use tokio::sync::Notify;

use super::*;
use crate::fact::Fact;
use crate::log::{EventFilter, LogReader, LoggedEvent};
use crate::AppError;

const ME: &str = "1-me";
const OTHER: &str = "2-other";

type Rows = Arc<Mutex<HashMap<(String, String), KeyRow>>>;

/// A claim's "started" and "go on" signals.
type ClaimGate = (Arc<Notify>, Arc<Notify>);

#[derive(Default, Clone)]
struct FakeStore {
    rows: Rows,
    calls: Arc<Mutex<Vec<&'static str>>>,
    down: Arc<Mutex<bool>>,
    lose_take_overs: Arc<Mutex<bool>>,
    /// The next claim says it has started (`.0`) and waits (`.1`) before it looks.
    claim_gate: Arc<Mutex<Option<ClaimGate>>>,
}

fn id(key: &IdempotencyKey) -> (String, String) {
    (key.role.clone(), key.key.clone())
}

impl FakeStore {
    fn called(&self, what: &'static str) -> Result<(), AppError> {
        self.calls.lock().unwrap().push(what);
        if *self.down.lock().unwrap() {
            return Err(AppError::Unavailable("down".into()));
        }
        Ok(())
    }

    fn calls(&self) -> Vec<&'static str> {
        self.calls.lock().unwrap().clone()
    }

    fn row(&self, key: &IdempotencyKey) -> Option<KeyRow> {
        self.rows.lock().unwrap().get(&id(key)).cloned()
    }

    fn put(&self, key: &IdempotencyKey, state: KeyState) {
        let row = KeyRow {
            request_hash: key.request_hash.clone(),
            state,
        };
        self.rows.lock().unwrap().insert(id(key), row);
    }
}

impl IdempotencyStore for FakeStore {
    async fn claim(&self, key: &IdempotencyKey, replica: &str) -> Result<Claimed, AppError> {
        self.called("claim")?;
        let gate = self.claim_gate.lock().unwrap().take();
        if let Some((started, open)) = gate {
            started.notify_one();
            open.notified().await;
        }
        let mut rows = self.rows.lock().unwrap();
        if let Some(row) = rows.get(&id(key)) {
            return Ok(Claimed::Found(row.clone()));
        }
        let state = KeyState::Pending {
            owner: Some(replica.into()),
            claimed_at: Some(Utc::now()),
        };
        let request_hash = key.request_hash.clone();
        rows.insert(
            id(key),
            KeyRow {
                request_hash,
                state,
            },
        );
        Ok(Claimed::Now)
    }

    async fn take_over(
        &self,
        key: &IdempotencyKey,
        from: Option<&str>,
        replica: &str,
    ) -> Result<bool, AppError> {
        self.called("take_over")?;
        if *self.lose_take_overs.lock().unwrap() {
            return Ok(false);
        }
        let mut rows = self.rows.lock().unwrap();
        let Some(row) = rows.get_mut(&id(key)) else {
            return Ok(false);
        };
        match &row.state {
            KeyState::Pending { owner, .. } if owner.as_deref() == from => {
                row.state = KeyState::Pending {
                    owner: Some(replica.into()),
                    claimed_at: Some(Utc::now()),
                };
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn record(&self, key: &IdempotencyKey, answer: &StoredAnswer) -> Result<bool, AppError> {
        self.called("record")?;
        if self.row(key).is_some() {
            return Ok(false);
        }
        self.put(key, KeyState::Done(StoredResponse::Answer(answer.clone())));
        Ok(true)
    }

    async fn complete(&self, key: &IdempotencyKey, answer: &StoredAnswer) -> Result<(), AppError> {
        self.called("complete")?;
        if matches!(
            self.row(key),
            Some(KeyRow {
                state: KeyState::Pending { .. },
                ..
            })
        ) {
            self.put(key, KeyState::Done(StoredResponse::Answer(answer.clone())));
        }
        Ok(())
    }

    async fn release(&self, key: &IdempotencyKey, replica: &str) -> Result<(), AppError> {
        self.called("release")?;
        let mut rows = self.rows.lock().unwrap();
        if let Some(KeyState::Pending { owner, .. }) = rows.get(&id(key)).map(|r| &r.state) {
            if owner.as_deref() == Some(replica) {
                rows.remove(&id(key));
            }
        }
        Ok(())
    }
}

#[derive(Default, Clone)]
struct FakeLiveness {
    alive: Arc<Mutex<HashSet<String>>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ReplicaLiveness for FakeLiveness {
    async fn is_alive(&self, replica: &str) -> Result<bool, AppError> {
        self.asked.lock().unwrap().push(replica.into());
        Ok(self.alive.lock().unwrap().contains(replica))
    }
}

#[derive(Default, Clone)]
struct FakeLog {
    events: Arc<Mutex<Vec<LoggedEvent>>>,
}

impl FakeLog {
    /// Appends an `ActorRegistered` fact; returns its position.
    fn append(&self) -> LogPosition {
        let mut events = self.events.lock().unwrap();
        let position = LogPosition(events.len() as i64 + 1);
        events.push(LoggedEvent {
            position,
            aggregate_type: "actor".into(),
            aggregate_id: uuid::Uuid::now_v7().to_string(),
            sequence: 1,
            event_type: "project_manager.actor.registered".into(),
            event_version: "1.0".into(),
            payload: json!({"id": uuid::Uuid::now_v7(), "kind": "human",
                "display_name": "Dora", "created_at": "2025-01-01T00:00:00Z"})
            .into(),
            metadata: json!({}).into(),
            conversation_id: None,
            organization: None,
        });
        position
    }

    fn len(&self) -> usize {
        self.events.lock().unwrap().len()
    }
}

impl LogReader for FakeLog {
    async fn read_after(
        &self,
        after: LogPosition,
        _: &EventFilter,
        limit: u32,
    ) -> Result<Vec<LoggedEvent>, AppError> {
        let events = self.events.lock().unwrap();
        Ok(events
            .iter()
            .filter(|e| e.position > after)
            .take(limit as usize)
            .cloned()
            .collect())
    }

    async fn head(&self) -> Result<LogPosition, AppError> {
        Ok(LogPosition(self.len() as i64))
    }

    async fn event_at(&self, position: LogPosition) -> Result<Option<LoggedEvent>, AppError> {
        let events = self.events.lock().unwrap();
        Ok(events.iter().find(|e| e.position == position).cloned())
    }

    async fn end(&self) -> Result<LogPosition, AppError> {
        self.head().await
    }

    async fn held_back(&self) -> Result<Option<std::time::Duration>, AppError> {
        Ok(None)
    }

    fn doorbell(&self) -> tokio::sync::watch::Receiver<u64> {
        tokio::sync::watch::channel(0).1
    }
}

/// What the fake command does when run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Does {
    /// Appends a fact, writing or completing the key's row as the real append does.
    Append,
    /// Answers `404` without a fact.
    Reject,
    /// Fails with a `5xx` at its append (after the key check, as a lost connection
    /// would).
    Fail,
}

/// A command whose append behaves like the store's: an unclaimed key with a row is
/// taken (nothing written); a claimed one is completed with the fact.
#[derive(Clone)]
struct FakeCommand {
    does: Does,
    store: FakeStore,
    log: FakeLog,
    runs: Arc<Mutex<Vec<IdempotencyKey>>>,
    gate: Option<Arc<Notify>>,
}

impl KeyedCommand for FakeCommand {
    type Response = &'static str;

    async fn run(&self, key: IdempotencyKey) -> Ran<&'static str> {
        self.runs.lock().unwrap().push(key.clone());
        if let Some(gate) = &self.gate {
            gate.notified().await;
        }
        let (outcome, response) = match self.does {
            Does::Append | Does::Fail if !key.claimed && self.store.row(&key).is_some() => {
                (RunOutcome::KeyTaken, "409")
            }
            Does::Fail => (RunOutcome::Failed, "500"),
            Does::Reject => (
                RunOutcome::Answered(StoredAnswer {
                    status: 404,
                    body: "{\"code\":\"conversation_not_found\"}".into(),
                    location: None,
                }),
                "404",
            ),
            Does::Append => {
                let position = self.log.append();
                self.store
                    .put(&key, KeyState::Done(StoredResponse::Appended(position)));
                (RunOutcome::Appended, "201")
            }
        };
        Ran { outcome, response }
    }
}

struct World {
    store: FakeStore,
    liveness: FakeLiveness,
    log: FakeLog,
    idempotency: Idempotency<FakeStore, FakeLiveness, FakeLog>,
}

impl World {
    fn new() -> Self {
        let (store, liveness, log) = (
            FakeStore::default(),
            FakeLiveness::default(),
            FakeLog::default(),
        );
        let idempotency = Idempotency::new(store.clone(), liveness.clone(), log.clone(), ME);
        Self {
            store,
            liveness,
            log,
            idempotency,
        }
    }

    fn command(&self, does: Does) -> FakeCommand {
        FakeCommand {
            does,
            store: self.store.clone(),
            log: self.log.clone(),
            runs: Arc::default(),
            gate: None,
        }
    }

    async fn send(&self, key: &IdempotencyKey, command: &FakeCommand) -> Handled<&'static str> {
        self.idempotency.run(key.clone(), command.clone()).await
    }
}

fn key(body: &str) -> IdempotencyKey {
    IdempotencyKey::for_request("ingress", "key-1", "POST", "/v1/actors", body.as_bytes())
}

fn pending(owner: Option<&str>, age_secs: i64) -> KeyState {
    KeyState::Pending {
        owner: owner.map(str::to_string),
        claimed_at: Some(Utc::now() - chrono::Duration::seconds(age_secs)),
    }
}

fn ran(handled: &Handled<&'static str>) -> Option<&'static str> {
    match handled {
        Handled::Ran(r) => Some(r),
        _ => None,
    }
}

#[tokio::test]
async fn given_a_new_key_when_the_command_appends_then_it_ran_once_unclaimed_with_no_key_io() {
    let world = World::new();
    let command = world.command(Does::Append);
    let handled = world.send(&key("a"), &command).await;
    assert_eq!(ran(&handled), Some("201"));
    let runs = command.runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1);
    assert!(!runs[0].claimed, "the common path runs without a claim");
    assert!(world.store.calls().is_empty(), "no extra round trip");
    assert!(matches!(
        world.store.row(&key("a")).map(|r| r.state),
        Some(KeyState::Done(StoredResponse::Appended(_)))
    ));
}

#[tokio::test]
async fn given_a_new_key_when_the_command_answers_without_a_fact_then_the_answer_is_recorded() {
    let world = World::new();
    let handled = world.send(&key("a"), &world.command(Does::Reject)).await;
    assert_eq!(ran(&handled), Some("404"));
    assert_eq!(world.store.calls(), ["record"]);
    assert!(matches!(
        world.store.row(&key("a")).map(|r| r.state),
        Some(KeyState::Done(StoredResponse::Answer(StoredAnswer {
            status: 404,
            ..
        })))
    ));
}

#[tokio::test]
async fn given_a_key_done_with_a_fact_when_repeated_then_the_fact_is_replayed_and_nothing_written()
{
    let world = World::new();
    world.send(&key("a"), &world.command(Does::Append)).await;
    let handled = world.send(&key("a"), &world.command(Does::Append)).await;
    match handled {
        Handled::Replayed(Replay::Appended { fact, position, .. }) => {
            assert_eq!(position, LogPosition(1));
            assert!(matches!(fact, Fact::ActorRegistered(_)));
        }
        other => panic!("expected a replayed fact, got {other:?}"),
    }
    assert_eq!(world.log.len(), 1, "the repeat wrote no fact");
}

#[tokio::test]
async fn given_a_key_done_with_an_answer_when_repeated_then_the_answer_is_replayed() {
    let world = World::new();
    world.send(&key("a"), &world.command(Does::Reject)).await;
    // Even when the command would now succeed: the append finds the key's row.
    let handled = world.send(&key("a"), &world.command(Does::Append)).await;
    assert!(
        matches!(
            handled,
            Handled::Replayed(Replay::Answer(StoredAnswer { status: 404, .. }))
        ),
        "{handled:?}"
    );
    assert_eq!(world.log.len(), 0);
}

#[tokio::test]
async fn given_a_key_used_for_another_request_when_sent_then_reused() {
    let world = World::new();
    world.send(&key("a"), &world.command(Does::Append)).await;
    let handled = world.send(&key("b"), &world.command(Does::Append)).await;
    assert!(matches!(handled, Handled::Reused), "{handled:?}");
    assert_eq!(world.log.len(), 1);
}

#[tokio::test]
async fn given_a_pending_claim_on_a_live_replica_when_sent_then_in_use_after_asking_once() {
    let world = World::new();
    world.store.put(&key("a"), pending(Some(OTHER), 1));
    world.liveness.alive.lock().unwrap().insert(OTHER.into());
    let handled = world.send(&key("a"), &world.command(Does::Append)).await;
    assert!(matches!(handled, Handled::InUse), "{handled:?}");
    assert_eq!(*world.liveness.asked.lock().unwrap(), [OTHER]);
    assert_eq!(world.log.len(), 0);
}

#[tokio::test]
async fn given_a_pending_claim_on_a_dead_replica_when_sent_then_taken_over_and_run_once_claimed() {
    let world = World::new();
    world.store.put(&key("a"), pending(Some(OTHER), 1));
    let command = world.command(Does::Append);
    let handled = world.send(&key("a"), &command).await;
    assert_eq!(ran(&handled), Some("201"));
    let runs = command.runs.lock().unwrap().clone();
    assert_eq!(
        runs.iter().map(|k| k.claimed).collect::<Vec<_>>(),
        [false, true],
        "first at once (the key was taken), then under the claim"
    );
    assert_eq!(world.log.len(), 1);
    assert_eq!(world.store.calls(), ["claim", "take_over"]);
}

#[tokio::test]
async fn given_a_pending_claim_of_this_replica_whose_request_ended_then_taken_over_without_asking()
{
    let world = World::new();
    world.store.put(&key("a"), pending(Some(ME), 1));
    let handled = world.send(&key("a"), &world.command(Does::Append)).await;
    assert_eq!(ran(&handled), Some("201"));
    assert!(world.liveness.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn given_a_claim_older_than_the_timeout_then_taken_over_without_asking() {
    let world = World::new();
    world.store.put(&key("a"), pending(Some(OTHER), 61));
    world.liveness.alive.lock().unwrap().insert(OTHER.into());
    let handled = world.send(&key("a"), &world.command(Does::Append)).await;
    assert_eq!(ran(&handled), Some("201"));
    assert!(world.liveness.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn given_a_request_with_the_key_running_here_when_another_arrives_then_in_use() {
    let world = World::new();
    let gate = Arc::new(Notify::new());
    let mut slow = world.command(Does::Append);
    slow.gate = Some(gate.clone());
    let first = {
        let (idempotency, key, slow) = (world.idempotency.clone(), key("a"), slow.clone());
        tokio::spawn(async move { idempotency.run(key, slow).await })
    };
    while slow.runs.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    let second = world.send(&key("a"), &world.command(Does::Append)).await;
    assert!(matches!(second, Handled::InUse), "{second:?}");
    gate.notify_one();
    assert_eq!(ran(&first.await.unwrap()), Some("201"));
    // Once it ended, the key replays.
    let third = world.send(&key("a"), &world.command(Does::Append)).await;
    assert!(matches!(third, Handled::Replayed(_)), "{third:?}");
}

#[tokio::test]
async fn given_a_caller_that_goes_away_then_the_command_still_completes_its_key() {
    let world = World::new();
    let gate = Arc::new(Notify::new());
    let mut slow = world.command(Does::Append);
    slow.gate = Some(gate.clone());
    let caller = {
        let (idempotency, key, slow) = (world.idempotency.clone(), key("a"), slow.clone());
        tokio::spawn(async move { idempotency.run(key, slow).await })
    };
    while slow.runs.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    caller.abort();
    gate.notify_one();
    for _ in 0..100 {
        if world.log.len() == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(world.log.len(), 1, "the command ran to its end");
    let again = world.send(&key("a"), &world.command(Does::Append)).await;
    assert!(matches!(again, Handled::Replayed(_)), "{again:?}");
}

#[tokio::test]
async fn given_a_claimed_run_that_fails_then_the_claim_is_released_for_a_retry() {
    let world = World::new();
    world.store.put(&key("a"), pending(Some(OTHER), 1));
    let handled = world.send(&key("a"), &world.command(Does::Fail)).await;
    assert_eq!(ran(&handled), Some("500"));
    assert_eq!(world.store.calls(), ["claim", "take_over", "release"]);
    assert!(world.store.row(&key("a")).is_none());
    // The retry runs the command, once.
    let retry = world.send(&key("a"), &world.command(Does::Append)).await;
    assert_eq!(ran(&retry), Some("201"));
    assert_eq!(world.log.len(), 1);
}

#[tokio::test]
async fn given_an_unclaimed_run_that_fails_then_nothing_is_kept_and_no_key_io() {
    let world = World::new();
    let handled = world.send(&key("a"), &world.command(Does::Fail)).await;
    assert_eq!(ran(&handled), Some("500"));
    assert!(world.store.calls().is_empty());
    assert!(world.store.row(&key("a")).is_none());
}

#[tokio::test]
async fn given_a_claimed_run_that_answers_without_a_fact_then_the_answer_completes_the_key() {
    let world = World::new();
    world.store.put(&key("a"), pending(None, 1));
    let handled = world.send(&key("a"), &world.command(Does::Reject)).await;
    assert_eq!(ran(&handled), Some("404"));
    assert!(matches!(
        world.store.row(&key("a")).map(|r| r.state),
        Some(KeyState::Done(StoredResponse::Answer(_)))
    ));
}

#[tokio::test]
async fn given_take_overs_lost_every_time_then_in_use_after_the_claim_limit() {
    let world = World::new();
    world.store.put(&key("a"), pending(Some(OTHER), 1));
    *world.store.lose_take_overs.lock().unwrap() = true;
    let command = world.command(Does::Append);
    let handled = world.send(&key("a"), &command).await;
    assert!(matches!(handled, Handled::InUse), "{handled:?}");
    let claims = world
        .store
        .calls()
        .iter()
        .filter(|c| **c == "claim")
        .count();
    assert_eq!(claims, decision::MAX_CLAIMS as usize);
    assert_eq!(command.runs.lock().unwrap().len(), 1, "never run claimed");
}

#[tokio::test]
async fn given_the_key_store_away_when_a_repeat_claims_then_failed_unavailable() {
    let world = World::new();
    world.store.put(&key("a"), pending(Some(OTHER), 1));
    *world.store.down.lock().unwrap() = true;
    let handled = world.send(&key("a"), &world.command(Does::Append)).await;
    assert!(
        matches!(handled, Handled::Failed(AppError::Unavailable(_))),
        "{handled:?}"
    );
}

#[tokio::test]
async fn given_the_key_store_away_when_recording_then_the_answer_still_stands() {
    let world = World::new();
    *world.store.down.lock().unwrap() = true;
    let handled = world.send(&key("a"), &world.command(Does::Reject)).await;
    assert_eq!(ran(&handled), Some("404"));
}

#[tokio::test]
async fn given_a_claim_made_while_another_request_with_the_key_arrived_here_then_it_gives_the_claim_back(
) {
    let world = World::new();
    // A's unclaimed append finds the key taken, so A claims; its claim waits.
    world.store.put(
        &key("a"),
        KeyState::Pending {
            owner: Some(OTHER.into()),
            claimed_at: None,
        },
    );
    let (started, open) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    *world.store.claim_gate.lock().unwrap() = Some((started.clone(), open.clone()));
    let a_command = world.command(Does::Append);
    let a = {
        let (idempotency, command) = (world.idempotency.clone(), a_command.clone());
        tokio::spawn(async move { idempotency.run(key("a"), command).await })
    };
    started.notified().await;
    // Meanwhile the row goes (released), and B arrives here and runs (held at its gate).
    world.store.rows.lock().unwrap().clear();
    let gate = Arc::new(Notify::new());
    let mut b_command = world.command(Does::Append);
    b_command.gate = Some(gate.clone());
    let b = {
        let (idempotency, command) = (world.idempotency.clone(), b_command.clone());
        tokio::spawn(async move { idempotency.run(key("a"), command).await })
    };
    while b_command.runs.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    // A's claim finds no row: it is A's now, but B runs the key here.
    open.notify_one();
    let a = a.await.unwrap();
    assert!(matches!(a, Handled::InUse), "{a:?}");
    assert_eq!(
        a_command.runs.lock().unwrap().len(),
        1,
        "A never ran under its claim"
    );
    assert!(
        world.store.calls().contains(&"release"),
        "A gave its claim back"
    );
    gate.notify_one();
    assert_eq!(ran(&b.await.unwrap()), Some("201"));
}
