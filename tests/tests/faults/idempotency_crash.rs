//! Defect 1: an `Idempotency-Key` survives a crash. A process aborts (as `kill -9` would
//! end it) right after a command's fact is durable, or right after the key was claimed
//! and before anything was appended; a retry of the key on another process (PostgreSQL:
//! another replica started before the crash; SQLite: a restart on the same file) gets
//! the command's one answer — never `409 idempotency_key_in_use` — and the log holds
//! exactly one fact.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use pm_tests::process::ServiceProcess;
use pm_tests::TestDb;
use serde_json::json;

use crate::support::{facts_with, settled_facts, start, ACTOR_REGISTERED};

/// Starts the process that will crash, and the one that will answer the retries: on
/// PostgreSQL both run at once (the survivor is another replica), on SQLite the second
/// starts after the first has died (a restart).
async fn crash_and_survivor(
    db: &TestDb,
    failpoint: &str,
    key: &str,
    body: &serde_json::Value,
) -> ServiceProcess {
    let env = [("DATABASE_URL", db.url.as_str()), ("PM_DB_POOL_SIZE", "8")];
    let survivor = if db.kind == "postgres" {
        Some(start(&env).await)
    } else {
        None
    };
    let mut doomed = start(&[
        ("DATABASE_URL", db.url.as_str()),
        ("PM_DB_POOL_SIZE", "8"),
        ("PM_FAILPOINT", failpoint),
    ])
    .await;
    let r = doomed
        .api()
        .post_with("/v1/actors", body, &[("idempotency-key", key)])
        .await;
    assert!(
        r.is_err(),
        "PM_FAILPOINT={failpoint}: the process must die before answering, got {:?}",
        r.map(|r| (r.status, r.text))
    );
    let exit = doomed
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the process with the failpoint exits");
    assert_eq!(exit.signal(), Some(6), "aborted (SIGABRT), got {exit}");
    match survivor {
        Some(s) => s,
        None => start(&env).await,
    }
}

/// Retries `key` three times on `svc`; each answer must be the `201` of the one fact.
async fn retries_get_the_one_answer(
    svc: &ServiceProcess,
    key: &str,
    body: &serde_json::Value,
    name: &str,
    what: &str,
) {
    let api = svc.api();
    let mut first: Option<(String, String)> = None;
    for attempt in 1..=3 {
        let r = api
            .post_with("/v1/actors", body, &[("idempotency-key", key)])
            .await
            .expect("the retry is answered");
        assert_eq!(
            r.status, 201,
            "{what}: retry {attempt} of the Idempotency-Key must get the command's answer 201, got {} {}",
            r.status, r.text
        );
        let position = r
            .header("x-event-position")
            .expect("X-Event-Position on the replayed answer")
            .to_string();
        let answer = (r.id(), position);
        match &first {
            None => first = Some(answer),
            Some(f) => assert_eq!(&answer, f, "{what}: retry {attempt} answered differently"),
        }
    }
    let (id, position) = first.expect("answered");
    let facts = settled_facts(api).await;
    let mine = facts_with(&facts, ACTOR_REGISTERED, "display_name", name);
    assert_eq!(
        mine.len(),
        1,
        "{what}: exactly one fact for the key, found {}",
        mine.len()
    );
    assert_eq!(
        mine[0]["data"]["id"],
        id.as_str(),
        "{what}: the answer names the fact's entity"
    );
    assert_eq!(
        mine[0]["position"],
        position.as_str(),
        "{what}: the answer's X-Event-Position is the fact's position"
    );
}

async fn a_key_whose_fact_was_appended_before_the_crash_replays_its_answer(db: TestDb) {
    let name = "Crash after append";
    let body = json!({"kind": "human", "display_name": name});
    let key = "crash-after-append-key";
    let svc = crash_and_survivor(&db, "abort_after_append", key, &body).await;
    // The fact was durable before the crash.
    let facts = settled_facts(svc.api()).await;
    assert_eq!(
        facts_with(&facts, ACTOR_REGISTERED, "display_name", name).len(),
        1,
        "the fact appended before the crash is in the log"
    );
    retries_get_the_one_answer(&svc, key, &body, name, "abort_after_append").await;
}

async fn a_key_claimed_before_the_crash_runs_its_command_once(db: TestDb) {
    let name = "Crash before append";
    let body = json!({"kind": "human", "display_name": name});
    let key = "crash-before-append-key";
    let svc = crash_and_survivor(&db, "abort_before_append", key, &body).await;
    let facts = settled_facts(svc.api()).await;
    assert!(
        facts_with(&facts, ACTOR_REGISTERED, "display_name", name).is_empty(),
        "nothing was appended before the crash"
    );
    retries_get_the_one_answer(&svc, key, &body, name, "abort_before_append").await;
}

per_backend!(
    a_key_whose_fact_was_appended_before_the_crash_replays_its_answer,
    sqlite: [],
    postgres: []
);
per_backend!(
    a_key_claimed_before_the_crash_runs_its_command_once,
    sqlite: [],
    postgres: []
);
