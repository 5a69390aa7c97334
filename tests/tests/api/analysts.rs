//! Analysts of one organization in SQL (TRUST.md "Organizations", docs/READ_MODEL.md):
//! `project-manager analyst-role <organization>` on a real PostgreSQL, with the service
//! connected as a non-superuser role that owns its tables (as in production). Two
//! organizations' conversations with everything the read schema shows; a login role
//! granted one organization's analyst role reads every view and sees only that
//! organization's rows — after a second run that repairs what was changed by hand, after a
//! read-model rebuild and after a restart — and is refused the log and every operational
//! relation; the service's own connection sees everything with no policy in its plans;
//! legacy grants on the views are refused, and BYPASSRLS sees every organization. An
//! owner without CREATEROLE is asked for the role and uses one made by hand. Bad
//! organization names and SQLite are refused.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use pm_infrastructure::analysts;
use pm_tests::process::ServiceProcess;
use pm_tests::{pg_admin_url, TestDb, TestService, ADMIN};
use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};

use crate::reads::{checkpoint, conversation, message, rebuild, task, task_checkpoint};
use crate::sagas::actor;
use crate::support::{config, post_with};

/// docs/READ_MODEL.md, whose headings name the views.
const READ_MODEL: &str = include_str!("../../../docs/READ_MODEL.md");

/// The password of the roles a test makes (the server may not trust local connections).
const PASSWORD: &str = "analyst-test";

/// Runs the binary with `args` on `DATABASE_URL=url` to its end, off the runtime's
/// threads (the in-process service keeps running on them). Answers success and output.
async fn cli(args: &[&str], url: &str) -> (bool, String) {
    pm_tests::process::use_binary(env!("CARGO_BIN_EXE_pm-test-server"));
    let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (status, log) = ServiceProcess::run(
            &args,
            &[("DATABASE_URL", url.as_str())],
            Duration::from_secs(60),
        );
        (status.success(), log)
    })
    .await
    .expect("the command ran")
}

/// `url` with its user part replaced by `user` and [`PASSWORD`].
fn as_user(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{user}:{PASSWORD}@{host}")
}

/// The cluster-wide roles a test made, dropped at its end — after its database, which
/// holds their privileges (declared after the [`TestDb`], so dropped before it).
struct Roles {
    database: String,
    names: Vec<String>,
}

impl Drop for Roles {
    fn drop(&mut self) {
        let database = self.database.clone();
        let names = std::mem::take(&mut self.names);
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let Ok(mut conn) = PgConnection::connect(&pg_admin_url()).await else {
                    return;
                };
                let drop_db = format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)");
                let _ = conn.execute(drop_db.as_str()).await;
                for name in names {
                    let drop_role = format!("DROP ROLE IF EXISTS {}", analysts::ident(&name));
                    if let Err(e) = conn.execute(drop_role.as_str()).await {
                        eprintln!("could not drop the test role {name:?}: {e}");
                    }
                }
            });
        })
        .join();
    }
}

/// What one organization has, by the key a view's rows name.
#[derive(Debug, Default)]
struct Org {
    conversations: BTreeSet<String>,
    actors: BTreeSet<String>,
    tasks: BTreeSet<String>,
}

/// Which of an organization's sets a view's key column belongs to.
#[derive(Debug, Clone, Copy)]
enum Key {
    Conversation,
    Actor,
    Task,
}

impl Org {
    fn set(&self, key: Key) -> &BTreeSet<String> {
        match key {
            Key::Conversation => &self.conversations,
            Key::Actor => &self.actors,
            Key::Task => &self.tasks,
        }
    }
}

/// The column of `view` that says whose a row is.
fn key(view: &str) -> (&'static str, Key) {
    match view {
        "actors" => ("id", Key::Actor),
        "conversations" => ("id", Key::Conversation),
        "task_checkpoints" => ("task_id", Key::Task),
        _ => ("conversation_id", Key::Conversation),
    }
}

/// `organization`'s world: a conversation of a human and an AI actor with a BEGIN_WORK
/// checkpoint, a task assigned to a third actor (an assignee who does not take part
/// otherwise) with a task checkpoint, and a human message (its session, agents and a
/// dispatched turn); a second conversation closed and then checkpointed again (an
/// anomaly). Answers the organization and its conversation with the turn.
async fn populate(svc: &TestService, organization: &str) -> (Org, String) {
    let human = actor(svc, "human", &format!("{organization} human")).await;
    let llm = actor(svc, "ai", &format!("{organization} model")).await;
    let assignee = actor(svc, "human", &format!("{organization} assignee")).await;
    let extra = json!({"organization": organization});
    let c = conversation(svc, &[&human, &llm], extra.clone()).await.id;
    let begin = checkpoint(svc, &c, "BEGIN_WORK").await.id;
    let t = task(svc, &c, &begin, Some(&assignee)).await.id;
    task_checkpoint(svc, &t, "WORK_STARTED").await;
    message(svc, &c, &human, json!({"content": "please", "task_id": t})).await;
    let closed = conversation(svc, &[&human, &llm], extra).await.id;
    for kind in ["WORK_COMPLETED", "NEED_INFORMATION"] {
        checkpoint(svc, &closed, kind).await;
    }
    let org = Org {
        conversations: [c.clone(), closed].into(),
        actors: [human, llm, assignee].into(),
        tasks: [t].into(),
    };
    (org, c)
}

/// Claims the conversation turns and reports a tool call needing approval on each: tool
/// calls, and deadlines on them. Answers the conversations whose turns were claimed.
async fn tool_calls(svc: &TestService, count: usize) -> BTreeSet<String> {
    let mut claimed = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while claimed.len() < count {
        assert!(Instant::now() < deadline, "only {claimed:?} were claimed");
        let c = svc
            .post(
                Some(ADMIN),
                "/v1/turns/claim",
                &json!({"worker": "analyst-test", "kind": "conversation"}),
            )
            .await;
        if c.status == 204 {
            tokio::time::sleep(Duration::from_millis(25)).await;
            continue;
        }
        assert_eq!(c.status, 200, "{}", c.text);
        let turn = c.json["turn"]["id"].as_str().expect("turn id").to_string();
        let epoch = c.json["turn_epoch"].as_i64().expect("epoch").to_string();
        let calls = json!({"calls": [{
            "call_id": "ls", "tool_name": "shell", "arguments": {"cmd": "ls"},
            "requires_approval": true, "policy_reason": "runs a shell command"
        }]});
        let headers = [
            ("PM-Turn-Id", turn.as_str()),
            ("PM-Turn-Epoch", epoch.as_str()),
        ];
        let path = format!("/v1/turns/{turn}/tool-calls");
        let r = post_with(svc, Some(ADMIN), &path, &calls, &headers).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let conv = &c.json["context"]["conversation"]["id"];
        claimed.insert(conv.as_str().expect("conversation id").to_string());
    }
    claimed
}

/// The keys of every view's rows, read on `conn`.
async fn view_keys(conn: &mut PgConnection) -> BTreeMap<&'static str, BTreeSet<String>> {
    let mut all = BTreeMap::new();
    for view in analysts::views() {
        let (column, _) = key(view);
        let sql = format!("SELECT {column}::text FROM {view}");
        let rows: Vec<(Option<String>,)> = sqlx::query_as(&sql)
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        all.insert(view, rows.into_iter().filter_map(|(k,)| k).collect());
    }
    all
}

/// Polls the owner's connection until every view has rows of both organizations (the
/// processors caught up; and the data covers every view, or the test would prove little).
async fn everything_projected(owner: &mut PgConnection, acme: &Org, globex: &Org) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let keys = view_keys(owner).await;
        let missing: Vec<&str> = keys
            .iter()
            .filter(|(view, keys)| {
                let (_, k) = key(view);
                keys.is_disjoint(acme.set(k)) || keys.is_disjoint(globex.set(k))
            })
            .map(|(view, _)| *view)
            .collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "these views never showed both organizations to the owner: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asserts that `analyst` sees, through every view, some of acme's rows and only acme's,
/// and through the tables beneath them (`generation`'s and the sagas') only acme's.
async fn sees_only_acme(analyst: &mut PgConnection, acme: &Org, generation: i64, when: &str) {
    for (view, keys) in view_keys(analyst).await {
        let (_, k) = key(view);
        assert!(!keys.is_empty(), "{when}: {view} shows acme nothing");
        let foreign: Vec<&String> = keys.difference(acme.set(k)).collect();
        assert!(
            foreign.is_empty(),
            "{when}: {view} shows rows not of acme: {foreign:?}"
        );
    }
    let organizations: Vec<(Option<String>,)> =
        sqlx::query_as("SELECT DISTINCT organization FROM conversations")
            .fetch_all(&mut *analyst)
            .await
            .expect("organizations");
    assert_eq!(organizations.len(), 1, "{when}: {organizations:?}");
    for table in [
        format!("rm_g{generation}_messages"),
        format!("rm_g{generation}_tasks"),
        "saga_turns".to_string(),
        "saga_agent_inbox".to_string(),
        "conversation_organizations".to_string(),
    ] {
        let sql = format!("SELECT conversation_id::text FROM {table}");
        let rows: Vec<(String,)> = sqlx::query_as(&sql)
            .fetch_all(&mut *analyst)
            .await
            .unwrap_or_else(|e| panic!("{when}: {sql}: {e}"));
        assert!(
            rows.iter().all(|(c,)| acme.conversations.contains(c)),
            "{when}: {table} shows rows not of acme: {rows:?}"
        );
    }
}

/// The relations of the schema an analyst may read: the views, the tables beneath them
/// and the two the policies read.
fn readable(generation: i64) -> BTreeSet<String> {
    let mut readable: BTreeSet<String> = analysts::views().map(str::to_string).collect();
    for t in pm_infrastructure::read_model::schema::TABLES {
        readable.insert(format!("rm_g{generation}_{t}"));
    }
    for t in [
        "saga_sessions",
        "saga_agents",
        "saga_agent_inbox",
        "saga_turns",
        "saga_tool_calls",
        "saga_anomalies",
        "saga_deadlines",
        "conversation_organizations",
        "analyst_roles",
    ] {
        readable.insert(t.to_string());
    }
    readable
}

/// Asserts that `analyst` is refused every relation of the schema but what it may read
/// (the log, the processors, idempotency keys, webhooks, snapshots, migrations,
/// sequences, …).
async fn refused_the_rest(
    analyst: &mut PgConnection,
    owner: &mut PgConnection,
    generation: i64,
    when: &str,
) {
    let all: Vec<(String,)> = sqlx::query_as(
        "SELECT c.relname::text FROM pg_class c \
         WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) \
           AND c.relkind IN ('r', 'v', 'm', 'p', 'f', 'S')",
    )
    .fetch_all(&mut *owner)
    .await
    .expect("relations");
    let readable = readable(generation);
    let operational: Vec<String> = all
        .into_iter()
        .map(|(name,)| name)
        .filter(|name| !readable.contains(name))
        .collect();
    for expected in [
        "events",
        "processors",
        "idempotency_keys",
        "webhooks",
        "parked_events",
        "saga_conversations",
        "saga_snapshots",
        "_sqlx_migrations",
    ] {
        assert!(
            operational.iter().any(|n| n == expected),
            "{when}: {expected} is not in {operational:?}"
        );
    }
    for relation in &operational {
        let sql = format!("SELECT 1 FROM {} LIMIT 1", analysts::ident(relation));
        let e = sqlx::query(&sql)
            .fetch_all(&mut *analyst)
            .await
            .err()
            .unwrap_or_else(|| panic!("{when}: the analyst may read {relation}"));
        let code = e
            .as_database_error()
            .and_then(|d| d.code())
            .map(|c| c.to_string());
        assert_eq!(
            code.as_deref(),
            Some("42501"),
            "{when}: {relation} is refused with {e}"
        );
    }
}

/// The read model's generation, as the owner sees it.
async fn generation(owner: &mut PgConnection) -> i64 {
    let (g,): (i64,) =
        sqlx::query_as("SELECT generation::bigint FROM processors WHERE name = 'read_model'")
            .fetch_one(&mut *owner)
            .await
            .expect("generation");
    g
}

/// Everything an analyst of acme must see and not see, checked on fresh connections.
async fn check(db_url: &str, login: &str, owner: &str, acme: &Org, when: &str) {
    let mut owner = PgConnection::connect(&as_user(db_url, owner))
        .await
        .expect("owner connects");
    let mut analyst = PgConnection::connect(&as_user(db_url, login))
        .await
        .expect("analyst connects");
    let g = generation(&mut owner).await;
    sees_only_acme(&mut analyst, acme, g, when).await;
    refused_the_rest(&mut analyst, &mut owner, g, when).await;
    // The owner's plans carry no policy: row-level security costs the service nothing.
    let plan: Vec<(String,)> =
        sqlx::query_as("EXPLAIN SELECT * FROM tasks JOIN actors a ON a.id = assigned_to")
            .fetch_all(&mut owner)
            .await
            .expect("plan");
    assert!(
        plan.iter().all(
            |(line,)| !line.contains("conversation_organizations") && !line.contains("SubPlan")
        ),
        "{when}: the owner's plan has a policy: {plan:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_two_organizations_when_acmes_analyst_reads_the_views_then_only_acme_rows_show_across_reruns_rebuilds_and_restarts_postgres(
) {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let u = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let (acme_name, globex_name) = (format!("acme-{u}"), format!("globex-{u}"));
    let owner = format!("pm_test_owner_{u}");
    let login = format!("pm_test_analyst_{u}");
    let legacy = format!("pm_test_legacy_{u}");
    let role = format!("pm_analyst_{acme_name}");
    let _roles = Roles {
        database: db.pg_name().expect("a PostgreSQL database").to_string(),
        names: vec![
            login.clone(),
            legacy.clone(),
            role.clone(),
            format!("pm_analyst_{globex_name}"),
            owner.clone(),
        ],
    };
    let mut admin = PgConnection::connect(&db.url).await.expect("connects");
    // The service as in production: a role of its own that owns the database (and so
    // everything it migrates), may create roles, and is no superuser.
    for statement in [
        format!("CREATE ROLE {owner} LOGIN CREATEROLE PASSWORD '{PASSWORD}'"),
        format!(
            "ALTER DATABASE {} OWNER TO {owner}",
            db.pg_name().unwrap_or_default()
        ),
        format!("CREATE ROLE {login} LOGIN PASSWORD '{PASSWORD}'"),
        format!("CREATE ROLE {legacy} LOGIN PASSWORD '{PASSWORD}'"),
    ] {
        admin.execute(statement.as_str()).await.expect(&statement);
    }
    let service_url = as_user(&db.url, &owner);
    let mut cfg = config(&db);
    cfg.database_url = Some(service_url.clone());
    let svc = TestService::start_with(cfg.clone()).await;

    let (acme, acme_turn) = populate(&svc, &acme_name).await;
    let (globex, globex_turn) = populate(&svc, &globex_name).await;
    // A conversation of no organization: only `*` principals (and owners) see it.
    let nobody = actor(&svc, "human", "nobody").await;
    conversation(&svc, &[&nobody], json!({})).await;
    let claimed = tool_calls(&svc, 2).await;
    assert_eq!(claimed, [acme_turn, globex_turn].into());
    let mut owner_conn = PgConnection::connect(&service_url)
        .await
        .expect("owner connects");
    everything_projected(&mut owner_conn, &acme, &globex).await;

    // Analysts who were given plain SELECT on the views before: the views now read with
    // their reader's rights, and they hold none on the tables beneath.
    let (ok, out) = cli(&["analyst-role", &acme_name], &service_url).await;
    assert!(ok, "analyst-role failed: {out}");
    assert!(out.contains(&format!("created \"{role}\"")), "{out}");
    owner_conn
        .execute(format!("GRANT SELECT ON tasks, sessions TO {legacy}").as_str())
        .await
        .expect("a legacy grant");
    let mut old = PgConnection::connect(&as_user(&db.url, &legacy))
        .await
        .expect("legacy connects");
    for view in ["tasks", "sessions"] {
        let e = sqlx::query(&format!("SELECT * FROM {view}"))
            .fetch_all(&mut old)
            .await
            .err()
            .unwrap_or_else(|| panic!("a legacy analyst still reads {view}"));
        assert!(e.to_string().contains("permission denied"), "{e}");
    }

    admin
        .execute(format!("GRANT {} TO {login}", analysts::ident(&role)).as_str())
        .await
        .expect("grant the analyst role");
    check(&db.url, &login, &owner, &acme, "after the first run").await;

    // Someone gave the role more by hand, and a login: a second run takes it back.
    for statement in [
        format!(
            "GRANT SELECT ON events, processors TO {}",
            analysts::ident(&role)
        ),
        format!(
            "GRANT INSERT, UPDATE ON saga_turns TO {}",
            analysts::ident(&role)
        ),
        format!(
            "GRANT SELECT (payload) ON events TO {}",
            analysts::ident(&role)
        ),
        format!("ALTER ROLE {} LOGIN", analysts::ident(&role)),
    ] {
        owner_conn
            .execute(statement.as_str())
            .await
            .expect(&statement);
    }
    let (ok, out) = cli(&["analyst-role", &acme_name], &service_url).await;
    assert!(ok, "the second run failed: {out}");
    assert!(out.contains(&format!("updated \"{role}\"")), "{out}");
    let (login_allowed, writes): (bool, bool) = sqlx::query_as(&format!(
        "SELECT rolcanlogin, has_table_privilege('{role}', 'saga_turns', 'INSERT') \
         FROM pg_roles WHERE rolname = '{role}'"
    ))
    .fetch_one(&mut owner_conn)
    .await
    .expect("the role");
    assert!(!login_allowed && !writes, "NOLOGIN again, and no writes");
    check(&db.url, &login, &owner, &acme, "after the second run").await;

    // A rebuild: new tables, views pointed at them, the old tables dropped.
    let before = generation(&mut owner_conn).await;
    rebuild(&svc).await;
    let after = generation(&mut owner_conn).await;
    assert!(after > before, "{before} → {after}");
    let (gone,): (bool,) = sqlx::query_as(&format!(
        "SELECT to_regclass('rm_g{before}_tasks') IS NULL AND to_regclass('rm_g{before}_actors') IS NULL"
    ))
    .fetch_one(&mut owner_conn)
    .await
    .expect("old tables");
    assert!(
        gone,
        "the old generation's tables are dropped despite their policies"
    );
    check(&db.url, &login, &owner, &acme, "after a rebuild").await;

    // A restart makes the views anew.
    svc.stop().await;
    let svc = TestService::start_with(cfg).await;
    check(&db.url, &login, &owner, &acme, "after a restart").await;

    // Globex's analyst role, made later, sees globex only; acme's is unchanged.
    let (ok, out) = cli(&["analyst-role", &globex_name], &service_url).await;
    assert!(ok, "analyst-role failed: {out}");
    admin
        .execute(
            format!(
                "GRANT {} TO {legacy}",
                analysts::ident(&format!("pm_analyst_{globex_name}"))
            )
            .as_str(),
        )
        .await
        .expect("grant");
    let mut as_globex = PgConnection::connect(&as_user(&db.url, &legacy))
        .await
        .expect("connects");
    let seen: Vec<(String,)> = sqlx::query_as("SELECT id::text FROM conversations")
        .fetch_all(&mut as_globex)
        .await
        .expect("conversations");
    let seen: BTreeSet<String> = seen.into_iter().map(|(c,)| c).collect();
    assert_eq!(seen, globex.conversations);
    check(
        &db.url,
        &login,
        &owner,
        &acme,
        "beside another organization",
    )
    .await;

    // One who must see every organization: BYPASSRLS, and an analyst role's privileges.
    admin
        .execute(format!("ALTER ROLE {legacy} BYPASSRLS").as_str())
        .await
        .expect("BYPASSRLS");
    let mut everyone = PgConnection::connect(&as_user(&db.url, &legacy))
        .await
        .expect("connects");
    let seen: Vec<(String,)> = sqlx::query_as("SELECT id::text FROM conversations")
        .fetch_all(&mut everyone)
        .await
        .expect("conversations");
    let seen: BTreeSet<String> = seen.into_iter().map(|(c,)| c).collect();
    assert!(seen.is_superset(&acme.conversations) && seen.is_superset(&globex.conversations));
    assert_eq!(
        seen.len(),
        5,
        "and the one without an organization: {seen:?}"
    );
    svc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_bad_organizations_when_analyst_role_runs_then_they_are_refused_before_connecting() {
    // Nothing listens there: a refusal that tried to connect would say so instead.
    let url = "postgres://nobody@127.0.0.1:9/none";
    let cases = [
        ("", "is not a valid organization label"),
        ("   ", "is not a valid organization label"),
        ("*", "every organization"),
        (
            &*"a".repeat(analysts::MAX_IDENTIFIER_BYTES - analysts::ROLE_PREFIX.len() + 1),
            "PostgreSQL would truncate it to 63",
        ),
        (&*"é".repeat(27), "at most 52 bytes"),
    ];
    for (organization, why) in cases {
        let (ok, out) = cli(&["analyst-role", organization], url).await;
        assert!(!ok, "{organization:?} was accepted: {out}");
        assert!(out.contains(why), "{organization:?}: {out}");
        assert!(!out.contains("connect"), "{organization:?}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_sqlite_when_analyst_role_runs_then_it_is_refused_as_single_tenant() {
    let Some(db) = TestDb::sqlite().await else {
        return;
    };
    let (ok, out) = cli(&["analyst-role", "acme"], &db.url).await;
    assert!(!ok, "accepted on SQLite: {out}");
    assert!(out.contains("SQLite is single-tenant"), "{out}");
    let file = db.url.trim_start_matches("sqlite://");
    assert!(
        !std::path::Path::new(file).exists(),
        "the refusal created {file}"
    );
}

#[test]
fn given_read_model_md_when_its_views_are_listed_then_analyst_roles_cover_exactly_them() {
    let contract = READ_MODEL
        .split("## Operational tables")
        .next()
        .expect("the views' part");
    let documented: BTreeSet<&str> = contract
        .lines()
        .filter_map(|l| {
            l.strip_prefix("### `")
                .or_else(|| l.strip_prefix("## `"))
                .and_then(|rest| rest.strip_suffix('`'))
        })
        .collect();
    let protected: BTreeSet<&str> = analysts::views().collect();
    assert_eq!(documented, protected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_owner_without_createrole_when_analyst_role_runs_then_it_asks_for_the_role_and_uses_one_made_by_hand_postgres(
) {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let u = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let owner = format!("pm_test_owner_{u}");
    let role = format!("pm_analyst_beta-{u}");
    let _roles = Roles {
        database: db.pg_name().expect("a PostgreSQL database").to_string(),
        names: vec![role.clone(), owner.clone()],
    };
    let mut admin = PgConnection::connect(&db.url).await.expect("connects");
    for statement in [
        format!("CREATE ROLE {owner} LOGIN PASSWORD '{PASSWORD}'"),
        format!(
            "ALTER DATABASE {} OWNER TO {owner}",
            db.pg_name().unwrap_or_default()
        ),
    ] {
        admin.execute(statement.as_str()).await.expect(&statement);
    }
    let url = as_user(&db.url, &owner);
    let organization = format!("beta-{u}");
    // The first run on a database the service never opened: it migrates, then asks.
    let (ok, out) = cli(&["analyst-role", &organization], &url).await;
    assert!(!ok, "created a role without CREATEROLE: {out}");
    assert!(out.contains("it needs CREATEROLE"), "{out}");
    let (exists,): (bool,) = sqlx::query_as("SELECT to_regclass('events') IS NOT NULL")
        .fetch_one(&mut admin)
        .await
        .expect("migrated");
    assert!(exists, "the schema is migrated");
    let create = format!("CREATE ROLE {} NOLOGIN", analysts::ident(&role));
    admin.execute(create.as_str()).await.expect(&create);
    let (ok, out) = cli(&["analyst-role", &organization], &url).await;
    assert!(ok, "the role made by hand was not used: {out}");
    assert!(out.contains(&format!("updated \"{role}\"")), "{out}");
    let (reads,): (bool,) = sqlx::query_as(&format!(
        "SELECT has_table_privilege('{role}', 'tasks', 'SELECT') \
         AND NOT has_table_privilege('{role}', 'events', 'SELECT')"
    ))
    .fetch_one(&mut admin)
    .await
    .expect("privileges");
    assert!(reads, "it reads the views and not the log");
}
