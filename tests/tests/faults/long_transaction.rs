//! Defect 5: a long transaction elsewhere does not stall the log. While a connection to
//! another database of the same server holds a transaction (with an xid) open, every
//! command posted appears within 1 s in `GET /v1/events` (JSON), on an SSE stream, and
//! to `?min_position=` (200, not 503); nothing is lost or reordered.
//!
//! The server is a private one: the open transaction holds back every reader of the
//! cluster, and the shared server serves other tests.

use std::time::{Duration, Instant};

use pm_tests::http::SseStream;
use pm_tests::pg_server::PrivatePg;
use sqlx::{Connection, Executor, PgConnection};

use crate::support::{poll, serial, start, MESSAGE_ADDED};

const LIMIT: Duration = Duration::from_secs(1);
const COMMANDS: usize = 8;

/// A position as numbers (`"12"` → `[12]`, `"7.12"` → `[7, 12]`), to compare positions
/// numerically.
fn numeric(position: &str) -> Vec<u128> {
    position
        .split('.')
        .map(|p| {
            p.parse()
                .unwrap_or_else(|_| panic!("position {position:?} is not numeric"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_transaction_in_another_database_does_not_stall_the_log() {
    let _serial = serial().await;
    let Some(pg) = tokio::task::block_in_place(PrivatePg::start) else {
        return;
    };
    let url = pg.create_database("pm").await;
    let other = pg.create_database("elsewhere").await;
    let svc = start(&[
        ("DATABASE_URL", url.as_str()),
        ("PM_DB_POOL_SIZE", "8"),
        ("PM_LOG_POLL_MS", "50"),
    ])
    .await;
    let api = svc.api().clone().with_timeout(Duration::from_secs(3));
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;

    let mut long = PgConnection::connect(&other).await.expect("connect");
    long.execute("BEGIN").await.expect("begin");
    let xid: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text")
        .fetch_one(&mut long)
        .await
        .expect("an xid");
    let began = Instant::now();

    let mut sse = SseStream::open(&api, &format!("/v1/events?types={MESSAGE_ADDED}"), &[])
        .await
        .expect("SSE stream");
    let mut positions = Vec::new();
    for i in 0..COMMANDS {
        let r = api
            .message(&conversation, &actor, &format!("during {i}"))
            .await;
        let posted = Instant::now();
        let held = posted - began;
        let id = r.id();
        let position = r.header("x-event-position").expect("position").to_string();
        let location = r.header("location").expect("Location").to_string();

        let in_json = async {
            let deadline = posted + LIMIT;
            loop {
                let page = api
                    .get(&format!(
                        "/v1/events?types={MESSAGE_ADDED}&conversation_id={conversation}&limit=500"
                    ))
                    .await;
                if let Ok(page) = page {
                    let items = page.json["items"].as_array().cloned().unwrap_or_default();
                    if items.iter().any(|e| e["data"]["id"] == id.as_str()) {
                        return Some(posted.elapsed());
                    }
                }
                if Instant::now() >= deadline {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let on_sse = async {
            while let Some(e) = sse.next(LIMIT.saturating_sub(posted.elapsed())).await {
                if e.data["data"]["id"] == id.as_str() {
                    return Some((e.at - posted, e.id));
                }
            }
            None
        };
        let read = async {
            let r = api
                .get(&format!("{location}?min_position={position}"))
                .await;
            match r {
                Ok(r) if r.status == 200 && posted.elapsed() <= LIMIT => Ok(posted.elapsed()),
                Ok(r) => Err(format!(
                    "{} after {:?}: {}",
                    r.status,
                    posted.elapsed(),
                    r.text
                )),
                Err(e) => Err(format!("{e} after {:?}", posted.elapsed())),
            }
        };
        let (in_json, on_sse, read) = tokio::join!(in_json, on_sse, read);
        assert!(
            in_json.is_some(),
            "command {i}, posted {held:?} into a transaction (xid {xid}) held open in another database: \
             not in GET /v1/events within {LIMIT:?}"
        );
        let (_, sse_id) = on_sse.unwrap_or_else(|| {
            panic!("command {i} (transaction held for {held:?}): not on the SSE stream within {LIMIT:?}")
        });
        assert_eq!(sse_id, position, "the SSE id is the command's position");
        if let Err(e) = read {
            panic!("command {i} (transaction held for {held:?}): ?min_position= did not answer 200 within {LIMIT:?}: {e}");
        }
        positions.push(position);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    long.execute("ROLLBACK").await.expect("rollback");
    let numbers: Vec<Vec<u128>> = positions.iter().map(|p| numeric(p)).collect();
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "positions strictly increase: {positions:?}"
    );
    let all = api
        .events(&format!(
            "types={MESSAGE_ADDED}&conversation_id={conversation}"
        ))
        .await
        .expect("events");
    let logged: Vec<&str> = all.iter().filter_map(|e| e["position"].as_str()).collect();
    assert_eq!(
        logged, positions,
        "the log holds exactly these messages, in order"
    );
    drop(svc);
    drop(pg);
}

/// What does hold the log back — an append that stalls before it commits — shows in
/// `/readyz` (`log_held_back_ms`) and in `pm_log_held_back_seconds`; other appends do not
/// wait for it (issue 32: no lock across a commit), but readers see them only once it has
/// ended, so nothing is read out of order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_holding_the_log_back_shows_in_readyz_and_metrics() {
    let _serial = serial().await;
    let Some(db) = pm_tests::TestDb::postgres().await else {
        return;
    };
    let mut svc = start(&[("DATABASE_URL", db.url.as_str()), ("PM_DB_POOL_SIZE", "8")]).await;
    let api = svc.api().clone().with_timeout(Duration::from_secs(10));
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;

    // An append that stalls: its floor named (as every INSERT INTO events names it) and an
    // event drawn but not committed.
    let mut stuck = PgConnection::connect(&db.url).await.expect("connect");
    stuck.execute("BEGIN").await.expect("begin");
    stuck
        .execute(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata) VALUES ('stalled', 'stalled', 1, \
             'stalled.appended', '1.0', '{}', '{}')",
        )
        .await
        .expect("the stalled append");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let ready = api.must_get("/readyz").await;
    let held = ready.json["log_held_back_ms"].as_u64().unwrap_or(0);
    assert!(
        held >= 1000,
        "readyz does not show the log held back: {}",
        ready.text
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let metrics = api.must_get("/metrics").await.text;
    let gauge = metrics
        .lines()
        .find(|l| l.starts_with("pm_log_held_back_seconds"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(gauge >= 1.0, "pm_log_held_back_seconds is {gauge}");

    // A command meanwhile is answered at once, but readers see it only after the stall.
    let posted = api.message(&conversation, &actor, "after the stall").await;
    let id = posted.id();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !listed(&api, &conversation, &id).await,
        "a reader went past an append still in progress"
    );
    let stalled_position: i64 =
        sqlx::query_scalar("SELECT global_position FROM events WHERE aggregate_type = 'stalled'")
            .fetch_one(&mut stuck)
            .await
            .expect("the stalled position");
    stuck.execute("COMMIT").await.expect("commit");
    let seen = poll(Duration::from_secs(5), || {
        let (api, conversation, id) = (api.clone(), conversation.clone(), id.clone());
        async move { listed(&api, &conversation, &id).await.then_some(()) }
    })
    .await;
    assert!(seen.is_some(), "the command never became readable");
    let message_position: i64 = posted
        .header("x-event-position")
        .and_then(|p| p.parse().ok())
        .expect("a position");
    assert!(
        stalled_position < message_position,
        "the stalled append drew the earlier position ({stalled_position} vs {message_position}): \
         the command committed first and was held back for it"
    );
    // The sagas answer the message with runes, appended a moment after it: once every
    // processor has caught up with the head, nothing is appending and nothing may hold the
    // log back.
    let caught_up = poll(Duration::from_secs(10), || {
        let api = api.clone();
        async move {
            let ready = api.get("/readyz").await.ok()?;
            let head = &ready.json["head"];
            let processors = ready.json["processors"].as_array()?;
            processors
                .iter()
                .all(|p| p["lag_events"] == 0 && p["position"] == *head)
                .then_some(())
        }
    })
    .await;
    let ready = api.must_get("/readyz").await;
    assert!(
        caught_up.is_some(),
        "the processors never caught up with the head: {}",
        ready.text
    );
    assert_eq!(ready.json["log_held_back_ms"], 0, "{}", ready.text);
    svc.terminate(Duration::from_secs(10)).await;
}

/// Whether message `id` of `conversation` is in `GET /v1/events`.
async fn listed(api: &pm_tests::http::Api, conversation: &str, id: &str) -> bool {
    let page = api
        .must_get(&format!(
            "/v1/events?types={MESSAGE_ADDED}&conversation_id={conversation}"
        ))
        .await;
    page.json["items"]
        .as_array()
        .is_some_and(|items| items.iter().any(|e| e["data"]["id"] == id))
}
