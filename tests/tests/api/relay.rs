//! The JetStream relay (DELIVERY.md): the stream there before the first event and again
//! when NATS comes back without it; every fact and rune of a run in the stream exactly
//! once and in log order — with two replicas relaying (one at a time), and across a
//! private `nats-server` stopped and started under load. Needs NATS at 127.0.0.1:4222 (and
//! `nats-server` for the restart): skipped loudly without it locally, failed under
//! `CI=true`.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pm_tests::nats::{assert_exactly_the_log, delete_stream, names, stream_messages, NATS};
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::Value;

use crate::support::{config, events, human_conversation};

async fn start(db: &TestDb, url: &str, stream: &str, prefix: &str) -> TestService {
    let mut config = config(db);
    config.nats_url = Some(url.to_string());
    config.nats_stream = stream.to_string();
    config.nats_subject_prefix = prefix.to_string();
    TestService::start_with(config).await
}

/// The relay's lag on `svc`'s report.
async fn relay_lag(svc: &TestService) -> Option<i64> {
    let report = svc.get(Some(ADMIN), "/v1/admin/processors").await.json;
    report["processors"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == "nats_relay")
        .and_then(|p| p["lag_events"].as_i64())
}

/// Waits until the relay has relayed everything in the log (and the log stopped growing).
async fn relayed(svc: &TestService) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = events(svc, "").await;
        if relay_lag(svc).await == Some(0) {
            // The sagas may still be appending: the same length twice, lag 0 both times.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let again = events(svc, "").await;
            if again.len() == log.len() && relay_lag(svc).await == Some(0) {
                return again;
            }
        }
        assert!(Instant::now() < deadline, "the relay never caught up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn every_event_once_and_in_order(db: TestDb) {
    let Some(client) = pm_tests::nats::client(NATS).await else {
        return;
    };
    let (stream, prefix) = names();
    let svc = start(&db, NATS, &stream, &prefix).await;
    human_conversation(&svc, "Relay", 20).await;
    let log = relayed(&svc).await;
    assert!(
        log.iter().any(|e| e["type"] == "turn.dispatched"),
        "runes too"
    );
    assert_exactly_the_log(&stream_messages(&client, &stream).await, &log, &prefix);
    svc.stop().await;
    delete_stream(&client, &stream).await;
}

async fn two_replicas_relay_once(db: TestDb) {
    let Some(client) = pm_tests::nats::client(NATS).await else {
        return;
    };
    let (stream, prefix) = names();
    let one = Arc::new(start(&db, NATS, &stream, &prefix).await);
    let two = Arc::new(start(&db, NATS, &stream, &prefix).await);
    let writers = [one.clone(), two.clone()]
        .map(|svc| tokio::spawn(async move { human_conversation(&svc, "Relay", 10).await }));
    for w in writers {
        w.await.expect("writer");
    }
    let log = relayed(&one).await;
    assert_exactly_the_log(&stream_messages(&client, &stream).await, &log, &prefix);
    Arc::into_inner(one).expect("one owner").stop().await;
    Arc::into_inner(two).expect("one owner").stop().await;
    delete_stream(&client, &stream).await;
}

/// A private `nats-server` with JetStream on `port`, storing in `dir`.
fn nats_server(port: u16, dir: &std::path::Path) -> Child {
    Command::new("nats-server")
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nats-server runs")
}

async fn wait_listening(url: &str) -> async_nats::Client {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(client) = async_nats::connect(url).await {
            return client;
        }
        assert!(Instant::now() < deadline, "nats-server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_nats_restart_under_load_loses_and_repeats_nothing(db: TestDb) {
    if pm_tests::nats::client(NATS).await.is_none() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dir = std::env::temp_dir().join(format!("pm-nats-{}", uuid::Uuid::new_v4()));
    let url = format!("nats://127.0.0.1:{port}");
    let mut server = nats_server(port, &dir);
    wait_listening(&url).await;
    let (stream, prefix) = names();
    let svc = Arc::new(start(&db, &url, &stream, &prefix).await);
    let writer = {
        let svc = svc.clone();
        tokio::spawn(async move { human_conversation(&svc, "Relay", 30).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill().expect("stopped");
    server.wait().expect("reaped");
    // Away for a moment: commands go on, the relay waits.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut server = nats_server(port, &dir);
    let client = wait_listening(&url).await;
    writer.await.expect("writer");
    let log = relayed(&svc).await;
    assert_exactly_the_log(&stream_messages(&client, &stream).await, &log, &prefix);
    Arc::into_inner(svc).expect("one owner").stop().await;
    server.kill().expect("stopped");
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The stream of `stream` on `client`, once it exists (up to `within`).
async fn stream_within(
    client: &async_nats::Client,
    stream: &str,
    within: Duration,
) -> Option<async_nats::jetstream::stream::Info> {
    let js = async_nats::jetstream::new(client.clone());
    let deadline = Instant::now() + within;
    loop {
        if let Ok(mut found) = js.get_stream(stream).await {
            if let Ok(info) = found.info().await {
                return Some(info.clone());
            }
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn the_stream_exists_before_the_first_event(db: TestDb) {
    let Some(client) = pm_tests::nats::client(NATS).await else {
        return;
    };
    let (stream, prefix) = names();
    let svc = start(&db, NATS, &stream, &prefix).await;
    let info = stream_within(&client, &stream, Duration::from_secs(10))
        .await
        .expect("the stream is created at start-up");
    assert_eq!(info.state.messages, 0);
    assert!(events(&svc, "").await.is_empty(), "nothing was logged");
    assert_eq!(info.config.subjects, [format!("{prefix}.>")]);
    svc.stop().await;
    delete_stream(&client, &stream).await;
}

async fn the_stream_is_created_as_soon_as_nats_is_back(db: TestDb) {
    if pm_tests::nats::client(NATS).await.is_none() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("nats://127.0.0.1:{port}");
    let (stream, prefix) = names();
    // NATS away at start-up: the service starts anyway.
    let svc = start(&db, &url, &stream, &prefix).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let first = std::env::temp_dir().join(format!("pm-nats-{}", uuid::Uuid::new_v4()));
    let mut server = nats_server(port, &first);
    let client = wait_listening(&url).await;
    assert!(
        stream_within(&client, &stream, Duration::from_secs(10))
            .await
            .is_some(),
        "created once NATS came"
    );
    server.kill().expect("stopped");
    server.wait().expect("reaped");

    // Back with an empty store: the stream is gone, and made again without any event.
    let second = std::env::temp_dir().join(format!("pm-nats-{}", uuid::Uuid::new_v4()));
    let mut server = nats_server(port, &second);
    let client = wait_listening(&url).await;
    let info = stream_within(&client, &stream, Duration::from_secs(10))
        .await
        .expect("created again once NATS came back");
    assert_eq!(info.state.messages, 0);
    assert!(events(&svc, "").await.is_empty(), "nothing was logged");
    svc.stop().await;
    server.kill().expect("stopped");
    let _ = server.wait();
    for dir in [first, second] {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

on_both_backends!(
    the_stream_exists_before_the_first_event,
    the_stream_is_created_as_soon_as_nats_is_back,
    every_event_once_and_in_order,
    two_replicas_relay_once,
    a_nats_restart_under_load_loses_and_repeats_nothing,
);
