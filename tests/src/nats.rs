//! NATS for the delivery tests: a client of the local server (skipped loudly without one
//! outside CI), a stream read back in order, and the check that it holds exactly the log.

use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;
use serde_json::Value;

use crate::in_ci;

/// The NATS every delivery test uses (`.ci/run` starts it when down).
pub const NATS: &str = "nats://127.0.0.1:4222";

/// A client of the NATS at `url`, or `None` (the test is skipped, loudly) when there is
/// none outside CI; under `CI=true` a missing NATS fails the test.
///
/// # Panics
/// Under `CI=true` without NATS.
pub async fn client(url: &str) -> Option<async_nats::Client> {
    match async_nats::connect(url).await {
        Ok(client) => Some(client),
        Err(e) if !in_ci() => {
            eprintln!("SKIPPED: no NATS at {url} ({e}); CI=true makes this a failure");
            None
        }
        Err(e) => panic!("no NATS at {url}: {e}"),
    }
}

/// A stream name and subject prefix of one test alone.
pub fn names() -> (String, String) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    (format!("PMTEST_{id}"), format!("pmt{id}"))
}

/// Every message of `stream`, in stream order: (`Nats-Msg-Id`, subject, body).
///
/// # Panics
/// When the stream cannot be read.
pub async fn stream_messages(client: &async_nats::Client, stream: &str) -> Vec<Relayed> {
    let js = jetstream::new(client.clone());
    let mut stream = js.get_stream(stream).await.expect("the stream exists");
    let count =
        usize::try_from(stream.info().await.expect("info").state.messages).expect("a count");
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig::default())
        .await
        .expect("consumer");
    let mut messages = consumer.messages().await.expect("messages").take(count);
    let mut all = Vec::with_capacity(count);
    while let Some(m) = tokio::time::timeout(Duration::from_secs(10), messages.next())
        .await
        .expect("the stream answers")
    {
        let m = m.expect("a message");
        let header = |name: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.as_str().to_string())
        };
        all.push(Relayed {
            id: header("Nats-Msg-Id").unwrap_or_default(),
            subject: m.subject.to_string(),
            body: serde_json::from_slice(&m.payload).expect("JSON"),
            traceparent: header("traceparent"),
            tracestate: header("tracestate"),
        });
    }
    all
}

/// A message of the relay's stream.
#[derive(Debug, Clone)]
pub struct Relayed {
    /// Its `Nats-Msg-Id` header.
    pub id: String,
    /// Its subject.
    pub subject: String,
    /// Its body (a CloudEvent).
    pub body: Value,
    /// Its `traceparent` header.
    pub traceparent: Option<String>,
    /// Its `tracestate` header.
    pub tracestate: Option<String>,
}

/// The stream holds exactly `log` (the `/v1/events` CloudEvents), in order, on
/// `<prefix>.<type>`, each body the event's CloudEvent and each message's trace headers
/// its CloudEvent's trace extensions.
///
/// # Panics
/// When it does not.
pub fn assert_exactly_the_log(stream: &[Relayed], log: &[Value], prefix: &str) {
    let ids: Vec<&str> = stream.iter().map(|m| m.id.as_str()).collect();
    let want: Vec<&str> = log.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids.len(), want.len(), "as many messages as events");
    assert_eq!(ids, want, "every event once, in log order");
    for (m, event) in stream.iter().zip(log) {
        let expected = format!("{prefix}.{}", event["type"].as_str().unwrap_or(""));
        assert_eq!(m.subject, expected);
        assert_eq!(&m.body, event, "the body of {} is its CloudEvent", m.id);
        assert!(event["traceparent"].is_string(), "{event}");
        assert_eq!(
            m.traceparent.as_deref(),
            event["traceparent"].as_str(),
            "{}",
            m.id
        );
        assert_eq!(
            m.tracestate.as_deref(),
            event["tracestate"].as_str(),
            "{}",
            m.id
        );
    }
}

/// Deletes `stream` (a test's own).
pub async fn delete_stream(client: &async_nats::Client, stream: &str) {
    let _ = jetstream::new(client.clone()).delete_stream(stream).await;
}
