//! L0's wakeup doorbells on NATS (DELIVERY.md): a dispatch rings
//! `cmd.agent.<agent_id>.wakeup` with the turn in its headers within milliseconds, a
//! release rings again, and a NATS that is away leaves commands unaffected. Needs NATS at
//! 127.0.0.1:4222: skipped loudly without it locally, failed under `CI=true`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use pm_domain::saga::ids;
use pm_tests::nats::NATS;
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::json;

use crate::reads::{message, post};
use crate::sagas::actor;
use crate::support::config;

/// A service ringing doorbells on `url`; its relay goes to a stream of this test alone
/// (deleted by [`stop`]), never the default one other users of the NATS may hold.
async fn start(db: &TestDb, url: &str) -> (TestService, String) {
    let (stream, prefix) = pm_tests::nats::names();
    let mut config = config(db);
    config.nats_url = Some(url.to_string());
    config.nats_stream = stream.clone();
    config.nats_subject_prefix = prefix;
    (TestService::start_with(config).await, stream)
}

async fn stop(svc: TestService, stream: &str) {
    svc.stop().await;
    if let Some(client) = pm_tests::nats::client(NATS).await {
        pm_tests::nats::delete_stream(&client, stream).await;
    }
}

/// The next doorbell on `sub`, within 5 s.
async fn next(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("a doorbell within 5 s")
        .expect("the subscription is open")
}

fn header<'m>(msg: &'m async_nats::Message, name: &str) -> Option<&'m str> {
    msg.headers.as_ref()?.get(name).map(|v| v.as_str())
}

async fn a_dispatch_and_a_release_ring_the_agents_doorbell(db: TestDb) {
    let Some(nats) = pm_tests::nats::client(NATS).await else {
        return;
    };
    let (svc, stream) = start(&db, NATS).await;
    let human = actor(&svc, "human", "Hana").await;
    let llm = actor(&svc, "ai", "Lin").await;
    let conv = post(
        &svc,
        "/v1/conversations",
        json!({"actor_ids": [human, llm], "title": "Bell"}),
    )
    .await
    .id;
    let agent = ids::agent_id(
        conv.parse().expect("uuid"),
        Some(llm.parse().expect("uuid")),
    );
    let mut sub = nats
        .subscribe(format!("cmd.agent.{agent}.wakeup"))
        .await
        .expect("subscribed");
    nats.flush().await.expect("flushed");
    let sent = Instant::now();
    message(&svc, &conv, &human, json!({"content": "ring"})).await;
    let bell = next(&mut sub).await;
    let took = sent.elapsed();
    let turn = header(&bell, "PM-Turn-Id").expect("PM-Turn-Id").to_string();
    assert_eq!(header(&bell, "PM-Turn-Epoch"), Some("1"));
    let body: serde_json::Value = serde_json::from_slice(&bell.payload).expect("JSON body");
    assert_eq!(body["turn_id"], turn.as_str());
    assert_eq!(body["agent_id"], agent.to_string());
    assert!(
        took < Duration::from_secs(1),
        "rang {took:?} after the message was sent"
    );
    eprintln!("doorbell {took:?} after the human message was sent");

    // Claimed, then released: claimable again, so it rings again.
    let claim = svc
        .post(
            Some(ADMIN),
            "/v1/turns/claim",
            &json!({"conversation_id": conv}),
        )
        .await;
    assert_eq!(claim.status, 200, "{}", claim.text);
    let epoch = claim.json["turn_epoch"]
        .as_i64()
        .expect("epoch")
        .to_string();
    let released = crate::support::post_with(
        &svc,
        Some(ADMIN),
        &format!("/v1/turns/{turn}/release"),
        &json!({}),
        &[
            ("PM-Turn-Id", turn.as_str()),
            ("PM-Turn-Epoch", epoch.as_str()),
        ],
    )
    .await;
    assert_eq!(released.status, 200, "{}", released.text);
    let again = next(&mut sub).await;
    assert_eq!(header(&again, "PM-Turn-Id"), Some(turn.as_str()));
    assert_eq!(header(&again, "PM-Turn-Epoch"), Some(epoch.as_str()));
    stop(svc, &stream).await;
}

async fn nats_away_leaves_commands_unaffected(db: TestDb) {
    // Nothing listens on port 1: the service starts, and commands answer as ever.
    let (svc, stream) = start(&db, "nats://127.0.0.1:1").await;
    let human = actor(&svc, "human", "Hana").await;
    let conv = post(
        &svc,
        "/v1/conversations",
        json!({"actor_ids": [human], "title": "Away"}),
    )
    .await
    .id;
    message(&svc, &conv, &human, json!({"content": "still here"})).await;
    stop(svc, &stream).await;
}

on_both_backends!(
    a_dispatch_and_a_release_ring_the_agents_doorbell,
    nats_away_leaves_commands_unaffected,
);
