//! Workers on the wire: a claim's body, its long-poll timeout and its answers; the fence
//! on reports and commands; which reports are retried; a handle that learns from a
//! heartbeat that its claim is gone; releases on drop and on shutdown.

use std::time::{Duration, Instant};

use pm_client::{
    codes, text, AddMessageInput, ClaimRequest, Error, TurnFence, TurnKind, TurnState, Worker,
};

use crate::client;
use crate::fake::{problem, Fake, Reply, Seen};

pub(crate) const TURN: &str = "0190a0b0-0000-7000-8000-0000000000a1";
const CONVERSATION: &str = "0190a0b0-0000-7000-8000-000000000001";
const ACTOR: &str = "0190a0b0-0000-7000-8000-000000000009";

/// A turn view, `streaming` under epoch 2 (claimed by `w-1`) or released.
pub(crate) fn turn_view(leased: bool) -> String {
    let lease = if leased {
        r#"{"worker":"w-1","turn_epoch":2,"lease_expires_at":"2026-11-22T05:35:57.123456Z"}"#
    } else {
        "null"
    };
    format!(
        r#"{{"id":"{TURN}","agent_id":"0190a0b0-0000-7000-8000-0000000000b1","conversation_id":"{CONVERSATION}","kind":"conversation","task_id":null,"input":{{"kind":"message","message_id":"0190a0b0-0000-7000-8000-000000000101"}},"state":"streaming","turn_epoch":2,"terminal_rune":null,"deliverable":null,"deliverable_reason":null,"lease":{lease},"claims":1,"input_tokens":0,"output_tokens":0,"created_at":"2026-11-22T05:35:27.123456Z","updated_at":"2026-11-22T05:35:27.123456Z"}}"#
    )
}

pub(crate) fn claimed() -> Reply {
    let body = format!(
        r#"{{"turn":{},"turn_epoch":2,"lease_expires_at":"2026-11-22T05:35:57.123456Z","worker":"w-1","context":{{"conversation":null,"message":null,"checkpoint":null,"task":null,"tool_calls":[]}}}}"#,
        turn_view(true)
    );
    Reply::Answer(200, vec![("x-event-position", "40.1".into())], body)
}

fn fence() -> TurnFence {
    TurnFence::new(TURN.parse().expect("uuid"), 2)
}

pub(crate) fn is(seen: &Seen, path: &str) -> bool {
    seen.target == format!("/v1/turns/{TURN}/{path}")
}

/// Waits up to 3 s for a request to `path`.
pub(crate) async fn wait_for(fake: &Fake, path: &str) -> Seen {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        if let Some(seen) = fake.seen().into_iter().find(|s| is(s, path)) {
            return seen;
        }
        assert!(Instant::now() < deadline, "no {path} request");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn say() -> AddMessageInput {
    AddMessageInput {
        actor_id: ACTOR.parse().expect("uuid"),
        content: text("on it").expect("text"),
        task_id: None,
        external_identity: None,
        time: None,
    }
}

#[tokio::test]
async fn a_long_poll_outlasts_the_client_timeout_and_nothing_is_none() {
    let fake = Fake::start(|_, _| {
        Reply::Late(
            Duration::from_millis(900),
            Box::new(Reply::Answer(204, vec![], String::new())),
        )
    })
    .await;
    // The client's timeout is 500 ms; the claim's attempt covers its 1 s wait.
    let none = client(&fake.base)
        .claim(
            ClaimRequest::new()
                .kind(TurnKind::Task)
                .wait(Duration::from_secs(1))
                .worker("w-1"),
        )
        .await
        .expect("an answer");
    assert!(none.is_none());
    let seen = fake.seen();
    assert_eq!(seen.len(), 1, "not retried");
    assert_eq!(seen[0].target, "/v1/turns/claim");
    assert_eq!(
        seen[0].body,
        r#"{"kind":"task","wait_ms":1000,"worker":"w-1"}"#
    );
    assert_eq!(seen[0].header("idempotency-key"), None);
}

#[tokio::test]
async fn a_claim_answers_the_turn_its_fence_and_position() {
    let fake = Fake::start(|_, _| claimed()).await;
    let claim = client(&fake.base)
        .claim(ClaimRequest::new())
        .await
        .expect("claimed")
        .expect("a turn");
    assert_eq!(claim.fence(), fence());
    assert_eq!(claim.turn.state, TurnState::Streaming);
    assert_eq!(claim.turn.lease.as_ref().map(|l| l.turn_epoch), Some(2));
    assert_eq!(claim.worker, "w-1");
    assert!(claim.context.tool_calls.is_empty());
    assert_eq!(claim.position.as_ref().map(|p| p.as_str()), Some("40.1"));
    assert_eq!(fake.seen()[0].body, "{}");
}

#[tokio::test]
async fn reports_carry_the_fence_and_usage_is_retried_only_unsent() {
    let fake = Fake::start(|n, seen| match (n, seen.target.rsplit('/').next()) {
        (0, _) => Reply::Answer(503, vec![], problem(503, "service_unavailable")),
        (_, Some("heartbeat")) => Reply::Answer(
            200,
            vec![],
            r#"{"turn_epoch":2,"lease_expires_at":"2026-11-22T05:36:27.123456Z"}"#.into(),
        ),
        (_, Some("usage")) => Reply::Answer(503, vec![], problem(503, "service_unavailable")),
        _ => Reply::Answer(200, vec![], turn_view(false)),
    })
    .await;
    let c = client(&fake.base);
    let beat = c
        .heartbeat(fence(), Some(Duration::from_secs(2)))
        .await
        .expect("renewed after a retry");
    assert_eq!(beat.turn_epoch, 2);
    let usage = c.report_usage(fence(), 10, 3).await.expect_err("503");
    assert_eq!(usage.status(), Some(503));
    let released = c.release(fence(), Some("bye")).await.expect("released");
    assert!(released.view.lease.is_none());
    let seen = fake.seen();
    let paths: Vec<_> = seen.iter().map(|s| s.target.rsplit('/').next()).collect();
    assert_eq!(
        paths,
        [
            Some("heartbeat"),
            Some("heartbeat"),
            Some("usage"),
            Some("release")
        ],
        "a usage report that reached the service is not repeated"
    );
    for s in &seen {
        assert_eq!(s.header("pm-turn-id"), Some(TURN));
        assert_eq!(s.header("pm-turn-epoch"), Some("2"));
    }
    assert_eq!(seen[0].body, r#"{"lease_ms":2000}"#);
    assert_eq!(seen[2].body, r#"{"input_tokens":10,"output_tokens":3}"#);
    assert_eq!(seen[3].body, r#"{"reason":"bye"}"#);
    // Nothing is sent for a text the service would refuse.
    let blank = c.report_error(fence(), " ", "x").await;
    assert!(matches!(blank, Err(Error::InvalidInput(_))));
    assert_eq!(fake.seen().len(), 4);
}

#[tokio::test]
async fn a_fenced_heartbeat_makes_the_handle_fail_fast() {
    let fake = Fake::start(|_, seen| {
        if seen.target == "/v1/turns/claim" {
            claimed()
        } else {
            Reply::Answer(409, vec![], problem(409, "turn_fenced"))
        }
    })
    .await;
    let worker = Worker::builder(client(&fake.base), "w-1")
        .lease(Duration::from_secs(1))
        .build()
        .expect("worker");
    let turn = worker.next().await.expect("claimed").expect("a turn");
    assert_eq!(turn.fence(), fence());
    // The heartbeat runs every third of the lease and is told the claim is gone.
    wait_for(&fake, "heartbeat").await;
    let deadline = Instant::now() + Duration::from_secs(3);
    while !turn.is_lost() {
        assert!(Instant::now() < deadline, "never lost");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = fake.seen().len();
    let refused = turn.add_message(say()).await.expect_err("fenced");
    assert_eq!(refused.code(), Some(codes::TURN_FENCED));
    let usage = turn.report_usage(1, 1).await.expect_err("fenced");
    assert_eq!(usage.code(), Some(codes::TURN_FENCED));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(fake.seen().len(), before, "no request, no more heartbeats");
    // A lost claim is not released (it is not this worker's any more).
    let release = turn.release(None).await.expect_err("fenced");
    assert_eq!(release.code(), Some(codes::TURN_FENCED));
    assert_eq!(fake.seen().len(), before);
}

#[tokio::test]
async fn commands_carry_the_fence_and_a_refusal_marks_the_handle() {
    let fake = Fake::start(|_, seen| match seen.target.as_str() {
        "/v1/turns/claim" => claimed(),
        _ => Reply::Answer(409, vec![], problem(409, "turn_fenced")),
    })
    .await;
    let worker = Worker::builder(client(&fake.base), "w-1")
        .build()
        .expect("worker");
    let turn = worker.next().await.expect("claimed").expect("a turn");
    let refused = turn.add_message(say()).await.expect_err("fenced");
    assert_eq!(refused.code(), Some(codes::TURN_FENCED));
    assert!(turn.is_lost());
    let seen = fake.seen();
    let command = seen.last().expect("the command");
    assert_eq!(
        command.target,
        format!("/v1/conversations/{CONVERSATION}/messages")
    );
    assert_eq!(command.header("pm-turn-id"), Some(TURN));
    assert_eq!(command.header("pm-turn-epoch"), Some("2"));
    assert!(command.header("idempotency-key").is_some());
    drop(turn);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        fake.seen().len(),
        seen.len(),
        "a lost claim is not released"
    );
}

#[tokio::test]
async fn drop_and_shutdown_release_held_turns() {
    let fake = Fake::start(|_, seen| match seen.target.as_str() {
        "/v1/turns/claim" => claimed(),
        _ => Reply::Answer(200, vec![], turn_view(false)),
    })
    .await;
    let worker = Worker::builder(client(&fake.base), "w-1")
        .build()
        .expect("worker");
    let dropped = worker.next().await.expect("claimed").expect("a turn");
    drop(dropped);
    let release = wait_for(&fake, "release").await;
    assert_eq!(release.body, r#"{"reason":"handle_dropped"}"#);
    assert_eq!(release.header("pm-turn-epoch"), Some("2"));

    let held = worker.next().await.expect("claimed").expect("a turn");
    let finished = worker.next().await.expect("claimed").expect("a turn");
    finished.finish();
    assert_eq!(
        worker.shutdown().await,
        1,
        "the held turn, not the finished one"
    );
    let releases: Vec<_> = fake
        .seen()
        .into_iter()
        .filter(|s| is(s, "release"))
        .collect();
    assert_eq!(releases.len(), 2);
    assert_eq!(releases[1].body, r#"{"reason":"worker_shutdown"}"#);
    let gone = tokio::time::timeout(Duration::from_secs(1), held.ended())
        .await
        .expect("ended resolves");
    assert_eq!(gone.code(), Some(codes::TURN_FENCED));
    let late = held.add_message(say()).await.expect_err("released");
    assert_eq!(late.code(), Some(codes::TURN_FENCED));
    assert!(worker.next().await.expect("no error").is_none());
    assert!(worker.is_shut_down());
    let n = fake.seen().len();
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fake.seen().len(), n, "released once");
}
