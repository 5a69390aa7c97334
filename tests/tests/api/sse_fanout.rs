//! SSE fan-out: every live stream of a process is fed by its one log tail. Once the
//! streams are at the tail, new events reach every one of them, in log order and once,
//! without any stream reading the store (`pm_sse_catch_up_reads_total` stays put) — the
//! cost of a new event no longer grows with the number of subscribers.

use std::time::Duration;

use pm_tests::http::SseStream;
use pm_tests::process::ServiceProcess;
use pm_tests::{on_both_backends, TestDb};

const STREAMS: usize = 20;
const MESSAGES: usize = 30;

async fn many_streams_share_one_log_tail(db: TestDb) {
    pm_tests::process::use_binary(env!("CARGO_BIN_EXE_pm-test-server"));
    let svc = ServiceProcess::start(&[("DATABASE_URL", db.url.as_str())]).await;
    let api = svc.api().clone();
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;
    let path = "/v1/events?types=project_manager.message.added";
    let mut streams = Vec::new();
    for _ in 0..STREAMS {
        streams.push(SseStream::open(&api, path, &[]).await.expect("SSE stream"));
    }
    // Every stream caught up and reached the tail once it delivers a new message.
    let first = api.message(&conversation, &actor, "ready").await.id();
    for sse in &mut streams {
        let e = sse
            .next(Duration::from_secs(10))
            .await
            .expect("the first message");
        assert_eq!(e.data["data"]["id"], first.as_str());
    }
    let reads = api.counter("pm_sse_catch_up_reads_total").await;
    let mut sent = Vec::new();
    for i in 0..MESSAGES {
        sent.push(
            api.message(&conversation, &actor, &format!("m{i}"))
                .await
                .id(),
        );
    }
    for sse in &mut streams {
        let mut got = Vec::new();
        while got.len() < MESSAGES {
            let e = sse
                .next(Duration::from_secs(10))
                .await
                .expect("every message");
            got.push(
                e.data["data"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        assert_eq!(got, sent, "in log order, once");
        assert!(
            sse.next(Duration::from_millis(200)).await.is_none(),
            "nothing more"
        );
    }
    assert_eq!(
        api.counter("pm_sse_catch_up_reads_total").await,
        reads,
        "streams at the tail do not read the store"
    );
    assert!(api.counter("pm_log_tail_events_total").await >= MESSAGES as f64);
}

on_both_backends!(many_streams_share_one_log_tail);
