//! A database made by the release before tool policies migrates in place, on both stores:
//! its tool calls read back (the new columns empty: no policy, reporter or approvers were
//! recorded then), and from then on a policy's fact keeps the `tool_policies` table.

mod support;

use std::time::Duration;

use pm_application::queries::{SagaReadStore, ToolCallFilter};
use pm_application::scope::Scope;
use pm_application::views::PageRequest;
use pm_infrastructure::db::Args;
use pm_infrastructure::sagas::SagaReads;
use pm_infrastructure::sql::Sql;
use pm_infrastructure::tool_policies::DbToolPolicies;
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use uuid::Uuid;

async fn a_tool_call_of_the_previous_release_reads_back_after_migrating(db: TestDb) {
    let database = Database::connect(&db.url, 2, Duration::from_secs(5))
        .await
        .expect("connect");
    // `0015_tool_policies.sql` on PostgreSQL, `0014_tool_policies.sql` on SQLite.
    let tool_policies = if db.kind == "postgres" { 15 } else { 14 };
    database
        .migrate_before(tool_policies)
        .await
        .expect("the previous release's schema");
    let (id, turn, conversation) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    database
        .execute(
            "INSERT INTO saga_tool_calls (id, turn_id, conversation_id, call_id, ordinal, \
             tool_name, arguments, state, requires_approval, policy_reason, approver, \
             timeout_ms, result, created_at, updated_at) \
             VALUES ($1, $2, $3, 'c1', 0, 'shell', '{}', 'executing', \
             true, 'the worker asked', 'alice', NULL, NULL, $4, $4)",
            Args::new()
                .uuid(id)
                .uuid(turn)
                .uuid(conversation)
                .time(&chrono::Utc::now()),
        )
        .await
        .expect("a row of the old schema");

    database.migrate().await.expect("migrates in place");
    let page = PageRequest {
        limit: 10,
        cursor: None,
    };
    let calls = SagaReads::new(database.clone())
        .tool_calls(&Scope::All, &ToolCallFilter::default(), &page)
        .await
        .expect("tool calls");
    let call = calls.items.first().expect("the old call");
    assert_eq!(
        (call.call_id.as_str(), call.approver.as_deref()),
        ("c1", Some("alice"))
    );
    assert_eq!(call.policy, None);
    assert_eq!(call.reported_by, None);
    assert_eq!(call.approvers, None);

    // The trigger is in place: a policy's fact is a row of the policies in force.
    let payload = r#"{"name":"no-rm","tools":"shell.rm*","action":"deny","set_at":"2026-11-28T00:00:00.000000Z"}"#;
    // A text parameter is not a `json` value on PostgreSQL: the statement says so there.
    let fact = Sql {
        pg: "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata) VALUES ('tool_policy', $1, 1, \
             'project_manager.tool_policy.set', '1.0', $2::json, '{}')",
        sqlite: "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
                 event_version, payload, metadata) VALUES ('tool_policy', $1, 1, \
                 'project_manager.tool_policy.set', '1.0', $2, '{}')",
    };
    database
        .execute(
            fact.of(database.dialect()),
            Args::new().text(Uuid::new_v4().to_string()).text(payload),
        )
        .await
        .expect("a policy's fact");
    let policies = DbToolPolicies::new(database).all().await.expect("policies");
    assert_eq!(policies.len(), 1);
    assert_eq!(policies[0].name, "no-rm");
}

on_both_backends!(a_tool_call_of_the_previous_release_reads_back_after_migrating);
