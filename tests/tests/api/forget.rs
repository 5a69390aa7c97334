//! Forgetting a person and a conversation (TRUST.md "Forgetting a person", issue 33), at the
//! HTTP boundary on both stores, mid-flight: a turn claimed, one tool call done and one
//! waiting for approval when both are forgotten; the approval and the result come after.
//! From then on every reader shows the texts as `null` with `"forgotten": true` — the event
//! stream, the entities, the tool calls, a replayed `Idempotency-Key` — across a read-model
//! rebuild and a restart, and a dump of every table of the database finds none of them.
//! Forgetting twice answers the same and writes nothing.

use std::sync::Arc;

use pm_application::clock::ManualClock;
use pm_infrastructure::db::Args;
use pm_infrastructure::sql::Dialect;
use pm_infrastructure::Database;
use pm_tests::{on_both_backends, Response, TestDb, TestService, ADMIN, INGRESS, LLM};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::reads::read;
use crate::support::{assert_problem, created, events, post_with};
use crate::tools::start;
use crate::workers::{claimed_soon, epoch};

/// Texts no other test writes: finding one anywhere can only mean it was kept.
struct Texts {
    name: String,
    identity: String,
    title: String,
    summary: String,
    instructions: String,
    content: String,
    message_identity: String,
    arguments: String,
    output: String,
    waiting: String,
    comment: String,
    late_output: String,
    /// Written by someone who is not forgotten, in a conversation that is not: stays.
    kept: String,
}

impl Texts {
    fn new() -> Self {
        let tag = Uuid::new_v4().simple().to_string();
        let t = |what: &str| format!("{what} {tag}");
        Self {
            name: t("Alice Liddell"),
            identity: format!("github:alice-{tag}"),
            title: t("Alice's garden party"),
            summary: t("Alice wants the roses painted"),
            instructions: t("Paint the roses red"),
            content: t("My card number is 4111"),
            message_identity: format!("github:comment-{tag}"),
            arguments: t("rm -rf the hedge"),
            output: t("the hedge is gone"),
            waiting: t("paint the queen"),
            comment: t("the queen said yes"),
            late_output: t("the queen is red"),
            kept: t("The Hatter keeps this"),
        }
    }

    /// Every text that must be gone.
    fn forgotten(&self) -> [&str; 12] {
        [
            &self.name,
            &self.identity,
            &self.title,
            &self.summary,
            &self.instructions,
            &self.content,
            &self.message_identity,
            &self.arguments,
            &self.output,
            &self.waiting,
            &self.comment,
            &self.late_output,
        ]
    }
}

/// What [`write`] made.
struct Made {
    alice: String,
    conversation: String,
    message: String,
    turn: String,
    /// The Hatter, who is not forgotten, and his conversation.
    hatter: String,
    other_conversation: String,
}

async fn post(svc: &TestService, path: &str, body: Value) -> String {
    created(&svc.post(Some(ADMIN), path, &body).await)
}

/// Alice and a model in a conversation with a checkpoint, a task and Alice's message; the
/// model's turn claimed, one tool call done and one waiting for approval. The Hatter writes
/// in a conversation of his own.
async fn write(svc: &TestService, t: &Texts) -> Made {
    let alice = post(
        svc,
        "/v1/actors",
        json!({"kind": "human", "display_name": t.name, "external_identity": t.identity}),
    )
    .await;
    let model = post(
        svc,
        "/v1/actors",
        json!({"kind": "ai", "display_name": "Lin"}),
    )
    .await;
    let conversation = post(
        svc,
        "/v1/conversations",
        json!({"actor_ids": [alice, model], "title": t.title}),
    )
    .await;
    let checkpoint = post(
        svc,
        &format!("/v1/conversations/{conversation}/checkpoints"),
        json!({"checkpoint_type": "BEGIN_WORK", "summary": t.summary}),
    )
    .await;
    post(
        svc,
        &format!("/v1/conversations/{conversation}/tasks"),
        json!({"checkpoint_id": checkpoint, "instructions": t.instructions}),
    )
    .await;
    // Keyed, so that a replay of its answer can be asked for after the forgetting.
    let said = post_with(
        svc,
        Some(INGRESS),
        &format!("/v1/conversations/{conversation}/messages"),
        &json!({"actor_id": alice, "content": t.content, "external_identity": t.message_identity}),
        &[("Idempotency-Key", "alice-said")],
    )
    .await;
    let message = created(&said);
    let claimed = claimed_soon(svc).await;
    let epoch = epoch(&claimed);
    let turn = claimed.json["turn"]["id"]
        .as_str()
        .expect("a turn")
        .to_string();
    let calls = json!({"calls": [
        {"call_id": "a", "tool_name": "shell", "arguments": {"cmd": t.arguments}},
        {"call_id": "b", "tool_name": "shell", "arguments": {"cmd": t.waiting},
         "requires_approval": true, "policy_reason": "paints"},
    ]});
    // Reported by the model's principal: an approver never decides its own calls.
    let fence = epoch.to_string();
    let r = post_with(
        svc,
        Some(LLM),
        &format!("/v1/turns/{turn}/tool-calls"),
        &calls,
        &[
            ("PM-Turn-Id", turn.as_str()),
            ("PM-Turn-Epoch", fence.as_str()),
        ],
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let done = result(svc, &turn, "a", &t.output).await;
    assert!(done.status < 300, "{}", done.text);
    let hatter = post(
        svc,
        "/v1/actors",
        json!({"kind": "human", "display_name": "The Hatter"}),
    )
    .await;
    let other_conversation = post(
        svc,
        "/v1/conversations",
        json!({"actor_ids": [hatter], "title": "Tea"}),
    )
    .await;
    post(
        svc,
        &format!("/v1/conversations/{other_conversation}/messages"),
        json!({"actor_id": hatter, "content": t.kept}),
    )
    .await;
    Made {
        alice,
        conversation,
        message,
        turn,
        hatter,
        other_conversation,
    }
}

async fn result(svc: &TestService, turn: &str, call: &str, output: &str) -> Response {
    svc.post(
        Some(LLM),
        &format!("/v1/turns/{turn}/tool-calls/{call}/result"),
        &json!({"status": "success", "output": {"said": output}}),
    )
    .await
}

/// Forgets `path`'s party twice: the same answer, the second writing nothing. Answers the
/// first answer and its fact's position.
async fn forget(svc: &TestService, path: &str) -> (Value, String) {
    let first = svc.post(Some(ADMIN), path, &json!({})).await;
    assert_eq!(first.status, 200, "{path}: {}", first.text);
    let position = first
        .headers
        .get("x-event-position")
        .and_then(|v| v.to_str().ok())
        .expect("written")
        .to_string();
    let again = svc.post(Some(ADMIN), path, &json!({})).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json, first.json, "forgetting twice answers the same");
    assert!(
        !again.headers.contains_key("x-event-position"),
        "nothing written"
    );
    (first.json, position)
}

/// Every text of the forgotten parties reads `null`, marked forgotten, in the event stream;
/// the Hatter's do not.
async fn the_log_shows_null(svc: &TestService, made: &Made, t: &Texts) {
    let seen = events(svc, &format!("conversation_id={}", made.conversation)).await;
    let all = serde_json::to_string(&seen).expect("json");
    for text in t.forgotten() {
        assert!(!all.contains(text), "{text:?} is in the event stream");
    }
    let of = |id: &str| {
        seen.iter()
            .find(|e| e["data"]["id"] == id)
            .unwrap_or_else(|| panic!("no event of {id}"))["data"]
            .clone()
    };
    let message = of(&made.message);
    assert_eq!(message["content"], Value::Null, "{message}");
    assert_eq!(message["external_identity"], Value::Null, "{message}");
    assert_eq!(message["forgotten"], true, "{message}");
    let conversation = of(&made.conversation);
    assert_eq!(conversation["title"], Value::Null, "{conversation}");
    assert_eq!(conversation["forgotten"], true);
    let runes: Vec<&Value> = seen
        .iter()
        .filter(|e| e["type"] == "tool.call" || e["type"] == "tool.result")
        .collect();
    assert!(runes.len() >= 3, "{runes:?}");
    for rune in runes {
        assert_eq!(rune["data"]["forgotten"], true, "{rune}");
    }
    let actors = events(svc, "types=project_manager.actor.registered").await;
    let alice = actors
        .iter()
        .find(|e| e["data"]["id"] == made.alice.as_str())
        .expect("Alice's registration");
    assert_eq!(alice["data"]["display_name"], Value::Null, "{alice}");
    assert_eq!(alice["data"]["external_identity"], Value::Null);
    assert_eq!(alice["data"]["forgotten"], true);
    let hatter = actors
        .iter()
        .find(|e| e["data"]["id"] == made.hatter.as_str())
        .expect("the Hatter's registration");
    assert_eq!(hatter["data"]["display_name"], "The Hatter");
    let kept = events(svc, &format!("conversation_id={}", made.other_conversation)).await;
    assert!(
        serde_json::to_string(&kept)
            .expect("json")
            .contains(&t.kept),
        "what nobody forgot reads as written"
    );
}

/// The tool calls show no argument, output or comment; their states stay.
async fn the_tool_calls_show_null(svc: &TestService, made: &Made) {
    let r = svc
        .get(
            Some(ADMIN),
            &format!("/v1/tool-calls?turn_id={}", made.turn),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let calls = r.json["items"].as_array().expect("items");
    assert_eq!(calls.len(), 2, "{}", r.text);
    for call in calls {
        assert_eq!(call["arguments"], Value::Null, "{call}");
        assert!(call["result"]["output"].is_null(), "{call}");
        assert!(call["comment"].is_null(), "{call}");
        assert_eq!(call["result"]["status"], "success", "{call}");
    }
}

/// Every row of every table of the database, as text.
async fn dump(store: &Database) -> String {
    let tables_sql = match store.dialect() {
        Dialect::Postgres => {
            "SELECT table_name AS n FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        }
        Dialect::Sqlite => "SELECT name AS n FROM sqlite_master WHERE type = 'table'",
    };
    let tables: Vec<String> = store
        .fetch_all(tables_sql, Args::new())
        .await
        .expect("tables")
        .iter()
        .map(|r| r.string("n").expect("name"))
        .collect();
    assert!(tables.iter().any(|t| t == "events"), "{tables:?}");
    let mut all = String::new();
    for table in &tables {
        let sql = match store.dialect() {
            Dialect::Postgres => format!("SELECT t::text AS n FROM \"{table}\" t"),
            Dialect::Sqlite => {
                let columns: Vec<String> = store
                    .fetch_all(
                        &format!("SELECT name AS n FROM pragma_table_info('{table}')"),
                        Args::new(),
                    )
                    .await
                    .expect("columns")
                    .iter()
                    .map(|r| {
                        let c = r.string("n").expect("column");
                        // A blob as hex: keys are bytes, and not text.
                        format!(
                            "COALESCE(CASE typeof(\"{c}\") WHEN 'blob' THEN hex(\"{c}\") \
                             ELSE CAST(\"{c}\" AS TEXT) END, '')"
                        )
                    })
                    .collect();
                format!(
                    "SELECT {} AS n FROM \"{table}\"",
                    columns.join(" || '|' || ")
                )
            }
        };
        for row in store.fetch_all(&sql, Args::new()).await.expect("rows") {
            all.push_str(&row.opt_string("n").expect("text").unwrap_or_default());
            all.push('\n');
        }
    }
    all
}

async fn the_database_holds_none(db: &TestDb, t: &Texts) {
    let store = Database::connect(&db.url, 2, std::time::Duration::from_secs(5))
        .await
        .expect("connect");
    let all = dump(&store).await;
    for text in t.forgotten() {
        assert!(!all.contains(text), "{text:?} is still in the database");
    }
    assert!(
        all.contains(&t.kept),
        "the dump reads the tables it searches"
    );
}

async fn forgetting_a_person_and_a_conversation_mid_flight(db: TestDb) {
    let t = Texts::new();
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock).await;
    let made = write(&svc, &t).await;

    let (actor, _) = forget(&svc, &format!("/v1/actors/{}/forget", made.alice)).await;
    assert_eq!(actor["id"], made.alice.as_str());
    assert!(actor["forgotten_at"].is_string(), "{actor}");
    let (conversation, forgotten_at) = forget(
        &svc,
        &format!("/v1/conversations/{}/forget", made.conversation),
    )
    .await;
    assert_eq!(conversation["id"], made.conversation.as_str());
    let missing = svc
        .post(
            Some(ADMIN),
            &format!("/v1/actors/{}/forget", Uuid::now_v7()),
            &json!({}),
        )
        .await;
    assert_problem(&missing, 404, "actor_not_found");
    let not_admin = svc
        .post(
            Some(INGRESS),
            &format!("/v1/actors/{}/forget", made.hatter),
            &json!({}),
        )
        .await;
    assert_eq!(not_admin.status, 403, "{}", not_admin.text);

    // The flight goes on: the waiting call approved with a comment, and its result.
    let approved = svc
        .post(
            Some(ADMIN),
            &format!("/v1/turns/{}/tool-calls/b/approve", made.turn),
            &json!({"comment": t.comment}),
        )
        .await;
    assert!(approved.status < 300, "{}", approved.text);
    let late = result(&svc, &made.turn, "b", &t.late_output).await;
    assert!(late.status < 300, "{}", late.text);
    // Nothing is stuck: the turn resumes with its calls' results, and its context — read
    // from the read model, which shows a forgetting from its position on, like every read
    // (under load it may not have reached it yet when the claim is read) — quotes none of
    // the forgotten texts.
    read(&svc, &format!("/v1/actors/{}", made.hatter), &forgotten_at).await;
    let resumed = claimed_soon(&svc).await;
    assert_eq!(resumed.status, 200, "{}", resumed.text);
    assert_eq!(resumed.json["turn"]["id"], made.turn.as_str());
    for text in t.forgotten() {
        assert!(!resumed.text.contains(text), "{text:?} in {}", resumed.text);
    }
    assert_eq!(resumed.json["context"]["message"]["forgotten"], true);

    // A replayed Idempotency-Key answers the log's nulls.
    let replay = post_with(
        &svc,
        Some(INGRESS),
        &format!("/v1/conversations/{}/messages", made.conversation),
        &json!({"actor_id": made.alice, "content": t.content, "external_identity": t.message_identity}),
        &[("Idempotency-Key", "alice-said")],
    )
    .await;
    assert!(!replay.text.contains(&t.content), "{}", replay.text);

    the_log_shows_null(&svc, &made, &t).await;
    the_tool_calls_show_null(&svc, &made).await;
    crate::reads::rebuild(&svc).await;
    svc.stop().await;

    let svc = start(&db, &clock).await;
    the_log_shows_null(&svc, &made, &t).await;
    the_tool_calls_show_null(&svc, &made).await;
    svc.stop().await;
    the_database_holds_none(&db, &t).await;
}

/// A second replica that read Alice's texts (its keys in memory) shows `null` as soon as the
/// first has forgotten her: it hears of the forgetting (PostgreSQL's `NOTIFY`) and drops the
/// key, and an identical repeat of her message is no longer answered from its memory.
async fn a_forgetting_reaches_every_replica(db: TestDb) {
    let t = Texts::new();
    let clock = Arc::new(ManualClock::new());
    let first = start(&db, &clock).await;
    let second = start(&db, &clock).await;
    let alice = post(
        &first,
        "/v1/actors",
        json!({"kind": "human", "display_name": t.name}),
    )
    .await;
    let conversation = post(
        &first,
        "/v1/conversations",
        json!({"actor_ids": [alice], "title": t.title}),
    )
    .await;
    let said =
        json!({"actor_id": alice, "content": t.content, "external_identity": t.message_identity});
    let path = format!("/v1/conversations/{conversation}/messages");
    post(&second, &path, said.clone()).await;
    let before = events(&second, &format!("conversation_id={conversation}")).await;
    assert!(serde_json::to_string(&before)
        .expect("json")
        .contains(&t.content));

    forget(&first, &format!("/v1/actors/{alice}/forget")).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let seen = events(&second, &format!("conversation_id={conversation}")).await;
        let text = serde_json::to_string(&seen).expect("json");
        if !text.contains(&t.content) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the second replica still shows the text: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let repeated = second.post(Some(ADMIN), &path, &said).await;
    assert!(!repeated.text.contains(&t.content), "{}", repeated.text);
    first.stop().await;
    second.stop().await;
}

on_both_backends!(
    forgetting_a_person_and_a_conversation_mid_flight,
    a_forgetting_reaches_every_replica,
);
