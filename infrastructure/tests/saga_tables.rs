//! The saga tables' definitions (`pm_infrastructure::sagas::tables`) against both stores:
//! the migrations made exactly the columns each definition states (name, type,
//! nullability), and an arbitrary row of each table's row type, written by the commit's
//! upsert and read back by the reads' select and decode, is the row written.

mod support;

use std::fmt::Debug;

use chrono::{DateTime, Utc};
use pm_application::sagas::PlacedCall;
use pm_application::views::{AnomalyInstance, AnomalyView};
use pm_domain::saga::{
    AgentRole, AgentState, AgentView, ConversationState, Deadline, DeadlineKind, HeadStatus,
    Instance, Lease, SessionState, SessionView, ToolCallState, ToolCallView, ToolResultView,
    ToolStatus, TurnInput, TurnKind, TurnState, TurnView,
};
use pm_infrastructure::db::Args;
use pm_infrastructure::sagas::table::{decode, upsert, Row, Table};
use pm_infrastructure::sagas::tables::{self, ArmedDeadline, Queued};
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;
use uuid::Uuid;

/// Rows tried per table and store.
const CASES: u32 = 24;

/// The columns of `relation` as the store describes them: (name, type, nullable).
async fn described(db: &Database, relation: &str) -> Vec<(String, String, bool)> {
    let rows = match db.dialect() {
        pm_infrastructure::sql::Dialect::Postgres => db
            .fetch_all(
                "SELECT column_name::text AS name, data_type::text AS ty, \
                 (is_nullable = 'YES') AS nullable FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1",
                Args::new().text(relation),
            )
            .await
            .expect("the catalog"),
        pm_infrastructure::sql::Dialect::Sqlite => db
            .fetch_all(
                "SELECT name, upper(type) AS ty, (\"notnull\" = 0 AND pk = 0) AS nullable \
                 FROM pragma_table_info($1)",
                Args::new().text(relation),
            )
            .await
            .expect("the catalog"),
    };
    let mut columns: Vec<(String, String, bool)> = rows
        .iter()
        .map(|r| {
            (
                r.string("name").expect("name"),
                r.string("ty").expect("type"),
                r.bool("nullable").expect("nullable"),
            )
        })
        .collect();
    columns.sort();
    columns
}

async fn migrations_make_the_defined_columns(db: TestDb) {
    let database = support::migrated(&db, 2).await;
    let dialect = database.dialect();
    for table in tables::all() {
        let mut defined: Vec<(String, String, bool)> = table
            .columns
            .iter()
            .map(|c| {
                let ty = match dialect {
                    pm_infrastructure::sql::Dialect::Postgres => c.ty.pg(),
                    pm_infrastructure::sql::Dialect::Sqlite => c.ty.sqlite(),
                };
                (c.name.to_string(), ty.to_string(), c.nullable)
            })
            .collect();
        defined.sort();
        assert_eq!(
            described(&database, table.name).await,
            defined,
            "{}: the migrations' columns are the definition's",
            table.name
        );
        // What reads select from has the table's columns and the derived ones.
        let mut readable: Vec<&str> = table
            .columns
            .iter()
            .chain(table.derived)
            .map(|c| c.name)
            .collect();
        readable.sort_unstable();
        let read_from = described(&database, table.read_from).await;
        let mut names: Vec<&str> = read_from.iter().map(|(n, _, _)| n.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, readable, "{}: what reads select", table.read_from);
    }
}

/// Writes `row` alone in its table (and `before` first, e.g. an agent's inbox) and reads
/// the table back.
async fn round_trip<R: Row + Clone + Debug + PartialEq>(
    db: &Database,
    before: impl AsyncFnOnce(&mut pm_infrastructure::db::Tx),
    row: &R,
) -> Vec<R> {
    let table: &Table = R::table();
    db.execute(&format!("DELETE FROM {}", table.name), Args::new())
        .await
        .expect("cleared");
    let mut tx = db.begin().await.expect("a transaction");
    before(&mut tx).await;
    upsert(&mut tx, std::slice::from_ref(row))
        .await
        .unwrap_or_else(|e| panic!("{row:?} is written: {e}"));
    tx.commit().await.expect("committed");
    let rows = db
        .fetch_all(
            &format!("SELECT {} FROM {}", table.select_list(), table.read_from),
            Args::new(),
        )
        .await
        .expect("read");
    rows.iter()
        .map(|r| decode(r).unwrap_or_else(|e| panic!("{row:?} reads back: {e}")))
        .collect()
}

/// `CASES` arbitrary rows of `strategy`, each written and read back equal.
async fn each_reads_back<R: Row + Clone + Debug + PartialEq>(
    db: &Database,
    strategy: impl Strategy<Value = R>,
) {
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        ..Config::default()
    });
    for _ in 0..CASES {
        let row = strategy.new_tree(&mut runner).expect("a row").current();
        assert_eq!(
            round_trip(db, async |_| {}, &row).await,
            std::slice::from_ref(&row),
            "{}",
            R::table().name
        );
    }
}

fn id() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

/// A time the stores keep (microseconds, years 1 to 9999).
fn time() -> impl Strategy<Value = DateTime<Utc>> {
    let (first, last) = (
        pm_domain::time::earliest().timestamp_micros(),
        pm_domain::time::latest().timestamp_micros(),
    );
    (first..=last).prop_map(|us| DateTime::from_timestamp_micros(us).expect("in range"))
}

/// Text without NUL (PostgreSQL's text has none): any other character, quotes included.
fn text() -> impl Strategy<Value = String> {
    "[^\u{0}]{0,24}"
}

/// A count a `bigint` holds.
fn count() -> impl Strategy<Value = u64> {
    0..=i64::MAX as u64
}

/// A count an `integer` holds.
fn small_count() -> impl Strategy<Value = u32> {
    0..=i32::MAX as u32
}

fn one_of<T: Copy + Debug + 'static>(all: &'static [T]) -> impl Strategy<Value = T> {
    proptest::sample::select(all)
}

/// A JSON document (integers only: a float's text need not read back to the same bits).
fn document() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn sessions() -> impl Strategy<Value = SessionView> {
    (
        (id(), one_of(SessionState::ALL)),
        proptest::option::of(one_of(ConversationState::ALL)),
        (proptest::option::of(id()), vec(id(), 0..4)),
        (proptest::option::of(id()), proptest::option::of(time())),
        (small_count(), count(), proptest::option::of(count())),
        (time(), time()),
    )
        .prop_map(
            |(
                (conversation_id, state),
                conversation_state,
                (root_agent_id, agent_ids),
                (waiting_checkpoint_id, waiting_since),
                (consecutive_errors, tokens_used, token_budget),
                (created_at, updated_at),
            )| SessionView {
                conversation_id,
                state,
                conversation_state,
                root_agent_id,
                agent_ids,
                waiting_checkpoint_id,
                waiting_since,
                consecutive_errors,
                tokens_used,
                token_budget,
                created_at,
                updated_at,
            },
        )
}

fn agents() -> impl Strategy<Value = AgentView> {
    (
        (id(), id(), proptest::option::of(id())),
        (one_of(AgentRole::ALL), one_of(AgentState::ALL)),
        (any::<i64>(), proptest::option::of(id())),
        (one_of(HeadStatus::ALL), vec(id(), 0..4), count()),
        (time(), time()),
    )
        .prop_map(
            |(
                (id, conversation_id, actor_id),
                (role, state),
                (turn_epoch, active_turn_id),
                (head_status, queued_turn_ids, tokens_used),
                (created_at, updated_at),
            )| AgentView {
                id,
                conversation_id,
                actor_id,
                role,
                state,
                turn_epoch,
                active_turn_id,
                head_status,
                queued_turn_ids,
                tokens_used,
                created_at,
                updated_at,
            },
        )
}

fn inputs() -> impl Strategy<Value = TurnInput> {
    prop_oneof![
        id().prop_map(|message_id| TurnInput::Message { message_id }),
        proptest::option::of(id())
            .prop_map(|checkpoint_id| TurnInput::AutoDecide { checkpoint_id }),
        id().prop_map(|task_id| TurnInput::Task { task_id }),
        (id(), id()).prop_map(|(task_id, task_checkpoint_id)| TurnInput::TaskRetry {
            task_id,
            task_checkpoint_id
        }),
    ]
}

fn turns() -> impl Strategy<Value = TurnView> {
    let lease = (text(), any::<i64>(), time()).prop_map(|(worker, turn_epoch, expires)| Lease {
        worker,
        turn_epoch,
        lease_expires_at: expires,
    });
    (
        (id(), id(), id(), one_of(TurnKind::ALL)),
        (proptest::option::of(id()), inputs(), one_of(TurnState::ALL)),
        (
            proptest::option::of(any::<i64>()),
            proptest::option::of(text()),
            proptest::option::of(id()),
            proptest::option::of(text()),
        ),
        (proptest::option::of(lease), small_count(), count(), count()),
        (time(), time()),
    )
        .prop_map(
            |(
                (id, agent_id, conversation_id, kind),
                (task_id, input, state),
                (turn_epoch, terminal_rune, deliverable, deliverable_reason),
                (lease, claims, input_tokens, output_tokens),
                (created_at, updated_at),
            )| TurnView {
                id,
                agent_id,
                conversation_id,
                kind,
                task_id,
                input,
                state,
                turn_epoch,
                terminal_rune,
                deliverable,
                deliverable_reason,
                lease,
                claims,
                input_tokens,
                output_tokens,
                tool_calls: Vec::new(),
                created_at,
                updated_at,
            },
        )
}

fn results() -> impl Strategy<Value = ToolResultView> {
    // A result's `output` of JSON null reads back as none: what the wire shows too.
    let output = proptest::option::of(document().prop_filter("not null", |v| !v.is_null()));
    (
        one_of(ToolStatus::ALL),
        output,
        proptest::option::of(text()),
        proptest::option::of(text()),
    )
        .prop_map(|(status, output, error, reason)| ToolResultView {
            status,
            output,
            error,
            reason,
        })
}

fn tool_calls() -> impl Strategy<Value = PlacedCall> {
    (
        (text(), id(), id(), text(), document()),
        (one_of(ToolCallState::ALL), any::<bool>()),
        (
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(count()),
            proptest::option::of(results()),
        ),
        (
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(vec(text(), 0..3)),
            proptest::option::of(id()),
            proptest::option::of(text()),
        ),
        (time(), time(), 0..=i64::MAX),
    )
        .prop_map(
            |(
                (call_id, turn_id, conversation_id, tool_name, arguments),
                (state, requires_approval),
                (policy_reason, approver, timeout_ms, result),
                (policy, reported_by, approvers, on_behalf_of, comment),
                (created_at, updated_at, place),
            )| PlacedCall {
                call: ToolCallView {
                    call_id,
                    turn_id,
                    conversation_id,
                    tool_name,
                    arguments,
                    state,
                    requires_approval,
                    policy_reason,
                    approver,
                    timeout_ms,
                    result,
                    policy,
                    reported_by,
                    approvers,
                    on_behalf_of,
                    comment,
                    created_at,
                    updated_at,
                },
                place,
            },
        )
}

fn queued() -> impl Strategy<Value = Queued> {
    (id(), id(), id(), any::<i64>()).prop_map(|(agent_id, turn_id, conversation_id, position)| {
        Queued {
            agent_id,
            turn_id,
            conversation_id,
            position,
        }
    })
}

fn instances() -> impl Strategy<Value = Instance> {
    (0..5u8, id()).prop_map(|(kind, id)| match kind {
        0 => Instance::Session(id),
        1 => Instance::Agent(id),
        2 => Instance::Turn(id),
        3 => Instance::Plan(id),
        _ => Instance::ToolCall(id),
    })
}

fn deadlines() -> impl Strategy<Value = ArmedDeadline> {
    (
        id(),
        instances(),
        one_of(DeadlineKind::ALL),
        time(),
        any::<i64>(),
    )
        .prop_map(
            |(conversation_id, instance, kind, due_at, epoch)| ArmedDeadline {
                conversation_id,
                deadline: Deadline {
                    instance,
                    kind,
                    due_at,
                    epoch,
                },
            },
        )
}

fn anomalies() -> impl Strategy<Value = AnomalyView> {
    (
        (id(), id(), text(), id(), any::<i64>()),
        (text(), text(), text(), proptest::option::of(text()), time()),
    )
        .prop_map(
            |(
                (id, conversation_id, aggregate_type, instance, sequence),
                (state, fact, reason, causation_id, created_at),
            )| {
                AnomalyView {
                    id,
                    conversation_id,
                    instance: AnomalyInstance {
                        aggregate_type,
                        id: instance,
                    },
                    sequence,
                    state,
                    fact,
                    reason,
                    causation_id,
                    created_at,
                }
            },
        )
}

async fn arbitrary_rows_read_back_equal(db: TestDb) {
    let database = support::migrated(&db, 2).await;
    each_reads_back(&database, sessions()).await;
    each_reads_back(&database, turns()).await;
    each_reads_back(&database, tool_calls()).await;
    each_reads_back(&database, queued()).await;
    each_reads_back(&database, deadlines()).await;
    each_reads_back(&database, anomalies()).await;
}

/// An agent reads back with its inbox (`queued_turn_ids`, from `saga_agent_inbox` in the
/// order of the runes that queued them).
async fn arbitrary_agents_read_back_with_their_inboxes(db: TestDb) {
    let database = support::migrated(&db, 2).await;
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        ..Config::default()
    });
    for _ in 0..CASES {
        let agent = agents().new_tree(&mut runner).expect("an agent").current();
        database
            .execute("DELETE FROM saga_agent_inbox", Args::new())
            .await
            .expect("cleared");
        let inbox: Vec<Queued> = agent
            .queued_turn_ids
            .iter()
            .zip(1..)
            .map(|(turn_id, position)| Queued {
                agent_id: agent.id,
                turn_id: *turn_id,
                conversation_id: agent.conversation_id,
                position,
            })
            .collect();
        let read = round_trip(
            &database,
            async |tx| upsert(tx, &inbox).await.expect("the inbox"),
            &agent,
        )
        .await;
        assert_eq!(read, std::slice::from_ref(&agent));
    }
}

on_both_backends!(
    migrations_make_the_defined_columns,
    arbitrary_rows_read_back_equal,
    arbitrary_agents_read_back_with_their_inboxes,
);
