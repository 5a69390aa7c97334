//! The follower over a scripted SSE server: it reconnects after a dropped or silent
//! connection with `Last-Event-ID`, never yields an event twice, yields the snapshot once,
//! and gives up on refusals.

use std::time::Duration;

use futures::StreamExt;
use pm_client::{Client, EventContent, EventQuery, RetryPolicy, Uuid};

use crate::client;
use crate::fake::{problem, Fake, Reply};

const CONVERSATION: &str = "0190a0b0-0000-7000-8000-000000000001";

fn event(position: &str) -> String {
    let data = format!(
        r#"{{"specversion":"1.0","id":"turn:t:{position}","source":"/project-manager/turn/t","type":"turn.started","subject":"t","time":"2026-11-22T05:35:27.123456Z","datacontenttype":"application/json","data":{{"n":"{position}"}},"position":"{position}","sequence":1,"eventversion":"1.0","correlationid":"c","conversationid":"{CONVERSATION}"}}"#
    );
    format!("id: {position}\nevent: turn.started\ndata: {data}\n\n")
}

fn snapshot(cursor: &str) -> String {
    format!(
        "event: snapshot\ndata: {{\"conversation_id\":\"{CONVERSATION}\",\"cursor\":\"{cursor}\",\"session\":null}}\n\n"
    )
}

async fn take(client: &Client, query: EventQuery, n: usize) -> Vec<String> {
    let stream = client.follow(query).take(n);
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .expect("events arrive");
    events
        .into_iter()
        .map(|e| {
            let e = e.expect("event");
            match &e.content {
                EventContent::Snapshot(_) => format!("snapshot@{}", e.position),
                _ => e.position.to_string(),
            }
        })
        .collect()
}

#[tokio::test]
async fn a_dropped_stream_resumes_after_the_last_event_without_repeats() {
    let fake = Fake::start(|n, seen| match n {
        0 => {
            assert_eq!(seen.header("last-event-id"), None);
            Reply::Sse(format!("{}: keep-alive\n\n{}", event("1"), event("2.5")))
        }
        1 => {
            assert_eq!(seen.header("last-event-id"), Some("2.5"));
            // A sloppy server repeating the last event: not yielded again.
            Reply::Sse(format!("{}{}", event("2.5"), event("3")))
        }
        _ => Reply::Sse(String::new()),
    })
    .await;
    let query = EventQuery::new().with_type("turn.*").with_type("session.*");
    assert_eq!(take(&client(&fake.base), query, 3).await, ["1", "2.5", "3"]);
    let seen = fake.seen();
    assert_eq!(seen[0].target, "/v1/events?types=turn.*%2Csession.*");
    assert_eq!(seen[0].header("accept"), Some("text/event-stream"));
}

#[tokio::test]
async fn a_silent_stream_is_reopened_and_the_snapshot_comes_once() {
    let fake = Fake::start(|n, seen| match n {
        0 => {
            assert_eq!(seen.header("last-event-id"), Some("0"));
            Reply::SseHold(format!("{}{}", snapshot("0"), event("1")))
        }
        _ => {
            assert_eq!(seen.header("last-event-id"), Some("1"));
            Reply::Sse(format!("{}{}", snapshot("1"), event("2")))
        }
    })
    .await;
    let c = Client::builder(&fake.base)
        .stream_idle_timeout(Duration::from_millis(300))
        .retry(RetryPolicy::default().base_delay(Duration::from_millis(10)))
        .build()
        .expect("client");
    let conversation: Uuid = CONVERSATION.parse().expect("uuid");
    let query = EventQuery::new()
        .conversation(conversation)
        .after(pm_client::Position::start());
    assert_eq!(take(&c, query, 3).await, ["snapshot@0", "1", "2"]);
    assert_eq!(
        fake.seen()[0].target,
        format!("/v1/events?conversation_id={CONVERSATION}")
    );
}

#[tokio::test]
async fn a_refusal_ends_the_stream() {
    let fake = Fake::start(|_, _| Reply::Answer(403, vec![], problem(403, "forbidden"))).await;
    let items: Vec<_> = client(&fake.base).follow(EventQuery::new()).collect().await;
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].as_ref().err().and_then(|e| e.code()),
        Some("forbidden")
    );
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test]
async fn a_service_never_reached_is_reported_after_the_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let items: Vec<_> = client(&base).follow(EventQuery::new()).collect().await;
    assert_eq!(items.len(), 1);
    assert!(items[0].as_ref().is_err_and(|e| e.is_retryable()));
}

#[tokio::test]
async fn an_answer_that_is_not_an_event_stream_ends_it() {
    let fake = Fake::start(|_, _| Reply::Answer(200, vec![], "{}".into())).await;
    let items: Vec<_> = client(&fake.base).follow(EventQuery::new()).collect().await;
    assert!(matches!(
        items.as_slice(),
        [Err(pm_client::Error::Decode { .. })]
    ));
}
