//! Claims that are gone (WORKERS.md "Fencing", "Lease expiry and interrupts"): a handle
//! whose lease ended — noticed by a command or by its heartbeat — fails fast with
//! `turn_fenced` and nothing it sent is written; an operator's interrupt fences the
//! worker off; an error report ends the turn; fences the service refuses outright.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pm_client::{codes, ClaimRequest, MessageQuery, TurnFence, TurnState, Uuid};
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN, LLM};

use crate::support::{client, start};
use crate::workers::{actors, dispatched, reply, worker};

async fn a_lost_lease_fences_the_handle(db: TestDb) {
    let clock = Arc::new(pm_application::clock::ManualClock::new());
    let hooks = project_manager::app::Hooks {
        clock: Some(clock.clone() as Arc<dyn pm_application::clock::Clock>),
        ..Default::default()
    };
    let config = crate::support::config(&db, "127.0.0.1:0");
    let svc = TestService::start_with_hooks(config, hooks).await;
    let (admin, llm) = (client(&svc, ADMIN), client(&svc, LLM));
    let (human, ai) = actors(&admin).await;
    let (cid, _, turn_id) = dispatched(&admin, human, ai).await;

    // A command after the lease ended (before any heartbeat noticed) is refused and
    // marks the handle: its next command fails without asking.
    let slow = worker(&llm, "w-slow", 60_000).build().expect("worker");
    let first = slow.next().await.expect("claim").expect("a turn");
    clock.advance(chrono::Duration::seconds(61));
    let refused = first.add_message(reply(ai)).await.expect_err("expired");
    assert_eq!(refused.code(), Some(codes::TURN_FENCED), "{refused}");
    assert!(first.is_lost());
    let again = first.add_message(reply(ai)).await.expect_err("lost");
    assert_eq!(again.code(), Some(codes::TURN_FENCED));

    // The turn is claimable again, under a higher epoch; this time the heartbeat is the
    // first to hear that the lease ended.
    let quick = worker(&llm, "w-quick", 1500).build().expect("worker");
    let second = quick.next().await.expect("claim").expect("a turn");
    assert_eq!(
        (second.turn().id, second.epoch()),
        (turn_id, first.epoch() + 1)
    );
    clock.advance(chrono::Duration::seconds(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !second.is_lost() {
        assert!(Instant::now() < deadline, "the heartbeat never heard");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = second.add_message(reply(ai)).await.expect_err("lost");
    assert_eq!(refused.code(), Some(codes::TURN_FENCED));
    let refused = second.report_usage(1, 1).await.expect_err("lost");
    assert_eq!(refused.code(), Some(codes::TURN_FENCED));
    // Nothing the lost claims sent was written.
    let (_, head) = crate::support::settle(&svc).await;
    let replies = admin
        .at(head)
        .messages(&MessageQuery::of(cid).actor_id(ai))
        .await
        .expect("messages");
    assert!(replies.items.is_empty(), "{:?}", replies.items);
    drop((first, second));
    svc.stop().await;
}

async fn interrupts_error_reports_and_fence_refusals(db: TestDb) {
    let svc = start(&db).await;
    let (admin, llm) = (client(&svc, ADMIN), client(&svc, LLM));
    let (human, ai) = actors(&admin).await;
    let (cid, _, turn_id) = dispatched(&admin, human, ai).await;
    let w = worker(&llm, "w-1", 30_000).build().expect("worker");
    let turn = w.next().await.expect("claim").expect("a turn");
    // Fences the service refuses before looking at the claim.
    let unknown = TurnFence::new(Uuid::now_v7(), 1);
    let r = llm.add_message(cid, reply(ai)).fenced(unknown).await;
    assert_eq!(r.expect_err("unknown").code(), Some(codes::TURN_NOT_FOUND));
    let zero = TurnFence::new(turn_id, 0);
    let r = llm.add_message(cid, reply(ai)).fenced(zero).await;
    assert_eq!(r.expect_err("zero").code(), Some(codes::INVALID_TURN_FENCE));
    // Only an admin interrupts; the worker's claim is then fenced off.
    let r = llm.interrupt_turn(turn_id, None).await;
    assert!(r.expect_err("llm").is_auth());
    let stopped = admin
        .interrupt_turn(turn_id, Some("stop"))
        .await
        .expect("interrupted");
    assert_eq!(stopped.view.state, TurnState::Interrupted);
    let late = turn.add_message(reply(ai)).await.expect_err("interrupted");
    assert_eq!(late.code(), Some(codes::TURN_FENCED));
    assert!(turn.is_lost());
    let again = admin
        .interrupt_turn(turn_id, None)
        .await
        .expect_err("ended");
    assert_eq!(again.code(), Some(codes::TURN_TRANSITION_NOT_ALLOWED));
    drop(turn);

    // An error report ends the turn in error.
    let (cid, _, turn_id) = dispatched(&admin, human, ai).await;
    let none = llm
        .claim(ClaimRequest::new().conversation_id(Uuid::now_v7()))
        .await
        .expect("claim");
    assert!(none.is_none());
    let w = worker(&llm, "w-2", 30_000)
        .conversation_id(cid)
        .build()
        .expect("worker");
    let turn = w.next().await.expect("claim").expect("a turn");
    assert_eq!(turn.turn().id, turn_id);
    let failed = turn
        .report_error("model_error", "the model failed")
        .await
        .expect("reported");
    assert_eq!(failed.view.state, TurnState::Error);
    assert_eq!(
        failed.view.deliverable_reason.as_deref(),
        Some("stream_error")
    );
    svc.stop().await;
}

on_both_backends!(
    a_lost_lease_fences_the_handle,
    interrupts_error_reports_and_fence_refusals,
);
