//! The aggregates at their own boundary (cqrs-es `Record` command): only edges are
//! written, all or nothing; including the machine-only edges no fact reaches.

use cqrs_es::test::TestFramework;
use uuid::Uuid;

use crate::saga::rune::agent::{AgentFailed, AgentReady, AgentSpawning, TurnDispatched};
use crate::saga::rune::plan::{GoalMet, GoalReceived, PlanCreated, PlanStateChanged, PlanSummary};
use crate::saga::rune::session::{Empty, Reason, SessionCreated, SessionRune, SessionSettings};
use crate::saga::rune::turn::*;
use crate::saga::*;
use crate::testing::{id, FakeLookup};
use crate::{DomainError, PmAggregate};

fn services() -> crate::Services {
    FakeLookup::default().services()
}

fn is_rune_error<T: std::fmt::Debug>(result: Result<T, DomainError>) -> bool {
    matches!(result, Err(DomainError::Validation { field: "rune", .. }))
}

const T: u128 = 0x7;

fn queued() -> TurnRune {
    TurnRune::Queued(TurnQueued {
        turn_id: id(T),
        agent_id: id(2),
        conversation_id: id(1),
        kind: TurnKind::Task,
        task_id: Some(id(3)),
        input: TurnInput::Task { task_id: id(3) },
    })
}

fn leased() -> Vec<TurnRune> {
    let started = TurnStarted {
        turn_id: id(T),
        agent_id: id(2),
        input: TurnInput::Task { task_id: id(3) },
    };
    vec![
        queued(),
        TurnRune::Dispatched(TurnLeased {
            turn_id: id(T),
            turn_epoch: 1,
        }),
        TurnRune::Started(started),
    ]
}

fn error(deliverable: Option<Uuid>, reason: Option<&str>) -> TurnRune {
    TurnRune::Error(TurnError {
        turn_id: id(T),
        error_type: "timeout".into(),
        message: "m".into(),
        deliverable,
        deliverable_reason: reason.map(Into::into),
    })
}

#[tokio::test]
async fn given_a_streaming_turn_when_tool_runes_then_the_machine_only_edges_are_recorded() {
    let tools = vec![
        TurnRune::ToolCallsReceived(ToolCallsReceived {
            turn_id: id(T),
            call_ids: vec!["c1".into()],
        }),
        TurnRune::ToolsFinished(ToolsFinished {
            turn_id: id(T),
            results: vec![crate::saga::rune::turn::ToolSummary {
                call_id: "c1".into(),
                status: ToolStatus::Success,
            }],
        }),
        TurnRune::ToolCallsReceived(ToolCallsReceived {
            turn_id: id(T),
            call_ids: vec!["c2".into()],
        }),
        error(None, Some("watchdog")),
    ];
    TestFramework::<Turn>::with(services())
        .given(leased())
        .when_async(Record(tools.clone()))
        .await
        .then_expect_events(tools);
}

#[tokio::test]
async fn given_a_terminal_turn_when_a_second_terminal_rune_then_rejected() {
    let mut given = leased();
    given.push(error(None, Some("watchdog")));
    let result = TestFramework::<Turn>::with(services())
        .given(given)
        .when_async(Record(vec![error(None, Some("watchdog"))]))
        .await
        .inspect_result();
    assert!(is_rune_error(result));
}

#[tokio::test]
async fn given_a_turn_when_delivery_contract_broken_then_rejected() {
    for bad in [error(None, None), error(Some(id(99)), None)] {
        let result = TestFramework::<Turn>::with(services())
            .given(leased())
            .when_async(Record(vec![bad]))
            .await
            .inspect_result();
        assert!(is_rune_error(result));
    }
    let result = TestFramework::<Turn>::with(services())
        .given(vec![queued()])
        .when_async(Record(vec![error(None, Some("watchdog"))]))
        .await
        .inspect_result();
    assert!(is_rune_error(result), "queued → error is no edge");
}

#[tokio::test]
async fn given_a_spawning_agent_when_failed_then_recorded_and_nothing_follows() {
    let spawning = AgentRune::Spawning(AgentSpawning {
        agent_id: id(2),
        role: AgentRole::Worker,
        model: None,
        parent_id: None,
        conversation_id: id(1),
        actor_id: Some(id(5)),
    });
    let failed = AgentRune::Failed(AgentFailed {
        agent_id: id(2),
        error: "init".into(),
    });
    TestFramework::<Agent>::with(services())
        .given(vec![spawning.clone()])
        .when_async(Record(vec![failed.clone()]))
        .await
        .then_expect_events(vec![failed.clone()]);
    let result = TestFramework::<Agent>::with(services())
        .given(vec![spawning, failed])
        .when_async(Record(vec![AgentRune::Ready(AgentReady {
            agent_id: id(2),
        })]))
        .await
        .inspect_result();
    assert!(is_rune_error(result));
}

#[tokio::test]
async fn given_an_idle_agent_when_dispatch_skips_the_head_or_the_epoch_then_rejected() {
    let spawning = AgentRune::Spawning(AgentSpawning {
        agent_id: id(2),
        role: AgentRole::Root,
        model: None,
        parent_id: None,
        conversation_id: id(1),
        actor_id: None,
    });
    let ready = AgentRune::Ready(AgentReady { agent_id: id(2) });
    let enqueue = |t: u128| AgentRune::TurnEnqueued(rune::agent::TurnEnqueued { turn_id: id(t) });
    let given = vec![spawning, ready, enqueue(10), enqueue(11)];
    for (turn, epoch) in [(11, 1), (10, 2)] {
        let dispatch = AgentRune::TurnDispatched(TurnDispatched {
            turn_id: id(turn),
            turn_epoch: epoch,
        });
        let result = TestFramework::<Agent>::with(services())
            .given(given.clone())
            .when_async(Record(vec![dispatch]))
            .await
            .inspect_result();
        assert!(is_rune_error(result));
    }
}

#[tokio::test]
async fn given_a_session_when_a_record_holds_a_non_edge_then_nothing_is_written() {
    let created = SessionRune::Created(SessionCreated {
        conversation_id: id(1),
        config: SessionSettings {
            session_timeout_secs: 300,
            turn_timeout_secs: 600,
            error_threshold: 3,
            token_budget: None,
        },
    });
    let paused = SessionRune::Paused(Reason { reason: "x".into() });
    let result = TestFramework::<Session>::with(services())
        .given(vec![created.clone()])
        .when_async(Record(vec![SessionRune::Archived(Empty {}), paused]))
        .await
        .inspect_result();
    assert!(is_rune_error(result));
    let mut session = Session::default();
    assert_eq!(PmAggregate::conversation_id(&session), None);
    session.fold(created);
    assert_eq!(PmAggregate::conversation_id(&session), Some(id(1)));
}

#[tokio::test]
async fn given_a_plan_when_a_wrong_trigger_or_a_skipped_edge_then_rejected() {
    let received = PlanRune::GoalReceived(GoalReceived {
        conversation_id: id(1),
        goal_description: "g".into(),
    });
    let created = PlanRune::Created(PlanCreated {
        plan_id: ids::plan_id(id(1)),
        tasks: vec![],
    });
    let foreign = PlanRune::Created(PlanCreated {
        plan_id: ids::plan_id(id(9)),
        tasks: vec![],
    });
    let moved = |trigger: &str| {
        PlanRune::StateChanged(PlanStateChanged {
            from: PlanState::Planning,
            to: PlanState::Executing,
            trigger: trigger.into(),
        })
    };
    let goal_met = PlanRune::GoalMet(GoalMet {
        plan_id: ids::plan_id(id(1)),
        summary: PlanSummary {
            cause: "work_completed".into(),
            tasks: 0,
            approved: 0,
        },
    });
    let cases = [
        (vec![received.clone()], foreign),
        (
            vec![received.clone(), created.clone()],
            moved("critique_passed"),
        ),
        (
            vec![received.clone(), created.clone(), moved("auto_start")],
            goal_met,
        ),
    ];
    for (given, when) in cases {
        let result = TestFramework::<Plan>::with(services())
            .given(given)
            .when_async(Record(vec![when]))
            .await
            .inspect_result();
        assert!(is_rune_error(result));
    }
    TestFramework::<Plan>::with(services())
        .given(vec![received, created])
        .when_async(Record(vec![moved("plan_approved")]))
        .await
        .then_expect_events(vec![moved("plan_approved")]);
}
