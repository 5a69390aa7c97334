//! Read-side helpers: commands that keep their `X-Event-Position`, queries with
//! `min_position`, paging a list to its end, and the processors' admin report.

use std::time::{Duration, Instant};

use pm_tests::{Response, TestService, ADMIN};
use serde_json::{json, Value};

use crate::support::created;

/// A command's answer: the entity, its id and its log position.
#[derive(Debug, Clone)]
pub struct Posted {
    /// The entity's id.
    pub id: String,
    /// `X-Event-Position`.
    pub position: String,
    /// The entity as the command answered it.
    pub json: Value,
}

/// The `X-Event-Position` of a command's answer.
pub fn position(r: &Response) -> String {
    r.header("x-event-position")
        .unwrap_or_else(|| panic!("no X-Event-Position on {} {}", r.status, r.text))
        .to_string()
}

/// `POST` as admin; asserts `201` and an `X-Event-Position`.
pub async fn post(svc: &TestService, path: &str, body: Value) -> Posted {
    let r = svc.post(Some(ADMIN), path, &body).await;
    let id = created(&r);
    Posted {
        id,
        position: position(&r),
        json: r.json,
    }
}

/// Registers an actor.
pub async fn actor(svc: &TestService, name: &str) -> Posted {
    post(
        svc,
        "/v1/actors",
        json!({"kind": "human", "display_name": name}),
    )
    .await
}

/// Starts a conversation; `extra` fields are merged into the body.
pub async fn conversation(svc: &TestService, actors: &[&str], extra: Value) -> Posted {
    let mut body = json!({"actor_ids": actors, "title": "Fix the login bug"});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    post(svc, "/v1/conversations", body).await
}

/// Creates a conversation checkpoint.
pub async fn checkpoint(svc: &TestService, conversation: &str, kind: &str) -> Posted {
    let body = json!({"checkpoint_type": kind, "summary": format!("{kind} summary")});
    post(
        svc,
        &format!("/v1/conversations/{conversation}/checkpoints"),
        body,
    )
    .await
}

/// Creates a task from `begin_work`, assigned to `assignee` when given.
pub async fn task(
    svc: &TestService,
    conversation: &str,
    begin_work: &str,
    assignee: Option<&str>,
) -> Posted {
    let mut body = json!({"checkpoint_id": begin_work, "instructions": "Patch the handler"});
    if let Some(a) = assignee {
        body["assigned_to"] = json!(a);
    }
    post(
        svc,
        &format!("/v1/conversations/{conversation}/tasks"),
        body,
    )
    .await
}

/// Records a task checkpoint of `kind`.
pub async fn task_checkpoint(svc: &TestService, task: &str, kind: &str) -> Posted {
    post(
        svc,
        &format!("/v1/tasks/{task}/checkpoints"),
        json!({"type": kind}),
    )
    .await
}

/// Adds a message; `extra` fields (`task_id`, `time`) are merged into the body.
pub async fn message(svc: &TestService, conversation: &str, actor: &str, extra: Value) -> Posted {
    let mut body = json!({"actor_id": actor, "content": "hello"});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    post(
        svc,
        &format!("/v1/conversations/{conversation}/messages"),
        body,
    )
    .await
}

/// `path` with `name=value` appended.
pub fn with_param(path: &str, name: &str, value: &str) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}{name}={value}")
}

/// `GET path` as admin, with `min_position` when given.
pub async fn get(svc: &TestService, path: &str, min_position: Option<&str>) -> Response {
    let path = match min_position {
        Some(p) => with_param(path, "min_position", p),
        None => path.to_string(),
    };
    svc.get(Some(ADMIN), &path).await
}

/// `GET path?min_position=<min>` as admin; asserts `200` and returns the body.
pub async fn read(svc: &TestService, path: &str, min: &str) -> Value {
    let r = get(svc, path, Some(min)).await;
    assert_eq!(r.status, 200, "GET {path} (min_position {min}): {}", r.text);
    r.json
}

/// Every item of the list at `path`, paged with `limit`; asserts the pagination
/// contract: no page is larger than `limit` or empty (unless the list is), `next_cursor`
/// is a string on every page but the last, where it is null.
pub async fn all_items(svc: &TestService, path: &str, limit: u32, min: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10_000 {
        let mut p = with_param(path, "limit", &limit.to_string());
        if let Some(c) = &cursor {
            p = with_param(&p, "cursor", c);
        }
        let page = read(svc, &p, min).await;
        let items = page["items"].as_array().expect("items").clone();
        assert!(items.len() <= limit as usize, "{p}: page over limit");
        match &page["next_cursor"] {
            Value::Null => {
                assert!(!items.is_empty() || all.is_empty(), "{p}: empty last page");
                all.extend(items);
                return all;
            }
            Value::String(c) => {
                assert!(!items.is_empty(), "{p}: empty page with a cursor");
                cursor = Some(c.clone());
                all.extend(items);
            }
            other => panic!("{p}: next_cursor {other}"),
        }
    }
    panic!("{path}: the pages never end");
}

/// The `id`s of items.
pub fn ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| i["id"].as_str().expect("item id").to_string())
        .collect()
}

/// Asserts every field of the command's `entity` (but `except`) is in `read` unchanged.
pub fn assert_includes(read: &Value, entity: &Value, except: &[&str]) {
    for (k, v) in entity.as_object().expect("entity object") {
        if !except.contains(&k.as_str()) {
            assert_eq!(&read[k], v, "field {k} of {read} vs the command's {entity}");
        }
    }
}

/// Waits until the read model has processed every position (one query each).
pub async fn caught_up(svc: &TestService, positions: &[String]) {
    for p in positions {
        read(svc, "/v1/tasks?limit=1", p).await;
    }
}

/// `GET /v1/admin/processors` as admin.
pub async fn processors(svc: &TestService) -> Value {
    let r = svc.get(Some(ADMIN), "/v1/admin/processors").await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json
}

/// The `read_model` entry of `GET /v1/admin/processors`.
pub async fn read_model(svc: &TestService) -> Value {
    let report = processors(svc).await;
    report["processors"]
        .as_array()
        .expect("processors")
        .iter()
        .find(|p| p["name"] == "read_model")
        .unwrap_or_else(|| panic!("no read_model processor in {report}"))
        .clone()
}

/// Starts a rebuild of the read model and waits until it is `done` in a later generation.
pub async fn rebuild(svc: &TestService) {
    let before = read_model(svc).await["generation"].as_i64().expect("gen");
    let path = "/v1/admin/projections/read_model/rebuild";
    let r = svc.post(Some(ADMIN), path, &json!({})).await;
    assert_eq!(r.status, 202, "{}", r.text);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let p = read_model(svc).await;
        let generation = p["generation"].as_i64().expect("generation");
        if p["rebuild_status"] == "done" && generation > before {
            let detail = p["rebuild_detail"].as_str().unwrap_or_default();
            assert!(detail.contains(" events/s"), "the rate is reported: {p}");
            return;
        }
        assert_ne!(p["rebuild_status"], "failed", "rebuild failed: {p}");
        assert!(Instant::now() < deadline, "rebuild never finished: {p}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
