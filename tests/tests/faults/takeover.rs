//! Defect 4: fast takeover after a crash. Three replicas on one PostgreSQL database;
//! under a light command load the read-model owner is killed with `kill -9`. Within one
//! second a survivor leads the read model, a command posted after the kill is readable
//! with `?min_position=` on a survivor, and `/readyz` names a living owner with the true
//! lag. Every event is applied once: the conversation's `message_count` equals the
//! `message.added` facts in the log.

use std::time::{Duration, Instant};

use pm_tests::http::{read_model, Api};
use pm_tests::load::{Load, LoadConfig};
use pm_tests::TestDb;
use serde_json::Value;

use crate::support::{poll, serial, settled_facts, start, MESSAGE_ADDED};

const LIMIT: Duration = Duration::from_millis(1000);
/// How long the test keeps watching (to report how long a slow takeover took).
const WATCH: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_read_model_owner_is_replaced_within_a_second() {
    let _serial = serial().await;
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("PM_DB_POOL_SIZE", "8"),
        ("PM_LOG_POLL_MS", "50"),
    ];
    let mut replicas = vec![start(&env).await, start(&env).await, start(&env).await];
    let mut owners = Vec::new();
    for r in &replicas {
        let report = r.api().processors().await.expect("report");
        owners.push(
            report["this_replica"]["owner"]
                .as_str()
                .expect("this_replica.owner")
                .to_string(),
        );
    }
    let report = replicas[0].api().processors().await.expect("report");
    let owner = read_model(&report)["lease_owner"]
        .as_str()
        .expect("the read model has an owner")
        .to_string();
    let dead = owners
        .iter()
        .position(|o| *o == owner)
        .unwrap_or_else(|| panic!("owner {owner} is none of the replicas {owners:?}"));
    let survivors: Vec<Api> = (0..replicas.len())
        .filter(|i| *i != dead)
        .map(|i| replicas[i].api().clone())
        .collect();
    let living: Vec<String> = (0..owners.len())
        .filter(|i| *i != dead)
        .map(|i| owners[i].clone())
        .collect();

    let api = survivors[0].clone();
    let actor = api.actor().await;
    let conversation = api.conversation(&actor).await;
    // A light load on both survivors and on the owner.
    let loads: Vec<Load> = (0..replicas.len())
        .map(|i| {
            Load::start(
                LoadConfig::messages(replicas[i].api(), &conversation, &actor)
                    .workers(1)
                    .interval(Duration::from_millis(20))
                    .request_timeout(Duration::from_secs(5)),
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;

    let killed = Instant::now();
    replicas[dead].kill9();
    let probe = survivors[1]
        .message(&conversation, &actor, "posted after the kill")
        .await;
    let position = probe
        .header("x-event-position")
        .expect("X-Event-Position")
        .to_string();
    let location = probe.header("location").expect("Location").to_string();

    // Read-your-write on a survivor, timed from the kill.
    let reader = {
        let api = survivors[0].clone();
        tokio::spawn(async move {
            let deadline = killed + WATCH;
            loop {
                let r = api
                    .get(&format!("{location}?min_position={position}"))
                    .await;
                if r.as_ref().is_ok_and(|r| r.status == 200) {
                    return Some(killed.elapsed());
                }
                if Instant::now() >= deadline {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let (mut leader_at, mut ready_at) = (None, None);
    let mut last_ready = Value::Null;
    while (leader_at.is_none() || ready_at.is_none()) && killed.elapsed() < WATCH {
        for s in &survivors {
            if leader_at.is_none() {
                if let Ok(r) = s.processors().await {
                    if r["this_replica"]["read_model"]["leader"] == true {
                        leader_at = Some(killed.elapsed());
                    }
                }
            }
        }
        if ready_at.is_none() {
            if let Ok(r) = survivors[1].get("/readyz").await {
                let rm = read_model(&r.json);
                let named = rm["lease_owner"].as_str().unwrap_or_default();
                let lag = rm["lag_events"].as_i64().unwrap_or(-1);
                let honest = lag > 0 || (lag == 0 && rm["position"] == r.json["head"]);
                if r.status == 200 && living.iter().any(|o| o == named) && honest {
                    ready_at = Some(killed.elapsed());
                }
                last_ready = r.json;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let read_at = reader.await.expect("reader");
    eprintln!(
        "FIGURE takeover after kill -9 of the owner: a survivor owned after {leader_at:?}, a command \
         posted after the kill was readable after {read_at:?}, /readyz named a live owner after {ready_at:?}"
    );
    let mut reports = Vec::new();
    for load in loads {
        reports.push(load.stop().await);
    }
    assert!(
        leader_at.is_some_and(|t| t <= LIMIT) && read_at.is_some_and(|t| t <= LIMIT),
        "after kill -9 of the read-model owner: a survivor led after {leader_at:?} and a command \
         posted after the kill was readable after {read_at:?} (must be <= {LIMIT:?}; None = not within {WATCH:?})"
    );
    assert!(
        ready_at.is_some_and(|t| t <= LIMIT),
        "/readyz on a survivor named a living owner {living:?} with the true lag after {ready_at:?} \
         (must be <= {LIMIT:?}); last: {last_ready}"
    );

    // Each event applied once.
    let facts = settled_facts(&api).await;
    let messages = facts
        .iter()
        .filter(|e| {
            e["type"] == MESSAGE_ADDED && e["data"]["conversation_id"] == conversation.as_str()
        })
        .count();
    let acknowledged: usize = reports.iter().map(|r| r.acknowledged().count()).sum();
    assert!(
        messages > acknowledged,
        "the load's messages are in the log"
    );
    let counted = poll(Duration::from_secs(10), || {
        let api = api.clone();
        let path = format!("/v1/conversations/{conversation}");
        async move {
            let view = api.get(&path).await.ok()?;
            (view.json["message_count"].as_u64() == Some(messages as u64)).then_some(())
        }
    })
    .await;
    let view = api
        .must_get(&format!("/v1/conversations/{conversation}"))
        .await;
    assert!(
        counted.is_some(),
        "the read model counts {} messages, the log holds {messages}",
        view.json["message_count"]
    );
}
