//! `GET /v1/events` as Server-Sent Events: `id` = position, `event` = type, `data` = the
//! CloudEvent; live delivery, resuming with `Last-Event-ID`, the conversation snapshot.

use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use futures::StreamExt;
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::Value;

use crate::support::{message, wait_events, world, FACTS};

/// One parsed SSE event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SseEvent {
    id: Option<String>,
    pub(crate) event: Option<String>,
    data: String,
}

impl SseEvent {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("data is JSON")
    }
}

/// An open event stream.
pub(crate) struct Sse {
    stream: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buf: Vec<u8>,
}

impl Sse {
    pub(crate) async fn connect(
        svc: &TestService,
        query: &str,
        last_event_id: Option<&str>,
    ) -> Self {
        Self::connect_as(svc, ADMIN, query, last_event_id).await
    }

    /// A stream opened with `token`.
    pub(crate) async fn connect_as(
        svc: &TestService,
        token: &str,
        query: &str,
        last_event_id: Option<&str>,
    ) -> Self {
        let mut req = svc
            .client
            .get(format!("{}/v1/events?{query}", svc.base))
            .bearer_auth(token)
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let r = req.send().await.expect("connected");
        assert_eq!(r.status().as_u16(), 200);
        let content_type = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok());
        assert!(content_type.is_some_and(|c| c.starts_with("text/event-stream")));
        let stream = r.bytes_stream().map(|b| b.map(|b| b.to_vec())).boxed();
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    /// Takes one complete event out of the buffer, skipping comment-only blocks.
    fn take(&mut self) -> Option<SseEvent> {
        loop {
            let end = self.buf.windows(2).position(|w| w == b"\n\n")?;
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let block = String::from_utf8(block).expect("UTF-8");
            let mut event = SseEvent {
                id: None,
                event: None,
                data: String::new(),
            };
            let mut fields = 0;
            for line in block
                .lines()
                .filter(|l| !l.is_empty() && !l.starts_with(':'))
            {
                let (name, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value).to_string();
                fields += 1;
                match name {
                    "id" => event.id = Some(value),
                    "event" => event.event = Some(value),
                    "data" if event.data.is_empty() => event.data = value,
                    "data" => event.data = format!("{}\n{value}", event.data),
                    _ => fields -= 1,
                }
            }
            if fields > 0 {
                return Some(event);
            }
        }
    }

    /// The next event, or `None` when none arrives `within`.
    pub(crate) async fn next(&mut self, within: Duration) -> Option<SseEvent> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(event) = self.take() {
                return Some(event);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            match tokio::time::timeout(left, self.stream.next()).await {
                Ok(Some(Ok(bytes))) => self.buf.extend(bytes),
                _ => return None,
            }
        }
    }

    /// The next event, which must arrive within 5 s.
    pub(crate) async fn expect(&mut self) -> SseEvent {
        self.next(Duration::from_secs(5))
            .await
            .expect("an event within 5 s")
    }
}

/// Asserts `got` is the SSE form of the logged `event`.
fn assert_is(got: &SseEvent, event: &Value) {
    assert_eq!(
        got.id.as_deref(),
        event["position"].as_str(),
        "id is the position"
    );
    assert_eq!(
        got.event.as_deref(),
        event["type"].as_str(),
        "event is the type"
    );
    assert_eq!(&got.json(), event, "data is the CloudEvent");
    assert!(
        got.json()["sequence"].is_string(),
        "the sequence extension is a string: {}",
        got.data
    );
}

async fn events_stream_in_order_and_live(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    message(&svc, &w.conversation, &w.actor, "before").await;
    let all = wait_events(&svc, FACTS, 5).await;
    let mut sse = Sse::connect(&svc, FACTS, None).await;
    for event in &all {
        assert_is(&sse.expect().await, event);
    }
    let live = message(&svc, &w.conversation, &w.actor, "after connecting").await;
    let got = sse
        .next(Duration::from_secs(2))
        .await
        .expect("live within 2 s");
    assert_eq!(got.event.as_deref(), Some("project_manager.message.added"));
    assert_eq!(got.json()["data"]["id"], live.as_str());
    let all = wait_events(&svc, FACTS, 6).await;
    assert_is(&got, &all[5]);
    drop(sse);
    svc.stop().await;
}

async fn reconnecting_with_last_event_id_gets_only_later_events(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    message(&svc, &w.conversation, &w.actor, "one").await;
    let all = wait_events(&svc, FACTS, 5).await;
    let last_seen = all[2]["position"].as_str().expect("position");
    for (query, header) in [
        (FACTS.to_string(), Some(last_seen)),
        (format!("{FACTS}&cursor={last_seen}"), None),
    ] {
        let mut sse = Sse::connect(&svc, &query, header).await;
        for event in &all[3..] {
            assert_is(&sse.expect().await, event);
        }
        assert_eq!(sse.next(Duration::from_millis(300)).await, None);
    }
    svc.stop().await;
}

async fn a_conversation_stream_starts_with_a_snapshot(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    let other = world(&svc).await;
    let query = format!("{FACTS}&conversation_id={}", w.conversation);
    let mine = wait_events(&svc, &query, 3).await;
    let mut sse = Sse::connect(&svc, &query, None).await;
    let snapshot = sse.expect().await;
    assert_eq!(snapshot.event.as_deref(), Some("snapshot"));
    assert!(snapshot.json().is_object(), "{}", snapshot.data);
    for event in &mine {
        assert_is(&sse.expect().await, event);
    }
    message(&svc, &other.conversation, &other.actor, "elsewhere").await;
    let id = message(&svc, &w.conversation, &w.actor, "here").await;
    let got = sse.expect().await;
    assert_eq!(
        got.json()["data"]["id"],
        id.as_str(),
        "only this conversation"
    );
    drop(sse);
    svc.stop().await;
}

on_both_backends!(
    events_stream_in_order_and_live,
    reconnecting_with_last_event_id_gets_only_later_events,
    a_conversation_stream_starts_with_a_snapshot,
);
