//! WORKERS.md's claimable is stated once, in the domain ([`CLAIMABLE_STATES`],
//! [`LEASED_STATE`]); the claim's query renders it ([`claimable_predicate`]). The partial
//! index `saga_turns_claimable` of the shipped migrations (PostgreSQL `0008_workers.sql`,
//! SQLite `0007_workers.sql`) states it too, and a shipped migration is never edited: this
//! holds the index, as the database keeps it, to the domain's rule, on both stores.

mod support;

use pm_domain::saga::{CLAIMABLE_STATES, LEASED_STATE};
use pm_infrastructure::db::Args;
use pm_infrastructure::sagas::leases::claimable_predicate;
use pm_test_db::{on_both_backends, TestDb};

/// The index's definition as the database keeps it: PostgreSQL's `pg_indexes.indexdef`
/// (normalised: `((state = 'dispatched'::text) OR …)`), SQLite's `sqlite_master.sql` (the
/// statement as written).
async fn index_definition(db: &TestDb) -> String {
    let database = support::migrated(db, 2).await;
    let sql = if database.kind() == "postgres" {
        "SELECT indexdef AS def FROM pg_indexes \
         WHERE tablename = 'saga_turns' AND indexname = $1"
    } else {
        "SELECT sql AS def FROM sqlite_master \
         WHERE type = 'index' AND tbl_name = 'saga_turns' AND name = $1"
    };
    let row = database
        .fetch_optional(sql, Args::new().text("saga_turns_claimable"))
        .await
        .expect("the catalogue read")
        .expect("the index saga_turns_claimable exists");
    row.string("def").expect("its definition")
}

/// The predicate after `WHERE`, without parentheses, casts, aliases or case: the two stores
/// and the query word it differently, not in meaning (AND binds tighter than OR, so the
/// parentheses of `a OR (b AND c)` add nothing).
fn normalised(predicate: &str) -> String {
    predicate
        .replace("::text", "")
        .replace(['(', ')'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The string literals of `predicate`, sorted: the states it names.
fn states_named(predicate: &str) -> Vec<String> {
    let mut states: Vec<String> = predicate
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    states.sort();
    states
}

async fn the_claimable_index_names_exactly_the_domains_claimable_states(db: TestDb) {
    let definition = index_definition(&db).await;
    let (_, predicate) = definition
        .split_once("WHERE")
        .unwrap_or_else(|| panic!("a partial index: {definition}"));
    let mut expected: Vec<String> = CLAIMABLE_STATES
        .iter()
        .map(|s| s.as_str().to_string())
        .collect();
    expected.sort();
    assert_eq!(
        states_named(predicate),
        expected,
        "the index's states: {definition}"
    );
    let unleased = format!(
        "state = '{}' and lease_worker is null",
        LEASED_STATE.as_str()
    );
    assert!(
        normalised(predicate).contains(&unleased),
        "the index takes the {LEASED_STATE} turns only unleased: {definition}"
    );
}

async fn the_claims_query_states_the_claimable_index_predicate(db: TestDb) {
    let definition = index_definition(&db).await;
    let (_, predicate) = definition
        .split_once("WHERE")
        .unwrap_or_else(|| panic!("a partial index: {definition}"));
    assert_eq!(
        normalised(predicate),
        normalised(&claimable_predicate("")),
        "the claim's query and the index say claimable alike (else PostgreSQL cannot use it)"
    );
}

/// PostgreSQL plans the claim's predicate on the partial index (it must prove the query's
/// `WHERE` implies the index's: a predicate said differently, e.g. `state IN (…) AND
/// lease_worker IS NULL`, would not be proven and the index would go unused).
async fn postgres_can_answer_the_claims_predicate_from_the_claimable_index(db: TestDb) {
    let database = support::migrated(&db, 2).await;
    if database.kind() != "postgres" {
        return;
    }
    let mut tx = database.begin().await.expect("a transaction");
    tx.execute("SET LOCAL enable_seqscan = off", Args::new())
        .await
        .expect("no sequential scans");
    let plan = tx
        .fetch_all(
            &format!(
                "EXPLAIN SELECT t.id FROM saga_turns t WHERE ({}) ORDER BY t.created_at, t.id",
                claimable_predicate("t.")
            ),
            Args::new(),
        )
        .await
        .expect("a plan")
        .iter()
        .map(|row| row.string("QUERY PLAN").expect("a plan line"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(plan.contains("saga_turns_claimable"), "{plan}");
}

on_both_backends!(
    postgres_can_answer_the_claims_predicate_from_the_claimable_index,
    the_claimable_index_names_exactly_the_domains_claimable_states,
    the_claims_query_states_the_claimable_index_predicate,
);
