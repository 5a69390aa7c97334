//! Tool call rows on both stores, through the saga store's commit and [`SagaReads`]: a
//! call's row is upserted with its turn's write (created once, then changed), a turn reads
//! back with its calls in the order its worker reported them, `tool_calls()` filters and
//! pages them, and a conversation's `tool.*` runes load with its other runes.

mod support;

use chrono::{DateTime, Utc};
use pm_application::bus::EventMetadata;
use pm_application::queries::{SagaReadStore, ToolCallFilter, TurnFilter};
use pm_application::sagas::{NewRune, PlacedCall, SagaStore, SagaWrite};
use pm_application::scope::Scope;
use pm_application::views::{List, Page, PageCursor, PageRequest, ToolCallView};
use pm_domain::saga::rune::tool::ToolCalled;
use pm_domain::saga::{
    ids, Instance, Recorded, Rune, ToolCallState, ToolResultView, ToolRune, ToolStatus, TurnInput,
    TurnKind, TurnState, TurnView,
};
use pm_infrastructure::append::Appender;
use pm_infrastructure::db::Args;
use pm_infrastructure::sagas::{DbSagaStore, SagaReads};
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use serde_json::json;
use tokio::sync::watch;
use uuid::Uuid;

async fn stores(db: &TestDb) -> (DbSagaStore, SagaReads, Database) {
    let database = support::migrated(db, 4).await;
    let (doorbell, _) = watch::channel(0);
    let appender = Appender::new(database.clone(), support::keys(&database).await, doorbell);
    (
        DbSagaStore::new(database.clone(), appender),
        SagaReads::new(database.clone()),
        database,
    )
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().expect("a time")
}

/// A call as the domain's view shows it right after `tool.call`.
fn call(turn: &TurnView, call_id: &str, requires_approval: bool) -> pm_domain::saga::ToolCallView {
    pm_domain::saga::ToolCallView {
        call_id: call_id.into(),
        turn_id: turn.id,
        conversation_id: turn.conversation_id,
        tool_name: "shell".into(),
        arguments: json!({"cmd": format!("echo {call_id}"), "env": {"A": 1}}),
        state: if requires_approval {
            ToolCallState::AwaitingApproval
        } else {
            ToolCallState::Executing
        },
        requires_approval,
        policy_reason: requires_approval.then(|| "writes files".into()),
        approver: None,
        timeout_ms: Some(30_000),
        result: None,
        policy: Some(
            if requires_approval {
                "shell"
            } else {
                "default"
            }
            .into(),
        ),
        reported_by: Some("worker-1".into()),
        approvers: requires_approval.then(|| vec!["role:admin".into(), "ops-lead".into()]),
        on_behalf_of: requires_approval.then(|| Uuid::from_u128(7)),
        comment: requires_approval.then(|| "looked at the diff".into()),
        created_at: turn.created_at,
        updated_at: turn.created_at,
    }
}

/// `call` as written at `time` in `place` of its turn.
fn placed(call: &ToolCallView, place: i64, time: DateTime<Utc>) -> PlacedCall {
    PlacedCall {
        call: ToolCallView {
            created_at: time,
            updated_at: time,
            ..call.clone()
        },
        place,
    }
}

/// A turn suspended on `calls` (in that report order).
fn turn(conversation: Uuid, calls: &[(&str, bool)]) -> TurnView {
    let mut turn = TurnView {
        id: Uuid::new_v4(),
        agent_id: Uuid::new_v4(),
        conversation_id: conversation,
        kind: TurnKind::Conversation,
        task_id: None,
        input: TurnInput::Message {
            message_id: Uuid::new_v4(),
        },
        state: TurnState::ToolExecuting,
        turn_epoch: Some(1),
        terminal_rune: None,
        deliverable: None,
        deliverable_reason: None,
        lease: None,
        claims: 1,
        input_tokens: 0,
        output_tokens: 0,
        tool_calls: Vec::new(),
        created_at: at("2026-11-24T10:00:00Z"),
        updated_at: at("2026-11-24T10:00:00Z"),
    };
    turn.tool_calls = calls
        .iter()
        .map(|(id, approval)| call(&turn, id, *approval))
        .collect();
    turn
}

fn called(c: &pm_domain::saga::ToolCallView, time: DateTime<Utc>) -> NewRune {
    NewRune {
        conversation_id: c.conversation_id,
        recorded: Recorded {
            instance: Instance::ToolCall(ids::tool_call_id(c.turn_id, &c.call_id)),
            rune: Rune::Tool(ToolRune::Call(ToolCalled {
                call_id: c.call_id.clone(),
                tool_name: c.tool_name.clone(),
                arguments: c.arguments.clone(),
                turn_id: c.turn_id,
                requires_approval: c.requires_approval,
                timeout_ms: c.timeout_ms,
                policy: c.policy.clone(),
                action: None,
                reported_by: c.reported_by.clone(),
            })),
        },
        sequence: 1,
        metadata: EventMetadata {
            correlation_id: "test".into(),
            causation_id: None,
            role: "saga".into(),
            principal: "system".into(),
            recorded_at: time,
            turn: None,
            trace: None,
        },
    }
}

fn ids_of(calls: &[ToolCallView]) -> Vec<&str> {
    calls.iter().map(|c| c.call_id.as_str()).collect()
}

async fn listed(reads: &SagaReads, filter: ToolCallFilter) -> Vec<String> {
    let page = PageRequest {
        limit: 50,
        cursor: None,
    };
    let found = reads
        .tool_calls(&Scope::All, &filter, &page)
        .await
        .expect("tool calls");
    assert!(found.next_cursor.is_none());
    found.items.into_iter().map(|c| c.call_id).collect()
}

async fn a_turn_reads_back_with_its_calls_in_report_order(db: TestDb) {
    let (store, reads, database) = stores(&db).await;
    let (c, other) = (Uuid::new_v4(), Uuid::new_v4());
    let (t0, t1) = (
        at("2026-11-24T10:00:00Z"),
        at("2026-11-24T10:00:05.123456Z"),
    );
    // Ids that sort against the report order: the write and the ids do not give it.
    let first = turn(c, &[("zeta", false), ("alpha", true)]);
    let elsewhere = turn(other, &[("solo", false)]);
    let created = SagaWrite {
        conversations: vec![(c, 0), (other, 0)],
        runes: vec![called(&first.tool_calls[0], t0)],
        turns: vec![first.clone(), elsewhere.clone()],
        tool_calls: vec![
            placed(&first.tool_calls[1], 1, t0),
            placed(&first.tool_calls[0], 0, t0),
            placed(&elsewhere.tool_calls[0], 0, t0),
        ],
        ..SagaWrite::default()
    };
    store.commit(created, None).await.expect("created");

    // Later: `zeta` succeeds, `alpha` is approved (each twice in the write: the last
    // wins; a place written again is not moved), and a third call comes in the next place.
    let mut zeta = first.tool_calls[0].clone();
    zeta.state = ToolCallState::Success;
    zeta.result = Some(ToolResultView {
        status: ToolStatus::Success,
        output: Some(json!({"stdout": "zeta\n", "code": 0})),
        error: None,
        reason: None,
    });
    let mut alpha = first.tool_calls[1].clone();
    alpha.state = ToolCallState::Executing;
    alpha.approver = Some("ana".into());
    let late = call(&first, "late", false);
    let changed = SagaWrite {
        conversations: vec![(c, 1)],
        tool_calls: vec![
            placed(&first.tool_calls[0], 0, t0),
            PlacedCall {
                place: 7,
                ..placed(&zeta, 0, t1)
            },
            placed(&first.tool_calls[1], 1, t0),
            placed(&alpha, 1, t1),
            placed(&late, 2, t1),
        ],
        ..SagaWrite::default()
    };
    store.commit(changed, None).await.expect("changed");

    // The analysts' view shows each call's place in its turn.
    let places: Vec<(String, i64)> = database
        .fetch_all(
            "SELECT call_id, ordinal FROM tool_calls WHERE turn_id = $1 ORDER BY ordinal",
            Args::new().uuid(first.id),
        )
        .await
        .expect("the view")
        .iter()
        .map(|r| {
            (
                r.string("call_id").expect("call_id"),
                r.int("ordinal").expect("ordinal"),
            )
        })
        .collect();
    assert_eq!(
        places,
        [("zeta".into(), 0), ("alpha".into(), 1), ("late".into(), 2)]
    );

    let read = reads.turn(first.id).await.expect("turn").expect("found");
    assert_eq!(ids_of(&read.tool_calls), ["zeta", "alpha", "late"]);
    let got = &read.tool_calls[0];
    assert_eq!(
        (got.state, &got.result, got.created_at, got.updated_at),
        (
            ToolCallState::Success,
            &Some(pm_application::views::ToolResultView {
                status: ToolStatus::Success,
                output: Some(json!({"stdout": "zeta\n", "code": 0})),
                error: None,
                reason: None,
            }),
            t0,
            t1
        )
    );
    assert_eq!(
        (got.turn_id, got.conversation_id, got.tool_name.as_str()),
        (first.id, c, "shell")
    );
    assert_eq!(got.arguments, json!({"cmd": "echo zeta", "env": {"A": 1}}));
    assert_eq!(
        (got.requires_approval, got.timeout_ms),
        (false, Some(30_000))
    );
    let got = &read.tool_calls[1];
    assert_eq!(
        (
            got.state,
            got.approver.as_deref(),
            got.policy_reason.as_deref()
        ),
        (ToolCallState::Executing, Some("ana"), Some("writes files"))
    );
    assert!(got.requires_approval && got.result.is_none());
    assert_eq!((got.created_at, got.updated_at), (t0, t1));

    // A page of turns fills each turn's calls.
    let page = reads
        .turns(
            &Scope::All,
            &TurnFilter::default(),
            &PageRequest {
                limit: 10,
                cursor: None,
            },
        )
        .await
        .expect("turns");
    let by_id = |id: Uuid| {
        page.items
            .iter()
            .find(|t| t.id == id)
            .map(|t| ids_of(&t.tool_calls))
            .expect("the turn is listed")
    };
    assert_eq!(by_id(first.id), ["zeta", "alpha", "late"]);
    assert_eq!(by_id(elsewhere.id), ["solo"]);

    // The list, by each filter.
    let mut all = listed(&reads, ToolCallFilter::default()).await;
    all.sort();
    assert_eq!(all, ["alpha", "late", "solo", "zeta"]);
    let state = |s| ToolCallFilter {
        state: Some(s),
        ..ToolCallFilter::default()
    };
    assert_eq!(
        listed(&reads, state(ToolCallState::Success)).await,
        ["zeta"]
    );
    let mut executing = listed(&reads, state(ToolCallState::Executing)).await;
    executing.sort();
    assert_eq!(executing, ["alpha", "late", "solo"]);
    assert!(listed(&reads, state(ToolCallState::AwaitingApproval))
        .await
        .is_empty());
    let of_conversation = ToolCallFilter {
        conversation_id: Some(other),
        ..ToolCallFilter::default()
    };
    assert_eq!(listed(&reads, of_conversation).await, ["solo"]);
    let of_turn = ToolCallFilter {
        turn_id: Some(first.id),
        ..ToolCallFilter::default()
    };
    assert_eq!(listed(&reads, of_turn.clone()).await.len(), 3);
    let both = ToolCallFilter {
        state: Some(ToolCallState::Executing),
        conversation_id: Some(c),
        turn_id: Some(first.id),
    };
    let mut both = listed(&reads, both).await;
    both.sort();
    assert_eq!(both, ["alpha", "late"]);

    // Keyset pages of one: every call once, oldest first, then the end.
    let mut seen = Vec::new();
    let mut cursor: Option<PageCursor> = None;
    loop {
        let page: Page<ToolCallView> = reads
            .tool_calls(&Scope::All, &of_turn, &PageRequest { limit: 1, cursor })
            .await
            .expect("a page");
        seen.extend(page.items.iter().map(|c| (c.created_at, c.call_id.clone())));
        let Some(next) = page.next_cursor else { break };
        cursor = Some(PageCursor::decode_for(&next, List::ToolCalls).expect("a cursor"));
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");
    assert_eq!(seen.last().map(|s| s.1.as_str()), Some("late"));

    // The conversation's `tool.*` runes load with its other runes.
    let loaded = store.load(c, None).await.expect("load");
    assert_eq!(loaded.version, 2);
    assert_eq!(
        loaded
            .runes
            .iter()
            .map(|r| r.recorded.instance)
            .collect::<Vec<_>>(),
        [Instance::ToolCall(ids::tool_call_id(first.id, "zeta"))]
    );
}

on_both_backends!(a_turn_reads_back_with_its_calls_in_report_order);
