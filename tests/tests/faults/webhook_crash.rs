//! Fault run: `kill -9` of a service delivering webhooks under load (DELIVERY.md). A
//! process delivers every `project_manager.message.added` to a local receiver while 4
//! workers post messages; it is killed; a new process on the same database takes the
//! deliveries over from the stored cursor. The receiver gets every message of the log, in
//! log order; the only repeats are the delivery in flight at the kill, at once again (at
//! least once, never out of order, nothing lost).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use pm_tests::load::{Load, LoadConfig};
use pm_tests::TestDb;
use serde_json::json;

use crate::support::start;

/// A receiver on a loopback port recording each delivery's `webhook-id`.
async fn receiver() -> (Arc<Mutex<Vec<String>>>, String) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap| {
            let record = record.clone();
            async move {
                let id = headers
                    .get("webhook-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                record.lock().expect("lock").push(id);
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (seen, url)
}

/// Consecutive repeats collapsed; `true` also when any repeat was not consecutive.
fn collapsed(ids: &[String]) -> (Vec<String>, bool) {
    let mut out: Vec<String> = Vec::new();
    let mut out_of_place = false;
    for id in ids {
        if out.last() == Some(id) {
            continue;
        }
        if out.contains(id) {
            out_of_place = true;
        }
        out.push(id.clone());
    }
    (out, out_of_place)
}

async fn kill9_while_delivering_webhooks_loses_nothing(db: TestDb) {
    let (seen, url) = receiver().await;
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("PM_DB_POOL_SIZE", "8"),
        ("PM_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1"),
    ];
    let mut first = start(&env).await;
    let api = first.api().clone();
    let created = api
        .post(
            "/v1/webhooks",
            &json!({"url": url, "types": ["project_manager.message.added"]}),
        )
        .await
        .expect("subscribed");
    assert_eq!(created.status, 201, "{}", created.text);
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;
    let config = LoadConfig::messages(&api, &conversation, &actor)
        .workers(4)
        .request_timeout(Duration::from_secs(5));
    let load = Load::start(config);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    first.kill9();
    let report = load.stop().await;
    let before_kill = seen.lock().expect("lock").len();
    assert!(
        report.acknowledged().count() > 8 && before_kill > 0,
        "the load and the deliveries ran before the kill: {:?}, {before_kill} delivered",
        report.status_counts()
    );

    let second = start(&env).await;
    let api = second.api().clone();
    let want: Vec<String> = api
        .events("types=project_manager.message.added")
        .await
        .expect("the log")
        .iter()
        .map(|e| e["id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(want.len() >= report.acknowledged().count());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (got, out_of_place) = collapsed(&seen.lock().expect("lock"));
        assert!(!out_of_place, "a delivery repeated out of order");
        if got.len() >= want.len() {
            assert_eq!(got, want, "every message, in log order");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "deliveries never caught up: {} of {}",
            got.len(),
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let received = seen.lock().expect("lock").len();
    eprintln!(
        "FIGURE kill -9 while delivering webhooks: {} messages in the log, {} deliveries \
         ({} before the kill), 0 lost, {} repeated at the kill",
        want.len(),
        received,
        before_kill,
        received - want.len()
    );
}

per_backend!(
    kill9_while_delivering_webhooks_loses_nothing,
    sqlite: [],
    postgres: []
);
