//! Webhooks (DELIVERY.md): subscriptions are admin-only and checked (URL form, the host
//! policy, filters, secrets); deliveries to a local receiver that fails the first ones
//! arrive retried, in log order and signed; a receiver that keeps failing pauses its
//! subscription with the failing delivery visible, and a resume continues from it (or
//! from a given position); a restart loses nothing.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use pm_tests::{all_tokens, on_both_backends, TestDb, TestService, ADMIN, LLM};
use serde_json::{json, Value};

use crate::support::{config, events, human_conversation};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A receiver on a loopback port: records every delivery; fails the first `fail_first`
/// with `500`, and every one while `down` with `503`.
#[derive(Default)]
pub(crate) struct Receiver {
    pub(crate) deliveries: Mutex<Vec<(HeaderMap, Bytes)>>,
    pub(crate) fail_first: AtomicUsize,
    down: AtomicBool,
}

impl Receiver {
    pub(crate) async fn start() -> (Arc<Self>, String) {
        let receiver = Arc::new(Self::default());
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(hook))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, url)
    }

    /// The `webhook-id` of every delivery so far, in arrival order.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.deliveries
            .lock()
            .expect("lock")
            .iter()
            .map(|(h, _)| header(h, "webhook-id"))
            .collect()
    }
}

async fn hook(
    State(receiver): State<Arc<Receiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    receiver
        .deliveries
        .lock()
        .expect("lock")
        .push((headers, body));
    if receiver.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let failing = receiver
        .fail_first
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if failing {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::NO_CONTENT
    }
}

pub(crate) fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A service that may deliver to loopback, retrying fast.
async fn start(db: &TestDb, max_attempts: u32) -> TestService {
    let mut config = config(db);
    config.webhook_allowed_hosts = "127.0.0.1/32".into();
    config.webhook_retry_base_ms = 20;
    config.webhook_retry_max_secs = 1;
    config.webhook_max_attempts = max_attempts;
    TestService::start_with(config).await
}

pub(crate) async fn subscribe(svc: &TestService, url: &str, types: &[&str]) -> String {
    let r = svc
        .post(
            Some(ADMIN),
            "/v1/webhooks",
            &json!({"url": url, "types": types, "secret": SECRET}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["secret"], SECRET);
    assert_eq!(r.json["state"], "active");
    r.id()
}

/// The log's events whose type the filters match, once the log has stopped growing.
async fn expected(svc: &TestService, matches: impl Fn(&str) -> bool) -> Vec<Value> {
    let mut last = 0;
    loop {
        let log = events(svc, "").await;
        if log.len() == last {
            return log
                .into_iter()
                .filter(|e| matches(e["type"].as_str().unwrap_or_default()))
                .collect();
        }
        last = log.len();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

pub(crate) async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn webhook(svc: &TestService, id: &str) -> Value {
    let r = svc.get(Some(ADMIN), &format!("/v1/webhooks/{id}")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json
}

/// Consecutive repeats (retries of one event) collapsed.
fn collapsed(ids: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for id in ids {
        if out.last() != Some(id) {
            out.push(id.clone());
        }
    }
    out
}

fn ids_of(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn subscriptions_are_admin_only_and_checked(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let create = |token, body: Value| {
        let svc = &svc;
        async move { svc.post(Some(token), "/v1/webhooks", &body).await }
    };
    let types = json!(["turn.*"]);
    let r = create(
        LLM,
        json!({"url": "https://93.184.216.34/hook", "types": types}),
    )
    .await;
    assert_eq!((r.status, r.code()), (403, "forbidden"), "{}", r.text);
    // The default policy: public addresses only, whether written as an address or a name.
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1/",
        "http://[::1]:9/",
    ] {
        let r = create(ADMIN, json!({"url": url, "types": types})).await;
        assert_eq!(
            (r.status, r.code()),
            (422, "webhook_url_not_allowed"),
            "{url}: {}",
            r.text
        );
    }
    for body in [
        json!({"url": "ftp://93.184.216.34/", "types": types}),
        json!({"url": "https://user:pw@93.184.216.34/", "types": types}),
        json!({"url": "https://93.184.216.34/", "types": []}),
        json!({"url": "https://93.184.216.34/", "types": ["turn.**"]}),
        json!({"url": "https://93.184.216.34/", "types": types, "secret": "hunter2"}),
        json!({"url": "https://93.184.216.34/", "types": types, "extra": 1}),
    ] {
        let r = create(ADMIN, body.clone()).await;
        assert_eq!(
            (r.status, r.code()),
            (422, "validation_failed"),
            "{body}: {}",
            r.text
        );
    }
    let list = svc.get(Some(ADMIN), "/v1/webhooks").await;
    assert_eq!(list.json["items"], json!([]), "nothing refused is written");
    // Accepted: a generated secret, shown once.
    let r = create(
        ADMIN,
        json!({"url": "https://93.184.216.34/hook", "types": types}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.id();
    assert_eq!(
        r.header("location"),
        Some(format!("/v1/webhooks/{id}").as_str())
    );
    let secret = r.json["secret"].as_str().expect("a secret");
    assert!(
        secret.starts_with("whsec_") && secret.len() > 40,
        "{secret}"
    );
    let one = webhook(&svc, &id).await;
    assert_eq!(one["url"], "https://93.184.216.34/hook");
    assert_eq!(one["types"], types);
    assert_eq!(one["state"], "active");
    assert!(one.get("secret").is_none(), "the secret is not shown again");
    let list = svc.get(Some(ADMIN), "/v1/webhooks").await;
    assert_eq!(list.json["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(svc.get(Some(LLM), "/v1/webhooks").await.status, 403);
    for from in ["x", "0", "999999999"] {
        let r = svc
            .post(
                Some(ADMIN),
                &format!("/v1/webhooks/{id}/resume"),
                &json!({ "from_position": from }),
            )
            .await;
        let got = (r.status, r.code());
        assert_eq!(got, (422, "validation_failed"), "{from}: {}", r.text);
    }
    let delete = |id: String| {
        let svc = &svc;
        async move {
            svc.client
                .delete(format!("{}/v1/webhooks/{id}", svc.base))
                .bearer_auth(ADMIN)
                .send()
                .await
                .expect("sent")
                .status()
                .as_u16()
        }
    };
    assert_eq!(delete(id.clone()).await, 204);
    assert_eq!(delete(id.clone()).await, 404);
    let r = svc.get(Some(ADMIN), &format!("/v1/webhooks/{id}")).await;
    assert_eq!((r.status, r.code()), (404, "webhook_not_found"));
    svc.stop().await;
}

async fn deliveries_are_retried_in_order_and_signed(db: TestDb) {
    let (receiver, url) = Receiver::start().await;
    receiver.fail_first.store(3, Ordering::SeqCst);
    let svc = start(&db, 10).await;
    let id = subscribe(&svc, &url, &["project_manager.*", "turn.*"]).await;
    human_conversation(&svc, "Hooks", 5).await;
    let matches = |t: &str| t.starts_with("project_manager.") || t.starts_with("turn.");
    let want = ids_of(&expected(&svc, matches).await);
    assert!(want.len() > 10, "facts and turn runes: {want:?}");
    until("every delivery", || collapsed(&receiver.ids()) == want).await;
    // The first event three more times (three failures), then each once, in log order.
    let got = receiver.ids();
    assert_eq!(got.len(), want.len() + 3, "{got:?}");
    assert_eq!(got[..4], vec![want[0].clone(); 4][..]);
    for (headers, body) in receiver.deliveries.lock().expect("lock").iter() {
        assert_eq!(header(headers, "content-type"), "application/json");
        assert_eq!(pm_client::verify_webhook(SECRET, headers, body), Ok(()));
        let event: Value = serde_json::from_slice(body).expect("a CloudEvent");
        assert_eq!(
            event["id"].as_str(),
            Some(header(headers, "webhook-id").as_str())
        );
        assert_eq!(event["specversion"], "1.0");
        assert!(event["traceparent"].is_string(), "{event}");
        assert_eq!(
            event["traceparent"].as_str(),
            Some(header(headers, "traceparent").as_str()),
            "a delivery carries its event's trace"
        );
    }
    let log = events(&svc, "").await;
    let last = log.last().expect("events")["position"].clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = webhook(&svc, &id).await;
        if state["position"] == last {
            assert_eq!(state["last_error"], Value::Null, "cleared by a success");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "position {} never reached {last}",
            state["position"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    svc.stop().await;
}

async fn a_failing_receiver_pauses_and_a_resume_continues(db: TestDb) {
    let (receiver, url) = Receiver::start().await;
    receiver.down.store(true, Ordering::SeqCst);
    let svc = start(&db, 3).await;
    let id = subscribe(&svc, &url, &["project_manager.*"]).await;
    human_conversation(&svc, "Hooks", 3).await;
    let want = expected(&svc, |t| t.starts_with("project_manager.")).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let paused = loop {
        let state = webhook(&svc, &id).await;
        if state["state"] == "paused" {
            break state;
        }
        assert!(Instant::now() < deadline, "never paused: {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let failure = &paused["last_error"];
    assert_eq!(failure["event_id"], want[0]["id"], "{paused}");
    assert_eq!(failure["position"], want[0]["position"]);
    assert_eq!(failure["event_type"], want[0]["type"]);
    assert_eq!(
        (failure["attempts"].as_u64(), failure["status"].as_u64()),
        (Some(3), Some(503))
    );
    assert!(
        failure["error"].as_str().is_some_and(|e| e.contains("503")),
        "{failure}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        receiver.ids(),
        vec![want[0]["id"].as_str().expect("id").to_string(); 3],
        "no more attempts once paused"
    );
    // The receiver is back; resumed, delivery continues from the failed event.
    receiver.down.store(false, Ordering::SeqCst);
    receiver.deliveries.lock().expect("lock").clear();
    let r = svc
        .post(
            Some(ADMIN),
            &format!("/v1/webhooks/{id}/resume"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (r.json["state"].as_str(), &r.json["last_error"]),
        (Some("active"), &Value::Null)
    );
    let want_ids = ids_of(&want);
    until("the deliveries after the resume", || {
        receiver.ids() == want_ids
    })
    .await;
    // Resumed from an earlier position: delivered again from there.
    receiver.deliveries.lock().expect("lock").clear();
    let from = want[2]["position"].as_str().expect("position");
    let r = svc
        .post(
            Some(ADMIN),
            &format!("/v1/webhooks/{id}/resume"),
            &json!({"from_position": from}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    until("the replay", || receiver.ids() == want_ids[2..]).await;
    svc.stop().await;
}

async fn a_restart_loses_no_delivery(db: TestDb) {
    let (receiver, url) = Receiver::start().await;
    receiver.down.store(true, Ordering::SeqCst);
    let svc = start(&db, 1000).await;
    subscribe(&svc, &url, &["project_manager.message.added"]).await;
    human_conversation(&svc, "Hooks", 4).await;
    let want = ids_of(&expected(&svc, |t| t == "project_manager.message.added").await);
    assert_eq!(want.len(), 4);
    until("a first attempt", || !receiver.ids().is_empty()).await;
    svc.stop().await;
    // Back, and a new process: it takes the webhooks over and delivers from the cursor.
    receiver.down.store(false, Ordering::SeqCst);
    let svc = start(&db, 1000).await;
    until("every delivery after the restart", || {
        collapsed(&receiver.ids()) == want
    })
    .await;
    svc.stop().await;
}

on_both_backends!(
    subscriptions_are_admin_only_and_checked,
    deliveries_are_retried_in_order_and_signed,
    a_failing_receiver_pauses_and_a_resume_continues,
    a_restart_loses_no_delivery,
);
