//! Durability: every fact acknowledged with `201` is in the log after a restart on the
//! same store, and commands after the restart continue the aggregates' streams.

use std::collections::BTreeMap;

use pm_tests::{on_both_backends, TestDb, TestService};
use serde_json::json;

use crate::support::{
    checkpoint, created, message, task, task_checkpoint, wait_events, world, FACTS,
};

async fn acknowledged_facts_survive_a_restart(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = world(&svc).await;
    // id -> X-Event-Position of every acknowledged fact (the world's are looked up below).
    let mut acknowledged = BTreeMap::new();
    for i in 0..26 {
        let id = match i % 4 {
            0 => message(&svc, &w.conversation, &w.actor, &format!("m{i}")).await,
            1 => {
                let r = task_checkpoint(&svc, &w.task, "WORK_STARTED").await;
                created(&r);
                acknowledged.insert(r.id(), r.header("x-event-position").map(str::to_string));
                continue;
            }
            2 => checkpoint(&svc, &w.conversation, "BEGIN_WORK").await,
            _ => task(&svc, &w.conversation, &w.begin_work).await,
        };
        acknowledged.insert(id, None);
    }
    for id in [&w.actor, &w.conversation, &w.begin_work, &w.task] {
        acknowledged.insert(id.clone(), None);
    }
    assert_eq!(acknowledged.len(), 30);
    let before = wait_events(&svc, FACTS, 30).await;
    assert_eq!(before.len(), 30, "one fact per command");
    svc.stop().await;

    let svc = TestService::start(&db, "").await;
    let after = wait_events(&svc, FACTS, 30).await;
    assert_eq!(after, before, "the log is the same after the restart");
    for (id, position) in &acknowledged {
        let event = after
            .iter()
            .find(|e| e["data"]["id"] == id.as_str())
            .unwrap_or_else(|| panic!("acknowledged fact {id} is missing"));
        if let Some(position) = position {
            assert_eq!(event["position"], position.as_str());
        }
    }

    // The old task's stream continues: 1 created + 7 checkpoints, so the next is 9.
    let r = task_checkpoint(&svc, &w.task, "WORK_COMPLETED").await;
    created(&r);
    let query = format!(
        "conversation_id={}&types=project_manager.task.checkpoint.created",
        w.conversation
    );
    let checkpoints = wait_events(&svc, &query, 8).await;
    let last = checkpoints.last().expect("a checkpoint");
    assert_eq!(last["data"]["id"], r.id().as_str());
    assert_eq!(last["sequence"], "9", "sequence is a string");
    assert_eq!(last["position"].as_str(), r.header("x-event-position"));
    // Commands whose preconditions look up entities written before the restart.
    let new_task = task(&svc, &w.conversation, &w.begin_work).await;
    let path = format!("/v1/conversations/{}/messages", w.conversation);
    let body = json!({"actor_id": w.actor, "content": "after the restart", "task_id": new_task});
    created(&svc.post(None, &path, &body).await);
    let body = json!({"actor_ids": [w.actor], "title": "after the restart"});
    created(&svc.post(None, "/v1/conversations", &body).await);
    assert_eq!(wait_events(&svc, FACTS, 34).await.len(), 34);
    svc.stop().await;
}

on_both_backends!(acknowledged_facts_survive_a_restart);
