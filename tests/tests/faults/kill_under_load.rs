//! Fault run: `kill -9` under load. A process serves 16 workers posting keyed messages;
//! after ~2 s it is killed; a new process on the same database gets a retry of every key
//! that had no answer (same body, same key) and of a sample of answered keys. Every retry
//! is answered 2xx (never `409 idempotency_key_in_use`, never a second fact), every
//! acknowledged fact is in the log exactly once, and the read model counts them all.

use std::collections::HashMap;
use std::time::Duration;

use pm_tests::load::{attempt, Attempt, Load, LoadConfig};
use pm_tests::TestDb;

use crate::support::{poll, settled_facts, start, MESSAGE_ADDED};

async fn kill9_under_load_loses_and_duplicates_nothing(db: TestDb) {
    let env = [("DATABASE_URL", db.url.as_str()), ("PM_DB_POOL_SIZE", "8")];
    let mut first = start(&env).await;
    let api = first.api().clone();
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;
    let config = LoadConfig::messages(&api, &conversation, &actor)
        .workers(16)
        .request_timeout(Duration::from_secs(5));
    let load = Load::start(config.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    first.kill9();
    let report = load.stop().await;
    // A 503 (the store busy past the acquire timeout) invites a retry, like no answer.
    let retry_later = |a: &&Attempt| a.status() == Some(503);
    let unanswered: Vec<&Attempt> = report
        .failed()
        .chain(report.attempts.iter().filter(retry_later))
        .collect();
    let answered: Vec<&Attempt> = report.acknowledged().collect();
    assert!(
        answered.len() > 16,
        "the load ran before the kill: {:?}",
        report.status_counts()
    );
    let unexpected: Vec<_> = report
        .attempts
        .iter()
        .filter(|a| a.status().is_some() && !a.acknowledged() && a.status() != Some(503))
        .collect();
    assert!(
        unexpected.is_empty(),
        "non-2xx answers before the kill: {unexpected:?}"
    );

    let second = start(&env).await;
    let api = second.api().clone();
    let step = (answered.len() / 20).max(1);
    let sample: Vec<&Attempt> = answered.iter().step_by(step).copied().collect();
    let retries = futures::future::join_all(
        unanswered
            .iter()
            .chain(sample.iter())
            .map(|a| attempt(&api, &a.path, &a.key, &a.body)),
    )
    .await;
    let bad: Vec<String> = retries
        .iter()
        .filter(|r| !r.acknowledged())
        .map(|r| format!("{}: {:?}", r.key, r.outcome))
        .collect();
    assert!(
        bad.is_empty(),
        "after kill -9 and a restart, {} of {} retries (of {} unanswered and {} answered keys) were not 2xx: {:#?}",
        bad.len(),
        retries.len(),
        unanswered.len(),
        sample.len(),
        &bad[..bad.len().min(5)]
    );
    let originals: HashMap<&str, &Attempt> =
        answered.iter().map(|a| (a.key.as_str(), *a)).collect();
    for r in &retries {
        if let Some(original) = originals.get(r.key.as_str()) {
            assert_eq!(
                (r.id(), r.position()),
                (original.id(), original.position()),
                "key {}: the replay differs from the first answer",
                r.key
            );
        }
    }

    // Every acknowledged fact exactly once; no key twice.
    let facts = settled_facts(&api).await;
    let mut by_key: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in facts.iter().filter(|e| e["type"] == MESSAGE_ADDED) {
        let key = e["data"]["content"].as_str().unwrap_or_default();
        by_key
            .entry(key)
            .or_default()
            .push(e["data"]["id"].as_str().unwrap_or_default());
    }
    let doubled: Vec<_> = by_key.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(
        doubled.is_empty(),
        "keys with more than one fact: {doubled:?}"
    );
    for a in answered.iter().copied().chain(retries.iter()) {
        let ids = by_key.get(a.key.as_str()).cloned().unwrap_or_default();
        assert_eq!(
            ids,
            vec![a.id().unwrap_or_default()],
            "key {}: acknowledged as {:?}, facts in the log {ids:?}",
            a.key,
            a.id()
        );
    }

    // Projected, once each.
    let messages = by_key.values().map(Vec::len).sum::<usize>() as u64;
    let path = format!("/v1/conversations/{conversation}");
    let counted = poll(Duration::from_secs(10), || {
        let (api, path) = (api.clone(), path.clone());
        async move {
            let view = api.get(&path).await.ok()?;
            (view.json["message_count"].as_u64() == Some(messages)).then_some(())
        }
    })
    .await;
    let view = api.must_get(&path).await;
    assert!(
        counted.is_some(),
        "the read model counts {} messages, the log holds {messages}",
        view.json["message_count"]
    );
    eprintln!(
        "FIGURE kill -9 under load: {} acknowledged before the kill, {} without an answer (or 503) \
         retried, all {} retries answered with the original fact; {messages} facts in the log, \
         0 lost, 0 duplicated, all projected once",
        answered.len(),
        unanswered.len(),
        retries.len()
    );
    let parked = api.must_get("/v1/admin/processors/read_model/parked").await;
    assert_eq!(
        parked.json["items"].as_array().map(Vec::len),
        Some(0),
        "parked: {}",
        parked.text
    );
}

per_backend!(
    kill9_under_load_loses_and_duplicates_nothing,
    sqlite: [],
    postgres: []
);
