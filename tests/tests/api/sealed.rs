//! Personal texts at rest (TRUST.md "Forgetting a person", issue 33): every name, title,
//! summary, instruction and message is stored in the log sealed under its actor's and
//! conversation's keys — the `events` table holds none of them — and every reader (the
//! entities, the event stream, a restart's aggregates) reads them as written. A sealed
//! text copied onto another event does not open there: it reads `null`, never a 500.

use pm_infrastructure::db::Args;
use pm_infrastructure::keys::sealing::{Place, Unreadable};
use pm_infrastructure::keys::KeyStore;
use pm_infrastructure::sql::Dialect;
use pm_infrastructure::Database;
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::{config, created, events};

/// Texts no other test writes, so finding one in a table can only mean it was stored.
struct Texts {
    name: String,
    title: String,
    summary: String,
    instructions: String,
    content: String,
    identity: String,
    other: String,
}

impl Texts {
    fn new() -> Self {
        let tag = Uuid::new_v4().simple().to_string();
        Self {
            name: format!("Alice Liddell {tag}"),
            title: format!("Alice's garden party {tag}"),
            summary: format!("Alice wants the roses painted {tag}"),
            instructions: format!("Paint the roses red {tag}"),
            content: format!("My card number is 4111 {tag}"),
            identity: format!("github:alice-comment-{tag}"),
            other: format!("Off with their heads {tag}"),
        }
    }

    fn all(&self) -> [&str; 7] {
        [
            &self.identity,
            &self.name,
            &self.title,
            &self.summary,
            &self.instructions,
            &self.content,
            &self.other,
        ]
    }
}

/// Ids of what [`write`] made.
struct Made {
    actor: String,
    conversation: String,
    message: String,
    other: String,
    /// The last write's log position: reads of the read model wait for it.
    position: String,
}

async fn write(svc: &TestService, t: &Texts) -> Made {
    let actor = created(
        &svc.post(
            Some(ADMIN),
            "/v1/actors",
            &json!({"kind": "human", "display_name": t.name}),
        )
        .await,
    );
    let conversation = created(
        &svc.post(
            Some(ADMIN),
            "/v1/conversations",
            &json!({"actor_ids": [actor], "title": t.title}),
        )
        .await,
    );
    let checkpoint = created(
        &svc.post(
            Some(ADMIN),
            &format!("/v1/conversations/{conversation}/checkpoints"),
            &json!({"checkpoint_type": "BEGIN_WORK", "summary": t.summary}),
        )
        .await,
    );
    created(
        &svc.post(
            Some(ADMIN),
            &format!("/v1/conversations/{conversation}/tasks"),
            &json!({"checkpoint_id": checkpoint, "instructions": t.instructions}),
        )
        .await,
    );
    let path = format!("/v1/conversations/{conversation}/messages");
    let message = created(&svc.post(Some(ADMIN), &path, &said(&actor, t)).await);
    let last = svc
        .post(
            Some(ADMIN),
            &path,
            &json!({"actor_id": actor, "content": t.other}),
        )
        .await;
    let other = created(&last);
    let position = last
        .header("x-event-position")
        .expect("the write's position")
        .to_string();
    Made {
        actor,
        conversation,
        message,
        other,
        position,
    }
}

/// The message of [`Texts::content`], with its external identity.
fn said(actor: &str, t: &Texts) -> Value {
    json!({"actor_id": actor, "content": t.content, "external_identity": t.identity})
}

async fn database(db: &TestDb) -> Database {
    Database::connect(&db.url, 2, std::time::Duration::from_secs(5))
        .await
        .expect("connect")
}

/// Every payload of the log, as text.
async fn payloads(db: &Database) -> String {
    db.fetch_all("SELECT payload FROM events", Args::new())
        .await
        .expect("read the log")
        .iter()
        .map(|r| r.string("payload").expect("payload"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `data` of the event of entity `id` in `events`.
fn data_of<'a>(events: &'a [Value], id: &str) -> &'a Value {
    &events
        .iter()
        .find(|e| e["data"]["id"] == id)
        .unwrap_or_else(|| panic!("no event of {id}"))["data"]
}

/// The entities and the event stream show `t` as written.
async fn reads_as_written(svc: &TestService, made: &Made, t: &Texts) {
    let seen = events(svc, &format!("conversation_id={}", made.conversation)).await;
    assert_eq!(data_of(&seen, &made.message)["content"], t.content.as_str());
    assert_eq!(
        data_of(&seen, &made.message)["external_identity"],
        t.identity.as_str()
    );
    assert_eq!(
        data_of(&seen, &made.conversation)["title"],
        t.title.as_str()
    );
    let actor = svc
        .get(
            Some(ADMIN),
            &format!("/v1/actors/{}?min_position={}", made.actor, made.position),
        )
        .await;
    assert_eq!(
        actor.json["display_name"],
        t.name.as_str(),
        "{}",
        actor.json
    );
}

async fn texts_are_stored_sealed_and_read_as_written(db: TestDb) {
    let t = Texts::new();
    let svc = TestService::start_with(config(&db)).await;
    let made = write(&svc, &t).await;
    let raw = payloads(&database(&db).await).await;
    for text in t.all() {
        assert!(!raw.contains(text), "{text:?} is in the log as written");
    }
    assert!(raw.contains("\"sealed\""), "the texts are sealed: {raw}");

    reads_as_written(&svc, &made, &t).await;
    svc.stop().await;

    // A restart reads them with the stored keys; the aggregates fold them as written: the
    // same message again (a retried request) is the same message, not a conflict.
    let svc = TestService::start_with(config(&db)).await;
    reads_as_written(&svc, &made, &t).await;
    let again = svc
        .post(
            Some(ADMIN),
            &format!("/v1/conversations/{}/messages", made.conversation),
            &said(&made.actor, &t),
        )
        .await;
    assert!(again.status < 300, "{} {}", again.status, again.json);
    assert_eq!(again.json["id"], made.message.as_str());
    svc.stop().await;
}

async fn a_sealed_text_copied_onto_another_event_reads_null(db: TestDb) {
    let t = Texts::new();
    let svc = TestService::start_with(config(&db)).await;
    let made = write(&svc, &t).await;
    let store = database(&db).await;
    let payload_of = |id: String| {
        let store = &store;
        async move {
            let row = store
                .fetch_optional(
                    "SELECT payload FROM events WHERE aggregate_type = 'message' \
                     AND aggregate_id = $1",
                    Args::new().text(id),
                )
                .await
                .expect("read")
                .expect("the message's fact");
            serde_json::from_str::<Value>(&row.string("payload").expect("payload")).expect("json")
        }
    };
    let mut other = payload_of(made.other.clone()).await;
    other["content"] = payload_of(made.message.clone()).await["content"].clone();
    let sql = match store.dialect() {
        Dialect::Postgres => {
            "UPDATE events SET payload = CAST($1 AS json) \
             WHERE aggregate_type = 'message' AND aggregate_id = $2"
        }
        Dialect::Sqlite => {
            "UPDATE events SET payload = $1 WHERE aggregate_type = 'message' AND aggregate_id = $2"
        }
    };
    store
        .execute(
            sql,
            Args::new().text(other.to_string()).text(made.other.clone()),
        )
        .await
        .expect("copied");

    let seen = events(&svc, &format!("conversation_id={}", made.conversation)).await;
    assert_eq!(data_of(&seen, &made.other)["content"], Value::Null);
    assert!(
        data_of(&seen, &made.other).get("forgotten").is_none(),
        "refused, not forgotten"
    );
    assert_eq!(
        data_of(&seen, &made.message)["content"],
        t.content.as_str(),
        "the original still opens where it belongs"
    );
    let metrics = svc.get(Some(ADMIN), "/metrics").await.text;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("pm_sealed_refused_total ")),
        "{metrics}"
    );
    svc.stop().await;
}

/// Turns `db`'s log into what a version before sealing wrote: every text in the clear, no
/// keys, no record of a sealing pass.
async fn as_an_earlier_version_wrote_it(store: &Database) {
    let keys = KeyStore::open(store, None, None, 64).await.expect("keys");
    let rows = store
        .fetch_all(
            "SELECT global_position, aggregate_type, aggregate_id, sequence, event_type, \
             payload FROM events",
            Args::new(),
        )
        .await
        .expect("read the log");
    let update = match store.dialect() {
        Dialect::Postgres => {
            "UPDATE events SET payload = CAST($1 AS json) WHERE global_position = $2"
        }
        Dialect::Sqlite => "UPDATE events SET payload = $1 WHERE global_position = $2",
    };
    for row in &rows {
        let place = Place {
            event_type: row.str("event_type").expect("type"),
            aggregate_type: row.str("aggregate_type").expect("type"),
            aggregate_id: row.str("aggregate_id").expect("id"),
            sequence: row.int("sequence").expect("sequence"),
            conversation_id: None,
        };
        let mut payload: Value =
            serde_json::from_str(&row.string("payload").expect("payload")).expect("json");
        keys.open_payload(&place, &mut payload, Unreadable::Null)
            .await
            .expect("opened");
        let args = Args::new()
            .text(payload.to_string())
            .int(row.int("global_position").expect("position"));
        store.execute(update, args).await.expect("rewritten");
    }
    for table in ["pm_keys", "pm_log_sealing"] {
        store
            .execute(&format!("DELETE FROM {table}"), Args::new())
            .await
            .expect("emptied");
    }
}

async fn an_earlier_versions_clear_texts_are_sealed_in_place(db: TestDb) {
    let t = Texts::new();
    let svc = TestService::start_with(config(&db)).await;
    let made = write(&svc, &t).await;
    svc.stop().await;
    let store = database(&db).await;
    as_an_earlier_version_wrote_it(&store).await;
    let raw = payloads(&store).await;
    assert!(
        t.all().iter().all(|text| raw.contains(text)),
        "in the clear"
    );

    // Read as written at once (clear texts open as they are), sealed in place meanwhile.
    let svc = TestService::start_with(config(&db)).await;
    reads_as_written(&svc, &made, &t).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let raw = payloads(&store).await;
        let left: Vec<&str> = t.all().into_iter().filter(|x| raw.contains(x)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still in the clear: {left:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let pass = store
        .fetch_optional(
            "SELECT up_to, sealed_through, finished_at FROM pm_log_sealing",
            Args::new(),
        )
        .await
        .expect("read")
        .expect("the pass's row");
    assert!(pass.int("up_to").expect("up_to") > 0);
    assert_eq!(pass.int("sealed_through").ok(), pass.int("up_to").ok());
    reads_as_written(&svc, &made, &t).await;
    svc.stop().await;
    // A restart finds the pass done and reads the same.
    let svc = TestService::start_with(config(&db)).await;
    reads_as_written(&svc, &made, &t).await;
    svc.stop().await;
}

/// A party's first fact stores its key with it, in the same statement; when a key is there
/// already (made by another writer first), the fact is sealed with the stored one — never
/// stored under a key that was not.
async fn a_first_fact_whose_key_is_there_already_is_sealed_with_it(db: TestDb) {
    let t = Texts::new();
    let svc = TestService::start_with(config(&db)).await;
    let id = pm_domain::ids::actor_id(&t.identity);
    let store = database(&db).await;
    let keys = KeyStore::open(&store, None, None, 64).await.expect("keys");
    keys.key_made(pm_infrastructure::keys::Scope::Actor, id)
        .await
        .expect("made first");
    let r = svc
        .post(
            Some(ADMIN),
            "/v1/actors",
            &json!({"kind": "human", "display_name": t.name, "external_identity": t.identity}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["id"], id.to_string());
    let keys_of_actor = store
        .fetch_all(
            "SELECT material FROM pm_keys WHERE scope = 'actor' AND id = $1",
            Args::new().uuid(id),
        )
        .await
        .expect("keys");
    assert_eq!(keys_of_actor.len(), 1);
    let registered = events(&svc, "types=project_manager.actor.registered").await;
    assert_eq!(
        data_of(&registered, &id.to_string())["display_name"],
        t.name.as_str()
    );
    // And a new actor's key is stored with its registration.
    let other = created(
        &svc.post(
            Some(ADMIN),
            "/v1/actors",
            &json!({"kind": "human", "display_name": t.other}),
        )
        .await,
    );
    let stored = store
        .fetch_all(
            "SELECT material FROM pm_keys WHERE scope = 'actor' AND id = $1",
            Args::new().uuid(other.parse().expect("uuid")),
        )
        .await
        .expect("keys");
    assert_eq!(stored.len(), 1, "the key is stored with the fact");
    let conversation = created(
        &svc.post(
            Some(ADMIN),
            "/v1/conversations",
            &json!({"actor_ids": [other], "title": t.title}),
        )
        .await,
    );
    stored_by_its_fact(&store, "actor", &other).await;
    stored_by_its_fact(&store, "conversation", &conversation).await;
    svc.stop().await;
    let svc = TestService::start_with(config(&db)).await;
    let registered = events(&svc, "types=project_manager.actor.registered").await;
    assert_eq!(
        data_of(&registered, &other)["display_name"],
        t.other.as_str()
    );
    svc.stop().await;
}

/// On PostgreSQL: the key of `scope` `id` was written by the transaction that wrote the
/// party's first fact (the rows' `xmin`) — not by a statement of its own before it, one
/// more round trip and commit per new actor or conversation. SQLite's rows do not name
/// their transaction; its appender takes the same path.
async fn stored_by_its_fact(store: &Database, scope: &str, id: &str) {
    if store.dialect() != Dialect::Postgres {
        return;
    }
    let row = store
        .fetch_optional(
            "SELECT (SELECT xmin::text FROM pm_keys WHERE scope = $1 AND id = $2) AS key_tx, \
             (SELECT xmin::text FROM events WHERE aggregate_type = $1 AND aggregate_id = $3 \
              AND sequence = 1) AS fact_tx",
            Args::new()
                .text(scope)
                .uuid(id.parse().expect("uuid"))
                .text(id),
        )
        .await
        .expect("transaction ids")
        .expect("a row");
    let key_tx = row.opt_string("key_tx").expect("key_tx");
    let fact_tx = row.opt_string("fact_tx").expect("fact_tx");
    assert!(key_tx.is_some(), "the {scope}'s key is stored");
    assert_eq!(
        key_tx, fact_tx,
        "the {scope}'s key is written with its first fact"
    );
}

on_both_backends!(
    a_first_fact_whose_key_is_there_already_is_sealed_with_it,
    texts_are_stored_sealed_and_read_as_written,
    a_sealed_text_copied_onto_another_event_reads_null,
    an_earlier_versions_clear_texts_are_sealed_in_place,
);
