//! Shared helpers: raw requests, fixtures, problem and entity assertions, log paging.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use pm_tests::{Response, TestDb, TestService, ADMIN};
use project_manager::Config;
use serde_json::{json, Value};

/// Buffers a reqwest answer into the harness's [`Response`].
pub async fn buffer(r: reqwest::Response) -> Response {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.expect("body read");
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Response {
        status,
        headers,
        json,
        text,
    }
}

/// The configuration [`TestService::start`] uses, in open mode, to adjust and pass to
/// [`TestService::start_with`].
pub fn config(db: &TestDb) -> Config {
    let mut config = Config::defaults();
    config.bind = "127.0.0.1:0".parse().expect("addr");
    config.database_url = Some(db.url.clone());
    config.db_pool_size = 8;
    config.log_poll_ms = 50;
    config.tool_default_action = pm_tests::WORKER_DECIDES;
    config
}

pub fn url(svc: &TestService, path: &str) -> String {
    format!("{}{path}", svc.base)
}

/// `POST` a JSON body with extra headers.
pub async fn post_with(
    svc: &TestService,
    token: Option<&str>,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> Response {
    let mut req = svc.client.post(url(svc, path)).json(body);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    buffer(req.send().await.expect("request sent")).await
}

/// `POST` raw bytes with the given content type.
pub async fn post_raw(
    svc: &TestService,
    token: Option<&str>,
    path: &str,
    content_type: &str,
    body: impl Into<Vec<u8>>,
) -> Response {
    let mut req = svc
        .client
        .post(url(svc, path))
        .header("content-type", content_type)
        .body(body.into());
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    buffer(req.send().await.expect("request sent")).await
}

/// A body-less request with any method, as admin.
pub async fn request(svc: &TestService, method: reqwest::Method, path: &str) -> Response {
    let req = svc
        .client
        .request(method, url(svc, path))
        .bearer_auth(ADMIN);
    buffer(req.send().await.expect("request sent")).await
}

/// `GET` with extra headers, as admin.
pub async fn get_with(svc: &TestService, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = svc.client.get(url(svc, path)).bearer_auth(ADMIN);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    buffer(req.send().await.expect("request sent")).await
}

/// Asserts a `201 Created` and returns the entity id.
pub fn created(r: &Response) -> String {
    assert_eq!(r.status, 201, "expected 201, got {}: {}", r.status, r.text);
    r.id()
}

/// Asserts an RFC 9457 problem answer with `status` and `code`.
pub fn assert_problem(r: &Response, status: u16, code: &str) {
    assert_eq!(r.status, status, "status of {}", r.text);
    assert_eq!(r.code(), code, "code of {}", r.text);
    let content_type = r.header("content-type").unwrap_or_default();
    assert!(
        content_type.starts_with("application/problem+json"),
        "content type {content_type:?} of {}",
        r.text
    );
    for field in ["type", "title", "detail", "code"] {
        assert!(
            r.json[field].is_string(),
            "problem lacks {field}: {}",
            r.text
        );
    }
    assert_eq!(r.json["status"], status, "problem status of {}", r.text);
}

/// Asserts the object's keys are exactly `keys`.
pub fn assert_keys(v: &Value, keys: &[&str]) {
    let got: BTreeSet<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect();
    let want: BTreeSet<&str> = keys.iter().copied().collect();
    assert_eq!(got, want, "fields of {v}");
}

/// Registers a human actor; returns its id.
pub async fn actor(svc: &TestService) -> String {
    let body = json!({"kind": "human", "display_name": "Alice"});
    created(&svc.post(Some(ADMIN), "/v1/actors", &body).await)
}

/// Starts a conversation with one actor; returns its id.
pub async fn conversation(svc: &TestService, actor: &str) -> String {
    let body = json!({"actor_ids": [actor], "title": "Fix the login bug"});
    created(&svc.post(Some(ADMIN), "/v1/conversations", &body).await)
}

/// Creates a conversation checkpoint of `kind`; returns its id.
pub async fn checkpoint(svc: &TestService, conversation: &str, kind: &str) -> String {
    let body = json!({"checkpoint_type": kind, "summary": "Goal: fix login"});
    let path = format!("/v1/conversations/{conversation}/checkpoints");
    created(&svc.post(Some(ADMIN), &path, &body).await)
}

/// Creates a task from a BEGIN_WORK checkpoint; returns its id.
pub async fn task(svc: &TestService, conversation: &str, checkpoint: &str) -> String {
    let body = json!({"checkpoint_id": checkpoint, "instructions": "Patch the handler"});
    let path = format!("/v1/conversations/{conversation}/tasks");
    created(&svc.post(Some(ADMIN), &path, &body).await)
}

/// Records a task checkpoint; returns the answer.
pub async fn task_checkpoint(svc: &TestService, task: &str, kind: &str) -> Response {
    let path = format!("/v1/tasks/{task}/checkpoints");
    svc.post(Some(ADMIN), &path, &json!({"type": kind})).await
}

/// Adds a message; returns its id.
pub async fn message(svc: &TestService, conversation: &str, actor: &str, content: &str) -> String {
    let body = json!({"actor_id": actor, "content": content});
    let path = format!("/v1/conversations/{conversation}/messages");
    created(&svc.post(Some(ADMIN), &path, &body).await)
}

/// An actor, a conversation, a BEGIN_WORK checkpoint and a task from it.
#[derive(Debug, Clone)]
pub struct World {
    /// The actor.
    pub actor: String,
    /// The conversation.
    pub conversation: String,
    /// Its BEGIN_WORK checkpoint.
    pub begin_work: String,
    /// A task from that checkpoint.
    pub task: String,
}

/// Builds a [`World`].
pub async fn world(svc: &TestService) -> World {
    let actor = actor(svc).await;
    let conversation = conversation(svc, &actor).await;
    let begin_work = checkpoint(svc, &conversation, "BEGIN_WORK").await;
    let task = task(svc, &conversation, &begin_work).await;
    World {
        actor,
        conversation,
        begin_work,
        task,
    }
}

/// One JSON page of `/v1/events?<query>`.
pub async fn events_page(svc: &TestService, query: &str) -> Response {
    let r = svc.get(Some(ADMIN), &format!("/v1/events?{query}")).await;
    assert_eq!(r.status, 200, "GET /v1/events?{query}: {}", r.text);
    r
}

/// Every event visible now for `query` (paged with limit 500).
pub async fn events(svc: &TestService, query: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let page = events_page(svc, &format!("{query}&limit=500&cursor={cursor}")).await;
        let items = page.json["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return all;
        }
        cursor = page.json["next_cursor"]
            .as_str()
            .expect("next_cursor")
            .to_string();
        all.extend(items);
    }
}

/// Polls until at least `n` events match `query` (the log is eventually readable).
pub async fn wait_events(svc: &TestService, query: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = events(svc, query).await;
        if all.len() >= n || Instant::now() > deadline {
            assert!(
                all.len() >= n,
                "only {} of {n} events for {query}",
                all.len()
            );
            return all;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `/v1/events` filter of the `project_manager.*` facts alone (the sagas' runes,
/// appended after the facts that cause them, left out).
pub const FACTS: &str = "types=project_manager.*";

const SENTINEL: &str = "__sentinel__";

/// The number of facts (not runes) in the log once everything written so far is readable, not
/// counting the sentinel actors this helper registers to know that.
pub async fn settled_count(svc: &TestService) -> usize {
    let body = json!({"kind": "ai", "display_name": SENTINEL});
    let sentinel = created(&svc.post(Some(ADMIN), "/v1/actors", &body).await);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = events(svc, FACTS).await;
        if all.iter().any(|e| e["subject"] == sentinel.as_str()) {
            return all
                .iter()
                .filter(|e| e["data"]["display_name"] != SENTINEL)
                .count();
        }
        assert!(
            Instant::now() < deadline,
            "sentinel {sentinel} never showed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The event whose `data.id` is `id`.
pub fn event_of<'a>(events: &'a [Value], id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["data"]["id"] == id)
        .unwrap_or_else(|| panic!("no event with data.id {id}"))
}

/// A CloudEvent's `sequence` extension: a string of digits (CloudEvents' sequence
/// extension is a string), as a number.
///
/// # Panics
/// When it is missing, not a string, or not digits.
pub fn sequence(event: &Value) -> u64 {
    event["sequence"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("sequence is not a string of digits: {event}"))
}

/// A conversation titled `title` of `n` human messages (each a turn: facts and runes), for
/// tests of what is delivered beyond the process.
pub async fn human_conversation(svc: &TestService, title: &str, n: usize) {
    let human = crate::sagas::actor(svc, "human", "Hana").await;
    let llm = crate::sagas::actor(svc, "ai", "Lin").await;
    let conv = crate::reads::post(
        svc,
        "/v1/conversations",
        json!({"actor_ids": [human, llm], "title": title}),
    )
    .await
    .id;
    for i in 0..n {
        crate::reads::message(svc, &conv, &human, json!({"content": format!("m{i}")})).await;
    }
}
