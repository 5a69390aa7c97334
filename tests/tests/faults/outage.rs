//! Defect 6: fail fast in an outage. With PostgreSQL stopped a command, a query and
//! `/readyz` answer `503` with `Retry-After` within 1 s; once it is back, commands succeed
//! within 2 s without restarting the service. Terminated database connections never
//! turn into `500`. And the fault run: PostgreSQL stopped and started under load.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pm_tests::http::Api;
use pm_tests::load::{Load, LoadConfig, Outcome};
use pm_tests::pg_server::PrivatePg;
use pm_tests::{pg_admin_url, TestDb};
use serde_json::json;
use sqlx::{Connection, PgConnection};

use crate::support::{serial, settled_facts, start, MESSAGE_ADDED};

const FAST: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_database_fails_fast_and_the_service_recovers_by_itself() {
    let _serial = serial().await;
    let Some(mut pg) = tokio::task::block_in_place(PrivatePg::start) else {
        return;
    };
    let url = pg.create_database("pm").await;
    let svc = start(&[("DATABASE_URL", url.as_str()), ("PM_DB_POOL_SIZE", "8")]).await;
    let api = svc.api().clone().with_timeout(Duration::from_secs(15));
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;
    let messages = format!("/v1/conversations/{conversation}/messages");
    let body = json!({"actor_id": actor, "content": "during the outage"});
    api.create(&messages, &body).await;

    tokio::task::block_in_place(|| pg.stop_fast());
    // All three at once, so a slow answer does not hold the others up.
    let requests = [
        (
            "POST a message",
            api.client.post(api.url(&messages)).json(&body),
        ),
        (
            "GET the conversation",
            api.client
                .get(api.url(&format!("/v1/conversations/{conversation}"))),
        ),
        ("GET /readyz", api.client.get(api.url("/readyz"))),
    ];
    let answers = futures::future::join_all(requests.into_iter().map(|(what, req)| {
        let api = api.clone();
        async move {
            let t = Instant::now();
            let r = api.send(req).await;
            (what, r, t.elapsed())
        }
    }))
    .await;
    let mut failures = Vec::new();
    for (what, _, took) in &answers {
        eprintln!("FIGURE outage: {what} answered after {took:?}");
    }
    for (what, r, took) in answers {
        match r {
            Ok(r) if r.status == 503 && took <= FAST && r.header("retry-after").is_some() => {}
            Ok(r) => failures.push(format!(
                "{what}: {} after {took:?}, Retry-After {:?}",
                r.status,
                r.header("retry-after")
            )),
            Err(e) => failures.push(format!("{what}: no answer after {took:?}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "with PostgreSQL stopped, each must answer 503 with Retry-After within {FAST:?}: {failures:#?}"
    );

    tokio::task::block_in_place(|| pg.start_again());
    let up = Instant::now();
    let mut last = String::new();
    while up.elapsed() < Duration::from_secs(10) {
        match api.post(&messages, &body).await {
            Ok(r) if r.status == 201 => break,
            Ok(r) => last = format!("{} {}", r.status, r.text),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = up.elapsed();
    eprintln!("FIGURE outage: commands succeed again {took:?} after PostgreSQL is back");
    assert!(
        took <= Duration::from_secs(2),
        "commands succeed again {took:?} after PostgreSQL is back (must be <= 2 s; last: {last})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_database_connections_never_answer_500() {
    let _serial = serial().await;
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let name = db.pg_name().expect("a PostgreSQL database").to_string();
    let svc = start(&[("DATABASE_URL", db.url.as_str()), ("PM_DB_POOL_SIZE", "8")]).await;
    let api = svc.api().clone().with_timeout(Duration::from_secs(15));
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;

    let stop = Arc::new(AtomicBool::new(false));
    let killer = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut admin = PgConnection::connect(&pg_admin_url()).await.expect("admin");
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) {
                sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE datname = $1 AND pid <> pg_backend_pid()",
                )
                .bind(&name)
                .execute(&mut admin)
                .await
                .expect("terminate");
                rounds += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            rounds
        })
    };
    let mut answers = Vec::new();
    for i in 0..50 {
        let body = json!({"actor_id": actor, "content": format!("storm {i}")});
        let path = format!("/v1/conversations/{conversation}/messages");
        answers.push((format!("POST message {i}"), api.post(&path, &body).await));
        let path = format!("/v1/conversations/{conversation}");
        answers.push((format!("GET conversation {i}"), api.get(&path).await));
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = killer.await.expect("killer");
    let bad: Vec<String> = answers
        .iter()
        .filter_map(|(what, r)| match r {
            Ok(r) if r.status < 500 || r.status == 503 => None,
            Ok(r) => Some(format!("{what}: {} {}", r.status, r.text)),
            Err(e) => Some(format!("{what}: no answer: {e}")),
        })
        .collect();
    assert!(
        bad.is_empty(),
        "with its backends terminated ({rounds} rounds) the service answered: {bad:#?}"
    );
    let ok = answers
        .iter()
        .filter(|(_, r)| r.as_ref().is_ok_and(|r| r.status < 300))
        .count();
    assert!(
        ok * 2 >= answers.len(),
        "most succeed: {ok} of {}",
        answers.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_and_started_under_load_loses_nothing() {
    let _serial = serial().await;
    let Some(mut pg) = tokio::task::block_in_place(PrivatePg::start) else {
        return;
    };
    let url = pg.create_database("pm").await;
    let svc = start(&[("DATABASE_URL", url.as_str()), ("PM_DB_POOL_SIZE", "8")]).await;
    let api: Api = svc.api().clone();
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;
    let load = Load::start(
        LoadConfig::messages(&api, &conversation, &actor)
            .workers(4)
            .interval(Duration::from_millis(10))
            .request_timeout(Duration::from_secs(15)),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::block_in_place(|| pg.stop_immediate());
    let down = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let restarting = Instant::now();
    tokio::task::block_in_place(|| pg.start_again());
    let up = Instant::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let report = load.stop().await;

    let no_answer: Vec<_> = report.failed().collect();
    assert!(
        no_answer.is_empty(),
        "{} requests got no answer, e.g. {:?}",
        no_answer.len(),
        no_answer.first().map(|a| &a.outcome)
    );
    let statuses = report.status_counts();
    let unexpected: Vec<_> = statuses
        .keys()
        .filter(|s| !matches!(s, 200 | 201 | 503))
        .collect();
    assert!(unexpected.is_empty(), "answers by status: {statuses:?}");
    // Sent well inside the outage: a fast answer comes before PostgreSQL is back.
    let (from, to) = (down + Duration::from_millis(200), restarting - FAST);
    let during: Vec<_> = report
        .attempts
        .iter()
        .filter(|a| a.sent_at >= from && a.sent_at < to)
        .collect();
    let slow: Vec<_> = during
        .iter()
        .filter(|a| {
            !matches!(
                &a.outcome,
                Outcome::Answered {
                    status: 503,
                    retry_after: Some(_),
                    ..
                }
            ) || a.latency > FAST
        })
        .collect();
    let slowest_in_flight = report
        .attempts
        .iter()
        .filter(|a| a.sent_at < to && a.ended_at() > from)
        .map(|a| a.latency)
        .max();
    assert!(
        !during.is_empty() && slow.is_empty(),
        "during the outage every answer is a 503 with Retry-After within {FAST:?}: {} requests were \
         sent during it, {} of them not answered so (e.g. {:?}); the slowest request in flight during \
         the outage took {slowest_in_flight:?}; answers by status: {statuses:?}",
        during.len(),
        slow.len(),
        slow.first().map(|a| (&a.outcome, a.latency))
    );
    let after: Vec<_> = report
        .attempts
        .iter()
        .filter(|a| a.sent_at >= up + Duration::from_secs(2))
        .collect();
    assert!(
        !after.is_empty() && after.iter().all(|a| a.acknowledged()),
        "2 s after PostgreSQL is back every command succeeds: {} of {}",
        after.iter().filter(|a| a.acknowledged()).count(),
        after.len()
    );
    let facts = settled_facts(&api).await;
    let logged: HashSet<&str> = facts
        .iter()
        .filter(|e| e["type"] == MESSAGE_ADDED)
        .filter_map(|e| e["data"]["id"].as_str())
        .collect();
    let lost: Vec<_> = report
        .acknowledged()
        .filter(|a| !a.id().is_some_and(|id| logged.contains(id)))
        .map(|a| a.key.clone())
        .collect();
    assert!(lost.is_empty(), "acknowledged but not in the log: {lost:?}");
    eprintln!(
        "FIGURE PostgreSQL stopped and started under load: {} requests, answers by status {statuses:?}, \
         {} sent during the outage all answered 503 within {FAST:?} (slowest in flight {slowest_in_flight:?}), \
         {} acknowledged, 0 lost",
        report.attempts.len(),
        during.len(),
        report.acknowledged().count()
    );
}
