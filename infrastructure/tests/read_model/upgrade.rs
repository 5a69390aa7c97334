//! A read model made by the version before forgetting is upgraded in place at start-up
//! ([`ensure_schema`]): its rows are copied into a new generation with nullable personal
//! texts and `forgotten`, the views point at it and serve the same rows, the projection
//! can forget in it, and a second start changes nothing — without the log (this database
//! has none). On PostgreSQL the new tables are protected for analysts as a start's are. A
//! party an earlier version forgot (its key a tombstone) without clearing the read model
//! is cleared by the upgrade.

use chrono::{TimeZone, Utc};
use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::processor::BatchHandler;
use pm_domain::forgetting::ACTOR_FORGOTTEN;
use pm_infrastructure::db::Args;
use pm_infrastructure::read_model::rebuild::ensure_schema;
use pm_infrastructure::read_model::schema::{view_statements, FORGETTABLE, TABLES};
use pm_infrastructure::read_model::{ReadModelProjection, READ_MODEL};
use pm_infrastructure::sql::Dialect;
use pm_infrastructure::Database;
use pm_test_db::TestDb;
use serde_json::json;
use uuid::Uuid;

use super::old_schema::old_create_statements;
use super::{dump, Row};

const ACTOR: Uuid = Uuid::from_u128(1);
const CONVERSATION: Uuid = Uuid::from_u128(2);
const CHECKPOINT: Uuid = Uuid::from_u128(3);
const TASK: Uuid = Uuid::from_u128(4);

/// Runs `statements` in one transaction.
async fn run(db: &Database, statements: Vec<(String, Args)>) {
    let mut tx = db.begin().await.expect("begin");
    for (sql, args) in statements {
        tx.execute(&sql, args)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    tx.commit().await.expect("commit");
}

/// What the earlier version's start and projection left: generation 1's tables and views,
/// one row in each table.
async fn an_old_read_model(db: &Database) {
    let ddl = old_create_statements(db.dialect(), 1)
        .into_iter()
        .chain(view_statements(1))
        .map(|s| (s, Args::new()));
    run(db, ddl.collect()).await;
    let at = Utc.with_ymd_and_hms(2026, 11, 22, 0, 0, 0).single();
    let at = at.expect("a time");
    let row = |sql: &str, args: Args| (sql.to_string(), args);
    run(
        db,
        vec![
            row(
                "INSERT INTO rm_g1_actors (id, kind, display_name, external_identity, created_at) \
                 VALUES ($1, 'human', 'Ada', 'ada@example.com', $2)",
                Args::new().uuid(ACTOR).time(&at),
            ),
            row(
                "INSERT INTO rm_g1_conversations (id, title, actor_ids, organization, created_at, updated_at, \
                 latest_checkpoint_id, latest_checkpoint_type, latest_checkpoint_summary, latest_checkpoint_at, \
                 checkpoint_count, message_count, task_count, tasks_not_started) \
                 VALUES ($1, 'Fix it', $2, 'acme', $3, $3, $4, 'BEGIN_WORK', 'go', $3, 1, 1, 1, 1)",
                Args::new()
                    .uuid(CONVERSATION)
                    .text(format!("[\"{ACTOR}\"]"))
                    .time(&at)
                    .uuid(CHECKPOINT),
            ),
            row(
                "INSERT INTO rm_g1_conversation_actors (conversation_id, actor_id, ordinal) VALUES ($1, $2, 0)",
                Args::new().uuid(CONVERSATION).uuid(ACTOR),
            ),
            row(
                "INSERT INTO rm_g1_conversation_checkpoints (id, conversation_id, checkpoint_type, summary, created_at, log_txid, log_seq) \
                 VALUES ($1, $2, 'BEGIN_WORK', 'go', $3, 0, 3)",
                Args::new().uuid(CHECKPOINT).uuid(CONVERSATION).time(&at),
            ),
            row(
                "INSERT INTO rm_g1_tasks (id, conversation_id, checkpoint_id, instructions, organization, created_at, status) \
                 VALUES ($1, $2, $3, 'do it', 'acme', $4, 'NOT_STARTED')",
                Args::new().uuid(TASK).uuid(CONVERSATION).uuid(CHECKPOINT).time(&at),
            ),
            row(
                "INSERT INTO rm_g1_task_checkpoints (id, task_id, sequence, type, created_at) \
                 VALUES ($1, $2, 2, 'WORK_STARTED', $3)",
                Args::new().uuid(Uuid::from_u128(5)).uuid(TASK).time(&at),
            ),
            row(
                "INSERT INTO rm_g1_messages (id, conversation_id, actor_id, task_id, content, external_identity, time, log_txid, log_seq) \
                 VALUES ($1, $2, $3, $4, 'hello', 'm-1', $5, 0, 6)",
                Args::new()
                    .uuid(Uuid::from_u128(6))
                    .uuid(CONVERSATION)
                    .uuid(ACTOR)
                    .uuid(TASK)
                    .time(&at),
            ),
        ],
    )
    .await;
}

async fn generation(db: &Database) -> i64 {
    db.fetch_optional(
        "SELECT generation FROM processors WHERE name = $1",
        Args::new().text(READ_MODEL),
    )
    .await
    .expect("read")
    .expect("the processor's row")
    .int("generation")
    .expect("a generation")
}

/// The rows of the upgraded generation without their `forgotten` (the last column),
/// which must be false.
fn without_forgotten(tables: Vec<(String, Vec<Row>)>) -> Vec<(String, Vec<Row>)> {
    tables
        .into_iter()
        .map(|(name, rows)| {
            let rows = if FORGETTABLE.contains(&name.as_str()) {
                rows.into_iter()
                    .map(|mut row| {
                        let forgotten = row.pop().flatten();
                        assert!(
                            matches!(forgotten.as_deref(), Some("false" | "0")),
                            "{name}: forgotten is {forgotten:?}"
                        );
                        row
                    })
                    .collect()
            } else {
                rows
            };
            (name, rows)
        })
        .collect()
}

/// `actor.forgotten` of [`ACTOR`] at log position 1.
fn forgetting() -> LoggedEvent {
    LoggedEvent {
        position: LogPosition(1),
        aggregate_type: "actor".into(),
        aggregate_id: ACTOR.to_string(),
        sequence: 2,
        event_type: ACTOR_FORGOTTEN.into(),
        event_version: "1.0".into(),
        payload: json!({"id": ACTOR, "forgotten_at": "2026-11-23T00:00:00.000000Z"}).into(),
        metadata: json!({"recorded_at": "2026-11-23T00:00:00.000000Z"}).into(),
        conversation_id: None,
        organization: None,
    }
}

async fn an_old_read_model_is_upgraded_in_place_at_start(db: TestDb) {
    let database = super::support::migrated(&db, 4).await;
    super::support::processor_row(&database, READ_MODEL).await;
    an_old_read_model(&database).await;
    let postgres = database.dialect() == Dialect::Postgres;
    if postgres {
        // Analysts were registered: every start protects the current generation.
        database
            .execute(
                "CREATE TABLE analyst_roles (role_name text PRIMARY KEY, organization text NOT NULL)",
                Args::new(),
            )
            .await
            .expect("analyst_roles");
    }
    let before = dump(&database, 1).await;

    ensure_schema(&database).await.expect("the start upgrades");

    assert_eq!(generation(&database).await, 2);
    assert_eq!(without_forgotten(dump(&database, 2).await), before);
    for name in TABLES {
        let old = format!("SELECT 1 FROM rm_g1_{name}");
        assert!(database.fetch_all(&old, Args::new()).await.is_err());
        let through_view = format!("SELECT COUNT(*) AS n FROM {name}");
        let n = database
            .fetch_optional(&through_view, Args::new())
            .await
            .expect("the view reads")
            .expect("a count")
            .int("n")
            .expect("a number");
        assert_eq!(n, 1, "the view {name} serves the copied row");
    }
    if postgres {
        let protected = database
            .fetch_optional(
                "SELECT relrowsecurity AS protected FROM pg_class WHERE relname = 'rm_g2_messages'",
                Args::new(),
            )
            .await
            .expect("the catalog")
            .expect("the new table");
        assert!(protected.bool("protected").expect("a flag"));
    }

    // The new generation forgets: its texts take NULL.
    let projection = ReadModelProjection::new(database.clone());
    projection
        .apply(LogPosition::START, &[forgetting()])
        .await
        .expect("the forgetting applies");
    let actor = database
        .fetch_optional(
            "SELECT display_name, forgotten FROM actors WHERE id = $1",
            Args::new().uuid(ACTOR),
        )
        .await
        .expect("read")
        .expect("the actor");
    assert_eq!(actor.opt_string("display_name").expect("text"), None);
    assert!(actor.bool("forgotten").expect("a flag"));

    // A second start finds the current schema and leaves it.
    ensure_schema(&database).await.expect("a second start");
    assert_eq!(generation(&database).await, 2);
}

/// A row of `sql` with `id` as `$1`: its `text` column and `forgotten`.
async fn text_of(db: &Database, sql: &str, id: Uuid) -> (Option<String>, bool) {
    let row = db
        .fetch_optional(sql, Args::new().uuid(id))
        .await
        .expect("read")
        .expect("the row");
    (
        row.opt_string("text").expect("text"),
        row.bool("forgotten").expect("a flag"),
    )
}

async fn a_party_forgotten_before_the_read_model_could_is_cleared_by_the_upgrade(db: TestDb) {
    let database = super::support::migrated(&db, 4).await;
    super::support::processor_row(&database, READ_MODEL).await;
    an_old_read_model(&database).await;
    // A version that destroyed keys before the read model cleared texts forgot Ada.
    database
        .execute(
            "INSERT INTO pm_keys (scope, id, material, wrapped, created_at) VALUES ('actor', $1, $2, $3, $4)",
            Args::new()
                .uuid(ACTOR)
                .bytes(Vec::new())
                .bool(false)
                .time(&Utc::now()),
        )
        .await
        .expect("a tombstone");

    ensure_schema(&database).await.expect("the start upgrades");

    let actor = "SELECT display_name AS text, forgotten FROM actors WHERE id = $1";
    assert_eq!(text_of(&database, actor, ACTOR).await, (None, true));
    let message = "SELECT content AS text, forgotten FROM messages WHERE actor_id = $1";
    assert_eq!(text_of(&database, message, ACTOR).await, (None, true));
    let conversation = "SELECT title AS text, forgotten FROM conversations WHERE id = $1";
    assert_eq!(
        text_of(&database, conversation, CONVERSATION).await,
        (Some("Fix it".into()), false)
    );
}

pm_test_db::on_both_backends!(
    an_old_read_model_is_upgraded_in_place_at_start,
    a_party_forgotten_before_the_read_model_could_is_cleared_by_the_upgrade,
);
