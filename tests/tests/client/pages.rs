//! Lists page by page and walked to the end, and read-your-writes: a reader made with
//! `Client::after` sees the write at once.

use futures::TryStreamExt;
use pm_client::{ConversationQuery, TaskCheckpointType, TaskStatus};
use pm_tests::{on_both_backends, TestDb, ADMIN, LLM};

use crate::support::{client, conversation_input, progress, start, world};

async fn pages_walk_every_item_once_in_order(db: TestDb) {
    let svc = start(&db).await;
    let admin = client(&svc, ADMIN);
    let w = world(&admin, "acme").await;
    let mut last = w.message.clone().position;
    for i in 0..6 {
        let input = conversation_input(vec![w.human.entity.id], &format!("org-{i}"), None);
        last = admin
            .start_conversation(input)
            .await
            .expect("conversation")
            .position;
    }
    let read = admin.at(last.expect("position"));
    let first = read
        .conversations(&ConversationQuery::new().limit(3))
        .await
        .expect("page");
    assert_eq!(first.items.len(), 3);
    let cursor = first.next_cursor.clone().expect("more pages");
    let second = read
        .conversations(&ConversationQuery::new().limit(3).cursor(cursor))
        .await
        .expect("page");
    assert_eq!(second.items.len(), 3);
    let walked: Vec<_> = read
        .walk(ConversationQuery::new().limit(2))
        .try_collect()
        .await
        .expect("walk");
    let ids: Vec<_> = walked.iter().map(|c| c.conversation.id).collect();
    assert_eq!(ids.len(), 7);
    let paged: Vec<_> = first
        .items
        .iter()
        .chain(&second.items)
        .map(|c| c.conversation.id)
        .collect();
    assert_eq!(ids[..6], paged[..]);
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 7);
    let created: Vec<_> = walked.iter().map(|c| c.conversation.created_at).collect();
    assert!(created.windows(2).all(|p| p[0] <= p[1]), "by created_at");
    svc.stop().await;
}

async fn reads_after_a_write_see_it(db: TestDb) {
    let svc = start(&db).await;
    let w = world(&client(&svc, ADMIN), "acme").await;
    let llm = client(&svc, LLM);
    let task = w.task.entity.id;
    for kind in [
        TaskCheckpointType::WorkPaused,
        TaskCheckpointType::WorkStarted,
        TaskCheckpointType::WorkCompleted,
        TaskCheckpointType::WorkRejected,
        TaskCheckpointType::WorkApproved,
    ] {
        let written = llm
            .create_task_checkpoint(task, progress(kind))
            .await
            .expect("checkpoint");
        let reader = llm.after(&written);
        assert_eq!(reader.min_position(), written.position.as_ref());
        let detail = reader.task(task).await.expect("task");
        assert_eq!(detail.task.status, TaskStatus::Latest(kind));
        assert_eq!(
            detail.checkpoints.last().map(|c| c.checkpoint.id),
            Some(written.entity.id)
        );
        let tc = llm
            .after(&written)
            .task_checkpoint(task, written.entity.id)
            .await
            .expect("at once");
        assert_eq!(tc.checkpoint, written.entity);
    }
    svc.stop().await;
}

on_both_backends!(
    pages_walk_every_item_once_in_order,
    reads_after_a_write_see_it,
);
