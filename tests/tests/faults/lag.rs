//! Defect 3: honest lag. (a) Transaction ids crossing a power of ten (a private server
//! whose next xid was reset to just below 10^8): every event is delivered in order, the
//! read model projects all of them, and `lag_events` is never 0 while the projection's
//! position differs from the head, and is 0 at the head once caught up. (b) A
//! million-event log: `/readyz` and `/v1/admin/processors` answer in < 100 ms (median)
//! and report a lag above 900 000 while the projection catches up.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pm_tests::http::{read_model, Api, SseStream};
use pm_tests::pg_server::PrivatePg;
use pm_tests::TestDb;
use serde_json::{json, Value};
use sqlx::{Connection, Executor, PgConnection};

use crate::support::{median, migrate, poll, serial, spawn, start, FACTS, MESSAGE_ADDED};

/// The read model's `(position, head, lag_events)` in a processors report.
fn lag_of(report: &Value) -> (Value, Value, i64) {
    let rm = read_model(report);
    (
        rm["position"].clone(),
        report["head"].clone(),
        rm["lag_events"].as_i64().unwrap_or(i64::MIN),
    )
}

const WORKERS: usize = 4;
const PER_WORKER: usize = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_ids_crossing_a_power_of_ten_keep_the_log_and_the_lag_right() {
    let _serial = serial().await;
    let Some(mut pg) = tokio::task::block_in_place(PrivatePg::start) else {
        return;
    };
    let url = pg.create_database("pm").await;
    tokio::task::block_in_place(|| {
        migrate(&url);
        pg.stop_fast();
        pg.reset_next_xid(100_000_000 - 40);
        pg.start_again();
    });
    let svc = start(&[
        ("DATABASE_URL", url.as_str()),
        ("PM_DB_POOL_SIZE", "8"),
        ("PM_LOG_POLL_MS", "50"),
    ])
    .await;
    let api = svc.api().clone();
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;
    let mut sse = SseStream::open(&api, &format!("/v1/events?{FACTS}"), &[])
        .await
        .expect("SSE stream");

    // Sample the processors report as fast as it answers while a burst is posted.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (api, stop) = (api.clone(), stop.clone());
        tokio::spawn(async move {
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(report) = api.processors().await {
                    samples.push(lag_of(&report));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            samples
        })
    };
    let writers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (api, actor, conversation) = (api.clone(), actor.clone(), conversation.clone());
            tokio::spawn(async move {
                for i in 0..PER_WORKER {
                    api.message(&conversation, &actor, &format!("w{w}-{i:03}"))
                        .await;
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("writer");
    }
    // Caught up: position == head and lag 0, with every message projected.
    let caught_up = poll(Duration::from_secs(10), || {
        let api = api.clone();
        async move {
            let (position, head, lag) = lag_of(&api.processors().await.ok()?);
            (position == head && lag == 0).then_some(())
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.await.expect("sampler");
    let last = lag_of(&api.processors().await.expect("report"));

    // The setup did what it should: the log's transaction ids cross 10^8.
    let mut conn = PgConnection::connect(&url).await.expect("connect");
    let (lo, hi): (i64, i64) = sqlx::query_as(
        "SELECT min(transaction_id::text::bigint), max(transaction_id::text::bigint) FROM events",
    )
    .fetch_one(&mut conn)
    .await
    .expect("xid range");
    assert!(
        lo < 100_000_000 && hi >= 100_000_000,
        "the test's events should straddle xid 10^8: {lo}..{hi}"
    );

    // Every fact delivered once, in an order that keeps each writer's sequence (each
    // message was acknowledged before the next was sent), on small JSON pages and on SSE
    // (both of the facts alone: the sagas' runes follow them asynchronously).
    let mut paged = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let page = api
            .must_get(&format!("/v1/events?{FACTS}&limit=7&cursor={cursor}"))
            .await;
        assert_eq!(page.status, 200, "{}", page.text);
        let items = page.json["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            break;
        }
        cursor = page.json["next_cursor"]
            .as_str()
            .expect("cursor")
            .to_string();
        paged.extend(items);
    }
    let expected = 2 + WORKERS * PER_WORKER;
    let ids: Vec<&str> = paged.iter().filter_map(|e| e["id"].as_str()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(
        (ids.len(), unique.len()),
        (expected, expected),
        "every fact exactly once on JSON pages of 7"
    );
    let mut per_writer: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in paged.iter().filter(|e| e["type"] == MESSAGE_ADDED) {
        let content = e["data"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let writer = content.split('-').next().unwrap_or_default().to_string();
        per_writer.entry(writer).or_default().push(content);
    }
    for (writer, contents) in &per_writer {
        let mut sorted = contents.clone();
        sorted.sort();
        assert_eq!(contents, &sorted, "writer {writer}'s messages out of order");
    }
    let mut streamed = Vec::new();
    while streamed.len() < expected {
        match sse.next(Duration::from_secs(5)).await {
            Some(e) => streamed.push(e.data["id"].as_str().unwrap_or_default().to_string()),
            None => break,
        }
    }
    assert_eq!(
        streamed, ids,
        "the SSE stream delivers the same events in the same order"
    );

    // Lag: never 0 while behind; 0 at the head once caught up.
    let lying: Vec<_> = samples
        .iter()
        .filter(|(position, head, lag)| position != head && *lag <= 0)
        .collect();
    assert!(
        lying.is_empty(),
        "{} of {} samples report lag_events <= 0 while the read model's position differs from the head, e.g. {:?}",
        lying.len(),
        samples.len(),
        lying.first()
    );
    assert!(
        caught_up.is_some(),
        "the read model never reached the head with lag 0 within 10 s: (position, head, lag) = {last:?}"
    );
    let view = api
        .must_get(&format!("/v1/conversations/{conversation}"))
        .await;
    assert_eq!(
        view.json["message_count"],
        json!(WORKERS * PER_WORKER),
        "every message projected: {}",
        view.text
    );
    drop(svc);
    drop(pg);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_event_log_answers_readiness_fast_with_the_true_lag() {
    let _serial = serial().await;
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    tokio::task::block_in_place(|| migrate(&db.url));
    let mut conn = PgConnection::connect(&db.url).await.expect("connect");
    conn.execute(
        "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata) \
         SELECT 'noise', 'noise-' || g, 1, 'noise.added', '1.0', '{}', '{}' FROM generate_series(1, 1000000) g",
    )
    .await
    .expect("a million noise events");
    let _ = conn.close().await;

    let mut svc = spawn(
        &[],
        &[("DATABASE_URL", db.url.as_str()), ("PM_DB_POOL_SIZE", "8")],
    );
    svc.wait_listening(Duration::from_secs(30)).await;
    let api: Api = svc.api().clone().with_timeout(Duration::from_secs(10));
    let (mut ready, mut report) = (Vec::new(), Vec::new());
    let mut samples = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        let r = api.get("/readyz").await.expect("GET /readyz");
        ready.push(t.elapsed());
        assert_eq!(r.status, 200, "GET /readyz: {}", r.text);
        samples.push(lag_of(&r.json));
        let t = Instant::now();
        let r = api.processors().await.expect("GET /v1/admin/processors");
        report.push(t.elapsed());
        samples.push(lag_of(&r));
    }
    let (ready, report) = (median(ready), median(report));
    assert!(
        ready < Duration::from_millis(100) && report < Duration::from_millis(100),
        "median latency on a million-event log: GET /readyz {ready:?}, GET /v1/admin/processors {report:?} (must be < 100 ms)"
    );
    let (_, _, first) = &samples[0];
    assert!(
        *first > 900_000,
        "the read model starts a million events behind, but lag_events = {first}"
    );
    for (position, head, lag) in &samples {
        assert!(
            *lag > 0 || position == head,
            "lag_events {lag} while position {position} != head {head}"
        );
    }
}
