//! Fault run: `kill -9` of a service whose turns' spans wait for a collector that is away
//! (issue 34). A turn ends while the collector answers `503` (the OTLP processor's cursor
//! waits before the turn's terminal rune); the process is killed; a new one on the same
//! database, the collector back, exports the turn's span — once.

use std::sync::atomic::Ordering;
use std::time::Duration;

use pm_tests::otlp::{text, Collector};
use pm_tests::TestDb;
use serde_json::json;

use crate::support::{human_ai_conversation, poll, start};

async fn kill9_with_a_turns_span_pending_loses_it_not(db: TestDb) {
    let (collector, url) = Collector::start().await;
    collector.down.store(true, Ordering::SeqCst);
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("PM_DB_POOL_SIZE", "8"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
    ];
    let mut first = start(&env).await;
    let api = first.api().clone();
    let (human, _, conv) = human_ai_conversation(&api, "Spans").await;
    api.create(
        &format!("/v1/conversations/{conv}/messages"),
        &json!({"actor_id": human, "content": "please"}),
    )
    .await;
    let claimed = poll(Duration::from_secs(30), || {
        let api = api.clone();
        async move {
            let r = api
                .post("/v1/turns/claim", &json!({"wait_ms": 2000}))
                .await
                .ok()?;
            (r.status == 200).then_some(r)
        }
    })
    .await
    .expect("the turn is claimed");
    let turn = claimed.json["turn"]["id"]
        .as_str()
        .expect("a turn")
        .to_string();
    let epoch = claimed.json["turn_epoch"].to_string();
    let done = api
        .post_with(
            &format!("/v1/conversations/{conv}/checkpoints"),
            &json!({"checkpoint_type": "NEED_INFORMATION", "summary": "which one?"}),
            &[
                ("PM-Turn-Id", turn.as_str()),
                ("PM-Turn-Epoch", epoch.as_str()),
            ],
        )
        .await
        .expect("the checkpoint");
    assert_eq!(done.status, 201, "{}", done.text);
    // The turn ended, and exports were tried (and refused) before the kill.
    let ended = poll(Duration::from_secs(10), || {
        let api = api.clone();
        let path = format!("/v1/turns/{turn}");
        async move {
            let r = api.get(&path).await.ok()?;
            (r.json["state"] == "completed").then_some(())
        }
    })
    .await;
    assert!(ended.is_some(), "the turn completed");
    let refused = poll(Duration::from_secs(30), || {
        let n = collector.refused.load(Ordering::SeqCst);
        async move { (n >= 2).then_some(n) }
    })
    .await;
    assert!(refused.is_some(), "the service tried to export");
    first.kill9();
    assert!(collector.spans().is_empty(), "nothing was taken while away");

    collector.down.store(false, Ordering::SeqCst);
    let second = start(&env).await;
    let spans = collector
        .wait_for("invoke_agent", "pm.turn.id", &turn)
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let exported = collector
        .spans()
        .into_iter()
        .filter(|(_, s)| s.name == "invoke_agent" && text(s, "pm.turn.id") == Some(turn.clone()))
        .count();
    assert_eq!(exported, 1, "the turn's span, once: {spans:?}");
    eprintln!("FIGURE kill -9 with a turn's span pending: exported once after the restart");
    drop(second);
}

per_backend!(
    kill9_with_a_turns_span_pending_loses_it_not,
    sqlite: [],
    postgres: []
);
