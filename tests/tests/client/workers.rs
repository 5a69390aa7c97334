//! Workers through the client (WORKERS.md): a [`Worker`] claims a dispatched turn and its
//! handle's fenced commands complete it; the background heartbeat keeps a short lease;
//! three workers drain nine turns, each claimed once; shutdown and drop release turns to
//! the next worker. Lost claims and refusals: `fencing.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pm_client::{
    codes, text, ActorKind, AddMessageInput, CheckpointType, ClaimRequest, Client, HeadStatus,
    TurnHandle, TurnInput, TurnState, Uuid, Worker,
};
use pm_tests::{on_both_backends, TestDb, ADMIN, LLM};

use crate::support::{
    actor_input, checkpoint_input, client, conversation_input, log_until, message_input, start,
};

/// A conversation of a human and `ai` with one human message, whose turn is dispatched
/// to the root agent (acting for `ai`). Answers (conversation, message, turn).
pub(crate) async fn dispatched(admin: &Client, human: Uuid, ai: Uuid) -> (Uuid, Uuid, Uuid) {
    let conversation = admin
        .start_conversation(conversation_input(vec![human, ai], "acme", None))
        .await
        .expect("conversation");
    let cid = conversation.entity.id;
    let message = admin
        .add_message(cid, message_input(human, "please", None))
        .await
        .expect("message");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let turns = admin
            .after(&message)
            .turns(&pm_client::TurnQuery::new().conversation_id(cid))
            .await
            .expect("turns");
        if let Some(t) = turns
            .items
            .iter()
            .find(|t| t.state == TurnState::Dispatched)
        {
            return (cid, message.entity.id, t.id);
        }
        assert!(Instant::now() < deadline, "no dispatched turn");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A human and an AI actor.
pub(crate) async fn actors(admin: &Client) -> (Uuid, Uuid) {
    let human = admin.register_actor(actor_input(ActorKind::Human, "Hu", None));
    let ai = admin.register_actor(actor_input(ActorKind::Ai, "Al", None));
    let (human, ai) = (human.await.expect("human"), ai.await.expect("ai"));
    (human.entity.id, ai.entity.id)
}

pub(crate) fn worker(c: &Client, name: &str, lease_ms: u64) -> pm_client::WorkerBuilder {
    Worker::builder(c.clone(), name)
        .lease(Duration::from_millis(lease_ms))
        .wait(Duration::from_secs(5))
}

pub(crate) fn reply(ai: Uuid) -> AddMessageInput {
    AddMessageInput {
        actor_id: ai,
        content: text("on it").expect("text"),
        task_id: None,
        external_identity: None,
        time: None,
    }
}

/// Answers a conversation turn: a fenced reply, then the fenced checkpoint that
/// completes it.
pub(crate) async fn answer(turn: TurnHandle, ai: Uuid) -> pm_client::Position {
    turn.add_message(reply(ai)).await.expect("reply");
    let done = turn
        .create_conversation_checkpoint(checkpoint_input(CheckpointType::BeginWork))
        .await
        .expect("checkpoint");
    turn.finish();
    done.position.expect("a position")
}

async fn a_worker_completes_a_turn_with_fenced_commands(db: TestDb) {
    let svc = start(&db).await;
    let (admin, llm) = (client(&svc, ADMIN), client(&svc, LLM));
    let (human, ai) = actors(&admin).await;
    let (cid, message, turn_id) = dispatched(&admin, human, ai).await;
    let w = worker(&llm, "w-complete", 30_000)
        .conversation_id(cid)
        .build()
        .expect("worker");
    let turn = w.next().await.expect("claim").expect("a turn");
    assert_eq!(turn.turn().id, turn_id);
    assert_eq!(turn.turn().state, TurnState::Streaming);
    assert_eq!(
        turn.turn().input,
        TurnInput::Message {
            message_id: message
        }
    );
    assert_eq!(turn.epoch(), 2, "one more than the dispatch's");
    let lease = turn.turn().lease.clone().expect("leased");
    assert_eq!((lease.worker.as_str(), lease.turn_epoch), ("w-complete", 2));
    let context = turn.context();
    assert_eq!(context.message.as_ref().map(|m| m.id), Some(message));
    assert_eq!(
        context.conversation.as_ref().map(|c| c.conversation.id),
        Some(cid)
    );
    let at_claim = admin.at(turn.claim().position.clone().expect("position"));
    let agent = at_claim.agent(turn.turn().agent_id).await.expect("agent");
    assert_eq!(agent.head_status, HeadStatus::Running);

    let handed = turn.claim().trace_context.clone().expect("the turn's span");
    let said = turn.add_message(reply(ai)).await.expect("reply");
    let used = turn.report_usage(10, 3).await.expect("usage");
    assert_eq!((used.view.input_tokens, used.view.output_tokens), (10, 3));
    let fence = turn.fence();
    let done = turn
        .create_conversation_checkpoint(checkpoint_input(CheckpointType::BeginWork))
        .await
        .expect("checkpoint");
    turn.finish();
    let position = done.position.clone().expect("position");
    let row = admin
        .at(position.clone())
        .turn(turn_id)
        .await
        .expect("turn");
    assert_eq!(row.state, TurnState::Completed);
    assert!(row.lease.is_none());
    assert_eq!(
        (row.claims, row.input_tokens, row.output_tokens),
        (1, 10, 3)
    );

    // The fenced facts say which turn and claim they belong to.
    let log = log_until(&svc, &position).await;
    let fact = log
        .iter()
        .find(|e| matches!(e.fact(), Some(pm_client::Fact::MessageAdded(m)) if m.id == said.entity.id))
        .expect("the reply is on the log");
    let attributes = fact.attributes.as_ref().expect("attributes");
    assert_eq!(
        (attributes.turn_id, attributes.turn_epoch),
        (Some(turn_id), Some(2))
    );
    // ... and are in the trace of the message that caused the turn, under the turn's span
    // the claim handed out.
    let cause = log
        .iter()
        .find(|e| matches!(e.fact(), Some(pm_client::Fact::MessageAdded(m)) if m.id == message))
        .and_then(|e| e.attributes.as_ref()?.traceparent.clone())
        .expect("the message's trace");
    let trace_of = |tp: &str| tp.split('-').nth(1).unwrap_or_default().to_string();
    assert_eq!(trace_of(&handed.traceparent), trace_of(&cause));
    let replied = attributes.traceparent.clone().expect("the reply's trace");
    assert_eq!(trace_of(&replied), trace_of(&cause));
    assert_ne!(
        replied, handed.traceparent,
        "the reply's request is a span of its own"
    );
    // Ended: the old fence is refused, and so is an interrupt.
    let late = llm.add_message(cid, reply(ai)).fenced(fence).await;
    assert_eq!(late.expect_err("fenced").code(), Some(codes::TURN_FENCED));
    let interrupt = admin.interrupt_turn(turn_id, None).await;
    assert_eq!(
        interrupt.expect_err("ended").code(),
        Some(codes::TURN_TRANSITION_NOT_ALLOWED)
    );
    svc.stop().await;
}

async fn the_heartbeat_keeps_a_short_lease(db: TestDb) {
    let svc = start(&db).await;
    let (admin, llm) = (client(&svc, ADMIN), client(&svc, LLM));
    let (human, ai) = actors(&admin).await;
    let (cid, _, turn_id) = dispatched(&admin, human, ai).await;
    let w = worker(&llm, "w-holder", 1500).build().expect("worker");
    let turn = w.next().await.expect("claim").expect("a turn");
    let first_expiry = turn.claim().lease_expires_at;
    // Held for more than twice the lease: nobody else gets it meanwhile.
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let other = llm
            .claim(ClaimRequest::new().conversation_id(cid).worker("w-other"))
            .await
            .expect("claim");
        assert!(other.is_none(), "{other:?}");
    }
    assert!(!turn.is_lost());
    assert!(turn.lease_expires_at() > first_expiry, "renewed");
    let row = admin.read().turn(turn_id).await.expect("turn");
    let lease = row.lease.expect("still leased");
    assert_eq!(
        (lease.worker.as_str(), lease.turn_epoch),
        ("w-holder", turn.epoch())
    );
    assert_eq!(row.claims, 1);
    let epoch = turn.epoch();
    let done = answer(turn, ai).await;
    let row = admin.at(done).turn(turn_id).await.expect("turn");
    assert_eq!(
        (row.state, row.turn_epoch),
        (TurnState::Completed, Some(epoch))
    );
    svc.stop().await;
}

async fn three_workers_drain_nine_turns(db: TestDb) {
    let svc = start(&db).await;
    let (admin, llm) = (client(&svc, ADMIN), client(&svc, LLM));
    let (human, ai) = actors(&admin).await;
    let mut turns = Vec::new();
    for _ in 0..9 {
        turns.push(dispatched(&admin, human, ai).await.2);
    }
    let worked: Arc<Mutex<Vec<(Uuid, i64, String)>>> = Arc::default();
    let fleet: Vec<Worker> = (0..3)
        .map(|i| {
            worker(&llm, &format!("w-{i}"), 30_000)
                .actor_id(ai)
                .build()
                .expect("worker")
        })
        .collect();
    let mut loops = Vec::new();
    for w in &fleet {
        let (w, worked) = (w.clone(), worked.clone());
        loops.push(tokio::spawn(async move {
            while let Some(turn) = w.next().await.expect("claim") {
                let entry = (turn.turn().id, turn.epoch(), w.name().to_string());
                answer(turn, ai).await;
                worked.lock().expect("lock").push(entry);
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while worked.lock().expect("lock").len() < 9 {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            worked.lock().expect("lock")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for w in &fleet {
        assert_eq!(w.shutdown().await, 0, "nothing held");
    }
    for l in loops {
        l.await.expect("worker loop");
    }
    let worked = worked.lock().expect("lock").clone();
    let mut by_turn: BTreeMap<Uuid, Vec<i64>> = BTreeMap::new();
    for (turn, epoch, _) in &worked {
        by_turn.entry(*turn).or_default().push(*epoch);
    }
    turns.sort();
    assert_eq!(by_turn.keys().copied().collect::<Vec<_>>(), turns);
    assert!(
        by_turn.values().all(|e| e == &[2]),
        "each claimed once: {worked:?}"
    );
    let (_, head) = crate::support::settle(&svc).await;
    let read = admin.at(head);
    for turn in &turns {
        let row = read.turn(*turn).await.expect("turn");
        assert_eq!(
            (row.state, row.claims),
            (TurnState::Completed, 1),
            "{row:?}"
        );
    }
    svc.stop().await;
}

async fn released_turns_go_to_the_next_worker(db: TestDb) {
    let svc = start(&db).await;
    let (admin, llm) = (client(&svc, ADMIN), client(&svc, LLM));
    let (human, ai) = actors(&admin).await;
    let (_, _, turn_id) = dispatched(&admin, human, ai).await;
    // Shut down with a turn in hand: released, and the next worker gets it long before
    // the 30 s lease would have ended.
    let a = worker(&llm, "w-a", 30_000).build().expect("worker");
    let held = a.next().await.expect("claim").expect("a turn");
    assert_eq!(a.shutdown().await, 1);
    assert!(a.next().await.expect("no error").is_none());
    let started = Instant::now();
    let b = worker(&llm, "w-b", 30_000).build().expect("worker");
    let dropped = b.next().await.expect("claim").expect("a turn");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        (dropped.turn().id, dropped.epoch()),
        (turn_id, held.epoch() + 1)
    );
    let late = held.add_message(reply(ai)).await.expect_err("released");
    assert_eq!(late.code(), Some(codes::TURN_FENCED));
    // A handle dropped unfinished releases its turn too.
    let epoch = dropped.epoch();
    drop(dropped);
    let c = worker(&llm, "w-c", 30_000).build().expect("worker");
    let last = c.next().await.expect("claim").expect("a turn");
    assert_eq!((last.turn().id, last.epoch()), (turn_id, epoch + 1));
    let done = answer(last, ai).await;
    let row = admin.at(done).turn(turn_id).await.expect("turn");
    assert_eq!((row.state, row.claims), (TurnState::Completed, 3));
    svc.stop().await;
}

/// A worker sleeping on its agent's NATS doorbell (no long-poll: its fallback is far
/// longer than the test) claims a turn dispatched while it sleeps within a second.
async fn a_worker_on_doorbells_claims_when_its_agent_rings(db: TestDb) {
    let Some(nats) = pm_tests::nats::client(pm_tests::nats::NATS).await else {
        return;
    };
    let mut config = project_manager::config::Config::defaults();
    config.bind = "127.0.0.1:0".parse().expect("addr");
    config.database_url = Some(db.url.clone());
    config.auth_tokens = pm_tests::all_tokens();
    config.nats_url = Some(pm_tests::nats::NATS.into());
    // Its relay to a stream of this test alone, not the default one.
    let (stream, prefix) = pm_tests::nats::names();
    config.nats_stream = stream.clone();
    config.nats_subject_prefix = prefix;
    let svc = pm_tests::TestService::start_with(config).await;
    let (admin, llm) = (client(&svc, ADMIN), client(&svc, LLM));
    let (human, ai) = actors(&admin).await;
    let conversation = admin
        .start_conversation(conversation_input(vec![human, ai], "acme", None))
        .await
        .expect("conversation");
    let cid = conversation.entity.id;
    let agent = pm_domain::saga::ids::agent_id(cid, Some(ai));
    let w = Worker::builder(llm.clone(), "w-bell")
        .agent_id(agent)
        .wait(Duration::from_secs(30))
        .doorbells(nats)
        .build_async()
        .await
        .expect("worker");
    let sleeping = {
        let w = w.clone();
        tokio::spawn(async move { (w.next().await, Instant::now()) })
    };
    // Let it find nothing and go to sleep on the doorbell.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = Instant::now();
    admin
        .add_message(cid, message_input(human, "wake up", None))
        .await
        .expect("message");
    let (claimed, at) = sleeping.await.expect("joined");
    let turn = claimed.expect("claim").expect("a turn");
    let took = at - sent;
    assert!(
        took < Duration::from_secs(2),
        "claimed {took:?} after the message"
    );
    eprintln!("claimed {took:?} after the message (fallback 30 s)");
    answer(turn, ai).await;
    w.shutdown().await;
    svc.stop().await;
    if let Some(client) = pm_tests::nats::client(pm_tests::nats::NATS).await {
        pm_tests::nats::delete_stream(&client, &stream).await;
    }
}

on_both_backends!(
    a_worker_on_doorbells_claims_when_its_agent_rings,
    a_worker_completes_a_turn_with_fenced_commands,
    the_heartbeat_keeps_a_short_lease,
    three_workers_drain_nine_turns,
    released_turns_go_to_the_next_worker,
);
