//! The follower across a service restart: the service stops (ending the stream and
//! refusing connections), a new one starts on the same port and database, and the
//! follower — polled all along — continues with every event written before and after,
//! none twice, none skipped.

use std::time::Duration;

use futures::StreamExt;
use pm_client::{CheckpointType, LogEvent, TaskCheckpointType};
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN, ANALYST, LLM};
use tokio::sync::mpsc;

use crate::support::{checkpoint_input, client, client_at, config, facts, progress, start, world};

/// Follows the log in a task of its own, forwarding every item.
fn spawn_follower(base: &str) -> mpsc::UnboundedReceiver<Result<LogEvent, pm_client::Error>> {
    let (tx, rx) = mpsc::unbounded_channel();
    let analyst = client_at(base, ANALYST);
    tokio::spawn(async move {
        let mut log = analyst.follow(facts());
        while let Some(item) = log.next().await {
            if tx.send(item).is_err() {
                return;
            }
        }
    });
    rx
}

async fn take(
    rx: &mut mpsc::UnboundedReceiver<Result<LogEvent, pm_client::Error>>,
    n: usize,
) -> Vec<LogEvent> {
    let mut events = Vec::new();
    while events.len() < n {
        let item = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("the follower delivers")
            .expect("the follower runs");
        events.push(item.expect("no error items"));
    }
    events
}

async fn the_follower_resumes_after_a_restart_without_duplicates_or_gaps(db: TestDb) {
    let svc = start(&db).await;
    let base = svc.base.clone();
    let w = world(&client(&svc, ADMIN), "acme").await;
    let (cid, task) = (w.conversation.entity.id, w.task.entity.id);
    let mut rx = spawn_follower(&base);
    let mut seen = take(&mut rx, 7).await;
    let llm = client(&svc, LLM);
    for kind in [CheckpointType::NeedInformation, CheckpointType::BeginWork] {
        llm.create_conversation_checkpoint(cid, checkpoint_input(kind))
            .await
            .expect("written");
    }
    seen.extend(take(&mut rx, 2).await);

    // The service goes away: its streams end, connections are refused for a while.
    svc.stop().await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let bind = base.trim_start_matches("http://");
    let svc = TestService::start_with(config(&db, bind)).await;
    assert_eq!(svc.base, base);
    let llm = client(&svc, LLM);
    for kind in [
        TaskCheckpointType::WorkPaused,
        TaskCheckpointType::WorkStarted,
        TaskCheckpointType::WorkCompleted,
    ] {
        llm.create_task_checkpoint(task, progress(kind))
            .await
            .expect("written");
    }
    seen.extend(take(&mut rx, 3).await);

    // Exactly the log's facts (the follower's filter), in order.
    let log = client(&svc, ADMIN)
        .events(&facts().limit(500))
        .await
        .expect("page");
    assert_eq!(log.items.len(), 12);
    assert_eq!(seen, log.items);
    // And nothing more arrives.
    let extra = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await;
    assert!(extra.is_err(), "no further item: {extra:?}");
    svc.stop().await;
}

on_both_backends!(the_follower_resumes_after_a_restart_without_duplicates_or_gaps);
