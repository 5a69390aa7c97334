//! The command bus against an in-memory store: conflict retries, existing entities, and
//! how store and domain failures surface.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use async_trait::async_trait;
use cqrs_es::{Aggregate, AggregateContext, DomainEvent, EventEnvelope};
use pm_domain::{CheckpointInfo, Lookup, LookupError, TaskInfo};
use serde::{Deserialize, Serialize};

use super::*;

/// A one-fact aggregate: `Write(text)` creates it; the same text again is a repeat.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Note(Option<String>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Written(String);

impl DomainEvent for Written {
    fn event_type(&self) -> String {
        "note.written".into()
    }
    fn event_version(&self) -> String {
        "1.0".into()
    }
}

impl Aggregate for Note {
    const TYPE: &'static str = "note";
    type Command = String;
    type Event = Written;
    type Error = DomainError;
    type Services = Services;

    async fn handle(
        &mut self,
        text: String,
        _: &Services,
        sink: &EventSink<Self>,
    ) -> Result<(), DomainError> {
        match &self.0 {
            Some(existing) if *existing == text => Ok(()),
            Some(_) => Err(DomainError::validation("text", "already written")),
            None if text.is_empty() => Err(DomainError::validation("text", "empty")),
            None => {
                sink.write(Written(text), self).await;
                Ok(())
            }
        }
    }

    fn apply(&mut self, event: Written) {
        self.0 = Some(event.0);
    }
}

impl PmAggregate for Note {
    fn creation(&self) -> Option<Written> {
        self.0.clone().map(Written)
    }
    fn conversation_id(&self) -> Option<Uuid> {
        None
    }
}

struct NoLookup;

#[async_trait]
impl Lookup for NoLookup {
    async fn conversation_exists(&self, _: Uuid) -> Result<bool, LookupError> {
        Ok(false)
    }
    async fn actor_kind(
        &self,
        _: Uuid,
    ) -> Result<Option<pm_domain::types::ActorKind>, LookupError> {
        Ok(None)
    }
    async fn checkpoint(&self, _: Uuid) -> Result<Option<CheckpointInfo>, LookupError> {
        Ok(None)
    }
    async fn task(&self, _: Uuid) -> Result<Option<TaskInfo>, LookupError> {
        Ok(None)
    }
    async fn turn(&self, _: Uuid) -> Result<Option<pm_domain::lookup::TurnInfo>, LookupError> {
        Ok(None)
    }
}

/// What the fake store does on append, in order; then it succeeds.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Conflict,
    Unreachable,
    KeyTaken,
}

#[derive(Default)]
struct FakeStore {
    stored: Mutex<Option<String>>,
    faults: Mutex<Vec<Fault>>,
    loads: Mutex<Vec<Load>>,
    appends: Mutex<u32>,
    metadata: Mutex<Vec<EventMetadata>>,
}

struct Ctx(Note);

impl AggregateContext<Note> for Ctx {
    fn aggregate(&mut self) -> &mut Note {
        &mut self.0
    }
}

impl EventStore<Note> for FakeStore {
    type AC = Ctx;

    async fn load_events(
        &self,
        _: &str,
    ) -> Result<Vec<EventEnvelope<Note>>, AggregateError<DomainError>> {
        Ok(Vec::new())
    }

    async fn load_aggregate(&self, id: &str) -> Result<Ctx, AggregateError<DomainError>> {
        self.load_with(id, Load::Read).await
    }

    async fn commit(
        &self,
        _: Vec<Written>,
        _: Ctx,
        _: HashMap<String, String>,
    ) -> Result<Vec<EventEnvelope<Note>>, AggregateError<DomainError>> {
        Err(AggregateError::UnexpectedError(
            "the bus appends through AggregateStore".into(),
        ))
    }
}

impl AggregateStore<Note> for FakeStore {
    async fn load_with(&self, _: &str, load: Load) -> Result<Ctx, AggregateError<DomainError>> {
        self.loads.lock().expect("lock").push(load);
        Ok(Ctx(match load {
            Load::AssumeNew => Note::default(),
            Load::Read => Note(self.stored.lock().expect("lock").clone()),
        }))
    }

    async fn append(
        &self,
        events: Vec<Written>,
        _: Ctx,
        metadata: &EventMetadata,
        _: Option<&IdempotencyKey>,
        _: Option<&crate::bus::Fence>,
    ) -> Result<Vec<LogPosition>, AppendFailure> {
        *self.appends.lock().expect("lock") += 1;
        self.metadata.lock().expect("lock").push(metadata.clone());
        let fault = {
            let mut faults = self.faults.lock().expect("lock");
            (!faults.is_empty()).then(|| faults.remove(0))
        };
        match fault {
            Some(Fault::Conflict) => Err(AppendFailure::Conflict),
            Some(Fault::Unreachable) => Err(AppendFailure::Unavailable("down".into())),
            Some(Fault::KeyTaken) => Err(AppendFailure::KeyTaken),
            None => {
                let mut stored = self.stored.lock().expect("lock");
                if stored.is_some() {
                    return Err(AppendFailure::Conflict);
                }
                *stored = events.last().map(|e| e.0.clone());
                Ok(vec![LogPosition(42)])
            }
        }
    }
}

fn bus(store: FakeStore, attempts: u32) -> CommandBus<FakeStore> {
    CommandBus::new(store, Services::new(Arc::new(NoLookup)), attempts)
}

fn ctx() -> CommandContext {
    CommandContext {
        correlation_id: "c".into(),
        causation_id: None,
        role: "test".into(),
        principal: "test".into(),
        scope: crate::scope::Scope::All,
        voice: crate::speaker::Voice::anyone(),
        idempotency_key: None,
        turn: None,
        ends: None,
        trace: None,
    }
}

async fn run(
    bus: &CommandBus<FakeStore>,
    text: &str,
    load: Load,
) -> Result<Outcome<Written>, AppError> {
    bus.execute::<Note>(Uuid::nil(), load, text.to_string(), &ctx(), Utc::now())
        .await
}

#[tokio::test]
async fn given_a_new_aggregate_when_executed_then_created_with_the_stores_position() {
    let bus = bus(FakeStore::default(), 3);
    let outcome = run(&bus, "hi", Load::AssumeNew).await.expect("created");
    assert_eq!(
        outcome,
        Outcome::Created {
            entity: Written("hi".into()),
            position: LogPosition(42)
        }
    );
    assert_eq!(
        *bus.store().loads.lock().expect("lock"),
        vec![Load::AssumeNew]
    );
}

#[tokio::test]
async fn given_a_requests_trace_when_executed_then_the_facts_metadata_records_it() {
    let bus = bus(FakeStore::default(), 3);
    let trace = crate::trace::TraceContext::root();
    let ctx = CommandContext {
        trace: Some(trace.clone()),
        ..ctx()
    };
    bus.execute::<Note>(Uuid::nil(), Load::AssumeNew, "hi".into(), &ctx, Utc::now())
        .await
        .expect("created");
    let written = bus.store().metadata.lock().expect("lock").clone();
    assert_eq!(written[0].trace, Some(trace));
}

#[tokio::test]
async fn given_a_callers_principal_when_executed_then_the_facts_metadata_names_it() {
    let bus = bus(FakeStore::default(), 3);
    let ctx = CommandContext {
        principal: "alice".into(),
        ..ctx()
    };
    bus.execute::<Note>(Uuid::nil(), Load::AssumeNew, "hi".into(), &ctx, Utc::now())
        .await
        .expect("created");
    let written = bus.store().metadata.lock().expect("lock").clone();
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].principal, "alice");
    assert_eq!(written[0].role, "test");
    // Stored as written: `principal` right after `role`.
    let text = serde_json::to_string(&written[0]).expect("serializes");
    let at = |key: &str| text.find(&format!("\"{key}\":"));
    assert!(at("role").is_some(), "{text}");
    assert!(
        at("role") < at("principal") && at("principal") < at("recorded_at"),
        "{text}"
    );
    assert!(text.contains(r#""principal":"alice""#), "{text}");
}

#[tokio::test]
async fn given_lost_races_when_executed_then_retried_with_real_loads_until_it_commits() {
    let store = FakeStore::default();
    *store.faults.lock().expect("lock") = vec![Fault::Conflict, Fault::Conflict];
    let bus = bus(store, 3);
    let outcome = run(&bus, "hi", Load::AssumeNew).await.expect("created");
    assert!(matches!(outcome, Outcome::Created { .. }));
    assert_eq!(*bus.store().appends.lock().expect("lock"), 3);
    assert_eq!(
        *bus.store().loads.lock().expect("lock"),
        vec![Load::AssumeNew, Load::Read, Load::Read]
    );
}

#[tokio::test]
async fn given_races_lost_on_every_attempt_then_concurrency_conflict() {
    let store = FakeStore::default();
    *store.faults.lock().expect("lock") = vec![Fault::Conflict; 5];
    let bus = bus(store, 3);
    let err = run(&bus, "hi", Load::AssumeNew)
        .await
        .expect_err("conflict");
    assert!(matches!(err, AppError::ConcurrencyConflict { attempts: 3 }));
    assert_eq!(*bus.store().appends.lock().expect("lock"), 3);
}

#[tokio::test]
async fn given_an_existing_id_presumed_new_when_repeated_then_the_retry_finds_the_entity() {
    let store = FakeStore::default();
    *store.stored.lock().expect("lock") = Some("hi".into());
    let bus = bus(store, 3);
    // The first attempt presumes the id new and conflicts; the retry reads and sees a repeat.
    let outcome = run(&bus, "hi", Load::AssumeNew).await.expect("existing");
    assert_eq!(
        outcome,
        Outcome::Existing {
            entity: Written("hi".into())
        }
    );
    assert_eq!(*bus.store().appends.lock().expect("lock"), 1);
}

#[tokio::test]
async fn given_a_rule_broken_then_domain_error_and_nothing_appended() {
    let bus = bus(FakeStore::default(), 3);
    let err = run(&bus, "", Load::AssumeNew).await.expect_err("rejected");
    assert!(matches!(
        err,
        AppError::Domain(DomainError::Validation { field: "text", .. })
    ));
    assert_eq!(*bus.store().appends.lock().expect("lock"), 0);
}

#[tokio::test]
async fn given_an_unreachable_store_then_unavailable_without_retry() {
    let store = FakeStore::default();
    *store.faults.lock().expect("lock") = vec![Fault::Unreachable];
    let bus = bus(store, 3);
    let err = run(&bus, "hi", Load::AssumeNew)
        .await
        .expect_err("unavailable");
    assert!(matches!(err, AppError::Unavailable(_)));
    assert_eq!(*bus.store().appends.lock().expect("lock"), 1);
}

#[tokio::test]
async fn given_a_taken_key_then_the_typed_key_taken_error_without_retry() {
    let store = FakeStore::default();
    *store.faults.lock().expect("lock") = vec![Fault::KeyTaken];
    let bus = bus(store, 3);
    let err = run(&bus, "hi", Load::AssumeNew)
        .await
        .expect_err("key taken");
    assert!(matches!(err, AppError::IdempotencyKeyTaken));
    assert_eq!(*bus.store().appends.lock().expect("lock"), 1);
}
