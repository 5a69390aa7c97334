//! Fault run: `kill -9` of a relaying service under load (DELIVERY.md). A process relays to
//! its own JetStream stream while 8 workers post messages; it is killed; a new process on
//! the same database catches up. The stream holds every event of the log exactly once, in
//! log order: the batch in flight at the kill is published again and JetStream drops what
//! it already had (`Nats-Msg-Id`).

use std::time::{Duration, Instant};

use pm_tests::load::{Load, LoadConfig};
use pm_tests::nats::{assert_exactly_the_log, delete_stream, names, stream_messages, NATS};
use pm_tests::TestDb;

use crate::support::start;

async fn kill9_while_relaying_loses_and_repeats_nothing(db: TestDb) {
    let Some(client) = pm_tests::nats::client(NATS).await else {
        return;
    };
    let (stream, prefix) = names();
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("PM_DB_POOL_SIZE", "8"),
        ("PM_NATS_URL", NATS),
        ("PM_NATS_STREAM", stream.as_str()),
        ("PM_NATS_SUBJECT_PREFIX", prefix.as_str()),
    ];
    let mut first = start(&env).await;
    let api = first.api().clone();
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;
    let config = LoadConfig::messages(&api, &conversation, &actor)
        .workers(8)
        .request_timeout(Duration::from_secs(5));
    let load = Load::start(config);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    first.kill9();
    let report = load.stop().await;
    assert!(
        report.acknowledged().count() > 8,
        "the load ran before the kill: {:?}",
        report.status_counts()
    );

    let second = start(&env).await;
    let api = second.api().clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    let log = loop {
        let lag = api.processors().await.expect("processors")["processors"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "nats_relay").cloned())
            .and_then(|p| p["lag_events"].as_i64());
        let log = api.events("").await.expect("the log");
        if lag == Some(0) {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let again = api.events("").await.expect("the log");
            if again.len() == log.len() {
                break again;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the relay never caught up: lag {lag:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let relayed = stream_messages(&client, &stream).await;
    assert_exactly_the_log(&relayed, &log, &prefix);
    eprintln!(
        "FIGURE kill -9 while relaying: {} events in the log, {} in the stream, 0 lost, 0 repeated",
        log.len(),
        relayed.len()
    );
    delete_stream(&client, &stream).await;
}

per_backend!(
    kill9_while_relaying_loses_and_repeats_nothing,
    sqlite: [],
    postgres: []
);
