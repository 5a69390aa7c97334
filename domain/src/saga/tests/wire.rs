//! The runes' wire form: every rune round-trips, carries its name, and no two runes can be
//! confused when read back (cqrs-es reads payloads with serde alone).

use std::collections::BTreeSet;

use cqrs_es::DomainEvent;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::support::*;
use crate::saga::rune::agent::AgentFailed;
use crate::saga::rune::session::SessionRune;
use crate::saga::*;
use crate::testing::id;
use crate::types::{CheckpointType as C, TaskCheckpointType as K};

/// Every rune the decisions emit, from scenarios that reach them all, plus the ones no
/// fact reaches.
fn harvest() -> Vec<Rune> {
    let mut runes: Vec<Rune> = super::e2e::script()
        .log
        .into_iter()
        .map(|r| r.rune)
        .collect();
    let mut w = super::session_table::suspended();
    w.human_says();
    w.control(Control::Pause { reason: "p".into() })
        .expect("pause");
    w.control(Control::Resume).expect("resume");
    w.checkpoint(C::NeedInformation);
    w.human_says();
    let turn = w.active(w.root()).expect("dispatched");
    let row = w
        .row(Instance::Turn(turn), DeadlineKind::TurnTimeout)
        .expect("armed");
    w.restart(&[row]);
    w.task(Some(id(W)));
    let (task, _) = w.task(Some(id(W)));
    w.task_checkpoint(task, K::WorkStarted);
    w.task_checkpoint(task, K::WorkRejected);
    w.control(Control::Kill {
        agent_id: w.worker(),
    })
    .expect("kill");
    w.task(Some(id(W)));
    w.checkpoint(C::NeedInformation);
    w.restart(&[]);
    w.checkpoint(C::CloseConversation);
    w.human_says();
    runes.extend(w.log.into_iter().map(|r| r.rune));
    let mut w = World::started();
    w.human_says();
    let turn = w.active(w.root()).expect("dispatched");
    let (turn_epoch, _) = w.claim(turn);
    let usage = WorkerOp::Usage {
        turn_epoch,
        input_tokens: 3,
        output_tokens: 4,
    };
    w.request(turn, usage).expect("usage");
    let reason = "r".into();
    w.request(turn, WorkerOp::Release { turn_epoch, reason })
        .expect("release");
    w.claim(turn);
    w.due(Instance::Turn(turn), DeadlineKind::TurnLease);
    w.checkpoint(C::BeginWork);
    runes.extend(w.log.into_iter().map(|r| r.rune));
    // A token budget: exhausted (session.suspended budget_exhausted), then added to.
    let mut b = World::new();
    b.config.token_budget = Some(10);
    b.start(&[id(H), id(L)], &[id(L)]);
    b.human_says();
    let turn = b.active(b.root()).expect("dispatched");
    let (turn_epoch, _) = b.claim(turn);
    let spent = WorkerOp::Usage {
        turn_epoch,
        input_tokens: 10,
        output_tokens: 0,
    };
    b.request(turn, spent).expect("usage");
    b.control(Control::AddBudget { add_tokens: 5 })
        .expect("budget");
    runes.extend(b.log.into_iter().map(|r| r.rune));
    let anomaly = SagaAnomaly {
        instance: Instance::Plan(id(1)),
        state: "goal_met".into(),
        fact: "project_manager.task.created".into(),
        reason: "r".into(),
    };
    runes.push(Rune::Plan(PlanRune::Anomaly(anomaly)));
    runes.push(Rune::Agent(AgentRune::Failed(AgentFailed {
        agent_id: id(2),
        error: "e".into(),
    })));
    runes.extend(super::tool_table::every_tool_rune());
    runes.push(Rune::Tool(ToolRune::Anomaly(SagaAnomaly {
        instance: Instance::ToolCall(id(4)),
        state: "none".into(),
        fact: "deadline".into(),
        reason: "r".into(),
    })));
    runes
}

fn round_trip<R: Serialize + DeserializeOwned + DomainEvent + PartialEq>(rune: &R) {
    let json = serde_json::to_value(rune).expect("serializes");
    assert_eq!(json["rune"], rune.event_type(), "{json}");
    assert_eq!(rune.event_version(), crate::EVENT_VERSION);
    let back: R = serde_json::from_value(json.clone()).expect("deserializes");
    assert!(back == *rune, "{json} read back as {:?}", back.event_type());
    let mut extra = json;
    extra["unexpected"] = serde_json::json!(1);
    assert!(
        serde_json::from_value::<R>(extra).is_err(),
        "unknown fields are refused"
    );
}

#[test]
fn given_every_rune_when_serialized_and_read_back_then_the_same_rune() {
    let runes = harvest();
    let mut seen = BTreeSet::new();
    for rune in &runes {
        seen.insert((rune_machine(rune), rune.event_type()));
        match rune {
            Rune::Session(r) => round_trip(r),
            Rune::Agent(r) => round_trip(r),
            Rune::Turn(r) => round_trip(r),
            Rune::Plan(r) => round_trip(r),
            Rune::Tool(r) => round_trip(r),
        }
    }
    let all = [
        ("session", SessionRune::NAMES),
        ("agent", AgentRune::NAMES),
        ("turn", TurnRune::NAMES),
        ("plan", PlanRune::NAMES),
        ("tool_call", ToolRune::NAMES),
    ];
    for (machine, names) in all {
        for name in names {
            assert!(
                seen.contains(&(machine, *name)),
                "no {machine} rune {name} was tried"
            );
        }
    }
}

fn rune_machine(rune: &Rune) -> &'static str {
    match rune {
        Rune::Session(_) => "session",
        Rune::Agent(_) => "agent",
        Rune::Turn(_) => "turn",
        Rune::Plan(_) => "plan",
        Rune::Tool(_) => "tool_call",
    }
}

#[test]
fn given_the_empty_payloads_when_read_back_then_each_is_its_own_rune() {
    for name in [
        "session.resumed",
        "session.unsuspended",
        "session.archived",
        "conversation.completed",
        "restart.preserve_waiting",
    ] {
        let rune: SessionRune =
            serde_json::from_value(serde_json::json!({ "rune": name })).expect("reads");
        assert_eq!(rune.name(), name);
    }
}

#[test]
fn given_the_vocabulary_then_names_are_unique_and_saga_anomaly_is_shared() {
    let mut names = BTreeSet::new();
    for list in [
        SessionRune::NAMES,
        AgentRune::NAMES,
        TurnRune::NAMES,
        PlanRune::NAMES,
        ToolRune::NAMES,
    ] {
        assert_eq!(list.last(), Some(&rune::SAGA_ANOMALY));
        for name in &list[..list.len() - 1] {
            assert!(names.insert(*name), "{name} twice");
        }
    }
    assert_eq!(names.len(), 18 + 6 + 13 + 10 + 6);
}

#[test]
fn given_instances_and_deadline_ops_when_serialized_then_stable_forms() {
    let instance = Instance::Turn(id(5));
    let json = serde_json::to_value(instance).expect("serializes");
    assert_eq!(
        json,
        serde_json::json!({"aggregate_type": "turn", "id": id(5)})
    );
    assert_eq!(Instance::from_parts("turn", id(5)), Some(instance));
    assert_eq!(Instance::from_parts("task", id(5)), None);
    let op = DeadlineOp::Arm(Deadline {
        instance,
        kind: DeadlineKind::TurnTimeout,
        due_at: crate::testing::now(),
        epoch: 3,
    });
    let json = serde_json::to_value(op).expect("serializes");
    assert_eq!(json["op"], "arm");
    assert_eq!(json["kind"], "turn_timeout");
    assert_eq!(
        serde_json::from_value::<DeadlineOp>(json).expect("reads"),
        op
    );
}

#[test]
fn given_the_fact_names_the_anomalies_cite_then_they_are_the_facts_event_types() {
    use super::journal::{Entry, Owned};
    use crate::saga::input::*;
    let mut w = World::started();
    w.human_says();
    w.checkpoint(C::BeginWork);
    let (task, _) = w.task(None);
    w.task_checkpoint(task, K::WorkStarted);
    let mut checked = 0;
    for (_, entry) in &w.journal {
        let Entry::At(_, owned) = entry else { continue };
        let (constant, event_type) = match owned.clone() {
            Owned::Started(f, _) => (
                CONVERSATION_STARTED,
                crate::conversation::ConversationEvent::ConversationStarted(f).event_type(),
            ),
            Owned::Message(f, _) => (
                MESSAGE_ADDED,
                crate::message::MessageEvent::MessageAdded(f).event_type(),
            ),
            Owned::Checkpoint(f) => (
                CHECKPOINT_CREATED,
                crate::checkpoint::CheckpointEvent::ConversationCheckpointCreated(f).event_type(),
            ),
            Owned::Task(f) => (
                TASK_CREATED,
                crate::task::TaskEvent::TaskCreated(f).event_type(),
            ),
            Owned::TaskCheckpoint(f, _) => (
                TASK_CHECKPOINT_CREATED,
                crate::task::TaskEvent::TaskCheckpointCreated(f).event_type(),
            ),
            Owned::Due(_) | Owned::Fenced(..) => continue,
        };
        assert_eq!(constant, event_type);
        checked += 1;
    }
    assert_eq!(checked, 5);
}

#[test]
fn given_a_conversation_when_its_sagas_are_snapshotted_then_they_read_back_equal() {
    let w = super::e2e::script();
    let json = serde_json::to_string(&w.sagas).expect("serializes");
    let back: Sagas = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, w.sagas);
}

#[test]
fn given_every_rune_of_a_conversation_when_written_as_text_then_it_is_its_payload_and_reads_back() {
    let w = super::e2e::script();
    let mut names = BTreeSet::new();
    for recorded in &w.log {
        let text = recorded.payload_text();
        let parsed: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            parsed,
            recorded.payload(),
            "{}: {text}",
            recorded.event_type()
        );
        let id = recorded.instance.id();
        let back = Recorded::from_stored(
            recorded.instance.aggregate_type(),
            id,
            recorded.event_type(),
            &text,
        )
        .expect("reads back");
        assert_eq!(&back, recorded);
        names.insert(recorded.event_type());
    }
    // The script records runes of every kind of machine, fields or none.
    assert!(names.len() >= 20, "{names:?}");
}

#[test]
fn given_a_recorded_rune_when_stored_and_read_back_then_its_payload_has_no_tag_and_it_round_trips()
{
    use crate::saga::rune::session::{Reason, SessionRune};
    use crate::saga::{Instance, Recorded, Rune};
    let id = uuid::Uuid::from_u128(7);
    let recorded = Recorded {
        instance: Instance::Session(id),
        rune: Rune::Session(SessionRune::Paused(Reason {
            reason: "maintenance".into(),
        })),
    };
    let payload = recorded.payload();
    assert_eq!(payload, serde_json::json!({"reason": "maintenance"}));
    let text = payload.to_string();
    let back = Recorded::from_stored("session", id, "session.paused", &text).expect("parses");
    assert_eq!(back, recorded);
    assert!(Recorded::from_stored("task", id, "session.paused", &text).is_err());
    // Not an object, or not closed: refused, never a panic.
    for bad in [
        "[]",
        "\"x\"",
        "",
        "{",
        "{\"reason\": 1}",
        "\u{a0}{\"reason\": \"x\"}",
    ] {
        assert!(
            Recorded::from_stored("session", id, "session.paused", bad).is_err(),
            "{bad}"
        );
    }
    // Whitespace around the object is the parser's; an empty object is spliced into valid
    // JSON (no comma before the brace), so what it lacks is what the error names.
    let spaced = Recorded::from_stored(
        "session",
        id,
        "session.paused",
        " {\n \"reason\": \"maintenance\" } ",
    );
    assert_eq!(spaced.expect("parses"), recorded);
    let empty =
        Recorded::from_stored("session", id, "session.paused", "{ }").expect_err("no reason");
    assert!(empty.contains("missing field `reason`"), "{empty}");
}
