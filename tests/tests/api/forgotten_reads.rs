//! The read model forgets (TRUST.md "Forgetting a person"): after `POST
//! /v1/actors/{id}/forget` the actor's name and identity and what they wrote read `null`
//! in every answer that shows them, with `"forgotten": true`, and after `POST
//! /v1/conversations/{id}/forget` every text of the conversation does — exactly those
//! entities: the others read as written, without the mark; ids, counts and states stay.
//! The answers are the documented ones, and the read model's views hold none of the texts
//! — as the live projection applied the forgetting, and again after a rebuild, which reads
//! the texts whose key was destroyed as `null` from the log.

use pm_infrastructure::db::Args;
use pm_infrastructure::Database;
use pm_tests::{on_both_backends, Response, TestDb, TestService, ADMIN};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::documented::assert_answer;
use crate::reads::read;
use crate::support::{config, created};

/// What [`write`] made, and the texts it wrote (unique to this test run).
struct Made {
    ada: String,
    bob: String,
    /// Conversation of Ada and Bob: a checkpoint, a task, a message of each.
    shared: String,
    checkpoint: String,
    task: String,
    ada_says: String,
    bob_says: String,
    /// Conversation of Bob alone, with a message.
    other: String,
    other_says: String,
    tag: String,
}

impl Made {
    /// The text of `what`, unique to this run.
    fn text(&self, what: &str) -> String {
        format!("{what} {}", self.tag)
    }
}

async fn post(svc: &TestService, path: &str, body: Value) -> String {
    created(&svc.post(Some(ADMIN), path, &body).await)
}

async fn write(svc: &TestService) -> Made {
    let tag = Uuid::new_v4().simple().to_string();
    let t = |what: &str| format!("{what} {tag}");
    let actor = |name: &str| json!({"kind": "human", "display_name": t(name), "external_identity": t(&format!("{name}-id"))});
    let ada = post(svc, "/v1/actors", actor("Ada")).await;
    let bob = post(svc, "/v1/actors", actor("Bob")).await;
    let start = |ids: Value, title: &str| json!({"actor_ids": ids, "title": t(title)});
    let shared = post(svc, "/v1/conversations", start(json!([ada, bob]), "Shared")).await;
    let other = post(svc, "/v1/conversations", start(json!([bob]), "Other")).await;
    let checkpoint = post(
        svc,
        &format!("/v1/conversations/{shared}/checkpoints"),
        json!({"checkpoint_type": "BEGIN_WORK", "summary": t("Summary")}),
    )
    .await;
    let task = post(
        svc,
        &format!("/v1/conversations/{shared}/tasks"),
        json!({"checkpoint_id": checkpoint, "instructions": t("Instructions")}),
    )
    .await;
    let say = |actor: &str, what: &str| json!({"actor_id": actor, "content": t(what), "external_identity": t(&format!("{what}-id"))});
    let messages = |c: &str| format!("/v1/conversations/{c}/messages");
    let ada_says = post(svc, &messages(&shared), say(&ada, "Ada says")).await;
    let bob_says = post(svc, &messages(&shared), say(&bob, "Bob says")).await;
    let other_says = post(svc, &messages(&other), say(&bob, "Bob elsewhere")).await;
    Made {
        ada,
        bob,
        shared,
        checkpoint,
        task,
        ada_says,
        bob_says,
        other,
        other_says,
        tag,
    }
}

/// Forgets `what` (`actors/{id}` or `conversations/{id}`); answers the fact's position.
async fn forget(svc: &TestService, what: &str) -> String {
    let r = svc
        .post(Some(ADMIN), &format!("/v1/{what}/forget"), &json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.header("x-event-position")
        .expect("the forgetting's position")
        .to_string()
}

/// Asserts `entity` is forgotten: each of `fields` reads `null`, and it is marked.
fn forgotten(entity: &Value, fields: &[&str]) {
    assert_eq!(entity["forgotten"], json!(true), "{entity}");
    for field in fields {
        assert_eq!(entity[*field], Value::Null, "{field} of {entity}");
    }
}

/// Asserts `entity` is not forgotten: no mark, and `field` reads `text`.
fn remembered(entity: &Value, field: &str, text: &str) {
    assert!(entity.get("forgotten").is_none(), "{entity}");
    assert_eq!(entity[field], text, "{entity}");
}

/// `GET path` at `min`, asserting the answer is the documented one.
async fn documented_read(
    svc: &TestService,
    doc: &Value,
    (template, path): (&str, &str),
    min: &str,
) -> Value {
    let r: Response = crate::reads::get(svc, path, Some(min)).await;
    assert_eq!(r.status, 200, "{path}: {}", r.text);
    assert_answer(doc, "get", template, &r);
    r.json
}

/// The items of a list, by id.
fn by_id<'a>(page: &'a Value, id: &str) -> &'a Value {
    page["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["id"] == id))
        .unwrap_or_else(|| panic!("no {id} in {page}"))
}

/// Every personal text the read model's views hold.
async fn view_texts(db: &TestDb) -> String {
    let store = Database::connect(&db.url, 2, std::time::Duration::from_secs(5))
        .await
        .expect("connect");
    let mut all = String::new();
    for (view, columns) in [
        ("actors", "display_name, external_identity"),
        ("conversations", "title, latest_checkpoint_summary"),
        ("conversation_checkpoints", "summary"),
        ("tasks", "instructions"),
        ("messages", "content, external_identity"),
    ] {
        let rows = store
            .fetch_all(&format!("SELECT {columns} FROM {view}"), Args::new())
            .await
            .expect("the view reads");
        for row in rows {
            for column in columns.split(", ") {
                all.push_str(&row.opt_string(column).expect("text").unwrap_or_default());
                all.push('\n');
            }
        }
    }
    all
}

/// Rebuilds the read model and asserts it skipped no fact.
async fn rebuild(svc: &TestService) {
    crate::reads::rebuild(svc).await;
    let processors = svc.get(Some(ADMIN), "/v1/admin/processors").await;
    assert!(
        processors.text.contains("(0 skipped)"),
        "{}",
        processors.text
    );
}

async fn forgetting_an_actor_nulls_their_name_and_what_they_wrote_only(db: TestDb) {
    let svc = TestService::start_with(config(&db)).await;
    let doc = svc.get(None, "/openapi.json").await.json;
    let m = write(&svc).await;
    let at = forget(&svc, &format!("actors/{}", m.ada)).await;
    an_actor_forgotten(&svc, &db, &doc, &m, &at).await;
    rebuild(&svc).await;
    an_actor_forgotten(&svc, &db, &doc, &m, &at).await;
    svc.stop().await;
}

async fn an_actor_forgotten(svc: &TestService, db: &TestDb, doc: &Value, m: &Made, at: &str) {
    let ada = format!("/v1/actors/{}", m.ada);
    let ada = documented_read(svc, doc, ("/v1/actors/{id}", &ada), at).await;
    forgotten(&ada, &["display_name", "external_identity"]);
    assert_eq!(ada["id"], m.ada.as_str());
    assert_eq!(ada["kind"], "human");
    let bob = read(svc, &format!("/v1/actors/{}", m.bob), at).await;
    remembered(&bob, "display_name", &m.text("Bob"));

    let list = format!("/v1/conversations/{}/messages", m.shared);
    let messages = documented_read(svc, doc, ("/v1/conversations/{id}/messages", &list), at).await;
    forgotten(
        by_id(&messages, &m.ada_says),
        &["content", "external_identity"],
    );
    assert_eq!(by_id(&messages, &m.ada_says)["actor_id"], m.ada.as_str());
    remembered(
        by_id(&messages, &m.bob_says),
        "content",
        &m.text("Bob says"),
    );
    let one = format!("/v1/conversations/{}/messages/{}", m.shared, m.ada_says);
    let one = documented_read(
        svc,
        doc,
        ("/v1/conversations/{id}/messages/{child}", &one),
        at,
    )
    .await;
    forgotten(&one, &["content", "external_identity"]);

    let shared = read(svc, &format!("/v1/conversations/{}", m.shared), at).await;
    remembered(&shared, "title", &m.text("Shared"));
    assert_eq!(shared["message_count"], 2);
    let task = read(svc, &format!("/v1/tasks/{}", m.task), at).await;
    remembered(&task, "instructions", &m.text("Instructions"));

    let held = view_texts(db).await;
    for gone in ["Ada", "Ada-id", "Ada says", "Ada says-id"] {
        assert!(!held.contains(&m.text(gone)), "the views hold {gone:?}");
    }
    for kept in ["Bob", "Shared", "Summary", "Instructions", "Bob says"] {
        assert!(held.contains(&m.text(kept)), "the views lost {kept:?}");
    }
}

async fn forgetting_a_conversation_nulls_every_text_of_it_only(db: TestDb) {
    let svc = TestService::start_with(config(&db)).await;
    let doc = svc.get(None, "/openapi.json").await.json;
    let m = write(&svc).await;
    let at = forget(&svc, &format!("conversations/{}", m.shared)).await;
    a_conversation_forgotten(&svc, &db, &doc, &m, &at).await;
    rebuild(&svc).await;
    a_conversation_forgotten(&svc, &db, &doc, &m, &at).await;
    svc.stop().await;
}

async fn a_conversation_forgotten(svc: &TestService, db: &TestDb, doc: &Value, m: &Made, at: &str) {
    let path = format!("/v1/conversations/{}", m.shared);
    let shared = documented_read(svc, doc, ("/v1/conversations/{id}", &path), at).await;
    forgotten(&shared, &["title"]);
    assert_eq!(shared["latest_checkpoint"]["summary"], Value::Null);
    assert_eq!(shared["latest_checkpoint"]["id"], m.checkpoint.as_str());
    assert_eq!(
        (
            shared["checkpoint_count"].clone(),
            shared["message_count"].clone(),
            shared["task_count"].clone()
        ),
        (json!(1), json!(2), json!(1))
    );
    let list = documented_read(svc, doc, ("/v1/conversations", "/v1/conversations"), at).await;
    forgotten(by_id(&list, &m.shared), &["title"]);
    remembered(by_id(&list, &m.other), "title", &m.text("Other"));

    let path = format!("/v1/conversations/{}/checkpoints", m.shared);
    let checkpoints =
        documented_read(svc, doc, ("/v1/conversations/{id}/checkpoints", &path), at).await;
    forgotten(by_id(&checkpoints, &m.checkpoint), &["summary"]);
    let path = format!(
        "/v1/conversations/{}/checkpoints/{}",
        m.shared, m.checkpoint
    );
    let one = documented_read(
        svc,
        doc,
        ("/v1/conversations/{id}/checkpoints/{child}", &path),
        at,
    )
    .await;
    forgotten(&one, &["summary"]);

    let path = format!("/v1/tasks/{}", m.task);
    let task = documented_read(svc, doc, ("/v1/tasks/{id}", &path), at).await;
    forgotten(&task, &["instructions"]);
    assert_eq!(task["status"], "NOT_STARTED");
    let tasks = documented_read(svc, doc, ("/v1/tasks", "/v1/tasks"), at).await;
    forgotten(by_id(&tasks, &m.task), &["instructions"]);
    let path = format!("/v1/conversations/{}/tasks", m.shared);
    let tasks = documented_read(svc, doc, ("/v1/conversations/{id}/tasks", &path), at).await;
    forgotten(by_id(&tasks, &m.task), &["instructions"]);

    let path = format!("/v1/conversations/{}/messages", m.shared);
    let messages = documented_read(svc, doc, ("/v1/conversations/{id}/messages", &path), at).await;
    for said in [&m.ada_says, &m.bob_says] {
        forgotten(by_id(&messages, said), &["content", "external_identity"]);
    }
    let elsewhere = read(svc, &format!("/v1/conversations/{}/messages", m.other), at).await;
    remembered(
        by_id(&elsewhere, &m.other_says),
        "content",
        &m.text("Bob elsewhere"),
    );
    for actor in [&m.ada, &m.bob] {
        let a = read(svc, &format!("/v1/actors/{actor}"), at).await;
        assert!(a.get("forgotten").is_none(), "{a}");
    }

    let held = view_texts(db).await;
    for gone in [
        "Shared",
        "Summary",
        "Instructions",
        "Ada says",
        "Bob says",
        "Bob says-id",
    ] {
        assert!(!held.contains(&m.text(gone)), "the views hold {gone:?}");
    }
    for kept in ["Ada", "Bob", "Other", "Bob elsewhere"] {
        assert!(held.contains(&m.text(kept)), "the views lost {kept:?}");
    }
}

on_both_backends!(
    forgetting_an_actor_nulls_their_name_and_what_they_wrote_only,
    forgetting_a_conversation_nulls_every_text_of_it_only,
);
