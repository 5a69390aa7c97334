//! Every read through the client: entities, lists with each filter, statistics, operator
//! reads, `404`s and bad parameters.

use pm_client::{
    codes, CheckpointQuery, CheckpointType, ConversationQuery, ConversationTaskQuery, GroupKey,
    MessageQuery, Position, StatsGroup, TaskCheckpointType, TaskQuery, TaskStatsView, TaskStatus,
    Uuid,
};
use pm_tests::{on_both_backends, TestDb, ADMIN, ANALYST};

use crate::support::{client, promptly, start, strict, world};

const STARTED: TaskStatus = TaskStatus::Latest(TaskCheckpointType::WorkStarted);

async fn every_read_answers_its_view(db: TestDb) {
    let svc = start(&db).await;
    let admin = client(&svc, ADMIN);
    let acme = world(&admin, "acme").await;
    let globex = world(&admin, "globex").await;
    let read = client(&svc, ANALYST).after(&globex.message);
    let (cid, task_id) = (acme.conversation.entity.id, acme.task.entity.id);

    assert_eq!(
        read.actor(acme.human.entity.id).await.expect("actor"),
        acme.human.entity
    );
    let c = read.conversation(cid).await.expect("conversation");
    // `updated_at` is the time of the latest fact belonging to the conversation.
    assert!(c.conversation.updated_at > acme.conversation.entity.updated_at);
    let mut expected = acme.conversation.entity.clone();
    expected.updated_at = c.conversation.updated_at;
    assert_eq!(c.conversation, expected);
    let latest = c.latest_checkpoint.expect("latest checkpoint");
    assert_eq!(
        (latest.id, latest.checkpoint_type),
        (acme.checkpoint.entity.id, CheckpointType::BeginWork)
    );
    assert_eq!(
        (c.checkpoint_count, c.message_count, c.task_count),
        (1, 1, 1)
    );
    assert_eq!(c.task_counts.get(STARTED), 1);

    let checkpoints = read
        .checkpoints(&CheckpointQuery::of(cid))
        .await
        .expect("checkpoints");
    assert_eq!(
        checkpoints.items,
        std::slice::from_ref(&acme.checkpoint.entity)
    );
    let checkpoint = read
        .checkpoint(cid, acme.checkpoint.entity.id)
        .await
        .expect("checkpoint");
    assert_eq!(checkpoint, acme.checkpoint.entity);
    let about = read
        .messages(&MessageQuery::of(cid).task_id(task_id))
        .await
        .expect("messages");
    assert_eq!(about.items, std::slice::from_ref(&acme.message.entity));
    let by_ai = read
        .messages(&MessageQuery::of(cid).actor_id(acme.ai.entity.id))
        .await
        .expect("messages");
    assert!(by_ai.items.is_empty() && by_ai.next_cursor.is_none());
    let message = read
        .message(cid, acme.message.entity.id)
        .await
        .expect("message");
    assert_eq!(message, acme.message.entity);
    let tasks = read
        .conversation_tasks(&ConversationTaskQuery::of(cid))
        .await
        .expect("tasks");
    assert_eq!(tasks.items.len(), 1);
    assert_eq!(
        (tasks.items[0].task.id, tasks.items[0].status),
        (task_id, STARTED)
    );
    let detail = read.task(task_id).await.expect("task");
    assert_eq!(detail.task.status, STARTED);
    assert!(detail.task.status_changed_at.is_some());
    assert_eq!(detail.task.organization.as_deref(), Some("acme"));
    assert_eq!(detail.checkpoints.len(), 1);
    let tc = read
        .task_checkpoint(task_id, acme.started.entity.id)
        .await
        .expect("task checkpoint");
    assert_eq!(
        (tc.checkpoint.clone(), tc.sequence),
        (acme.started.entity.clone(), 2)
    );

    let conversations = |q: ConversationQuery| {
        let read = read.clone();
        async move {
            read.conversations(&q)
                .await
                .expect("conversations")
                .items
                .len()
        }
    };
    let far = chrono::Utc::now() + chrono::Duration::days(1);
    assert_eq!(conversations(ConversationQuery::new()).await, 2);
    assert_eq!(
        conversations(ConversationQuery::new().organization("acme")).await,
        1
    );
    assert_eq!(
        conversations(ConversationQuery::new().status("open")).await,
        2
    );
    assert_eq!(
        conversations(ConversationQuery::new().external_source("tests")).await,
        0
    );
    assert_eq!(
        conversations(ConversationQuery::new().actor_id(acme.human.entity.id)).await,
        1
    );
    assert_eq!(
        conversations(ConversationQuery::new().created_after(far)).await,
        0
    );
    assert_eq!(
        conversations(ConversationQuery::new().created_before(far)).await,
        2
    );
    let need = ConversationQuery::new().latest_checkpoint_type(CheckpointType::NeedInformation);
    assert_eq!(conversations(need).await, 0);

    let tasks = |q: TaskQuery| {
        let read = read.clone();
        async move { read.tasks(&q).await.expect("tasks").items.len() }
    };
    assert_eq!(tasks(TaskQuery::new().status(STARTED)).await, 2);
    assert_eq!(
        tasks(TaskQuery::new().status(TaskStatus::NotStarted)).await,
        0
    );
    assert_eq!(
        tasks(TaskQuery::new().assigned_to(acme.ai.entity.id)).await,
        1
    );
    assert_eq!(tasks(TaskQuery::new().conversation_id(cid)).await, 1);
    assert_eq!(
        tasks(TaskQuery::new().checkpoint_id(acme.checkpoint.entity.id)).await,
        1
    );
    assert_eq!(tasks(TaskQuery::new().organization("globex")).await, 1);

    let TaskStatsView::All(all) = read.task_stats(StatsGroup::All).await.expect("stats") else {
        panic!("ungrouped stats");
    };
    assert_eq!((all.total, all.counts.get(STARTED)), (2, 2));
    let TaskStatsView::Grouped { groups, .. } = read
        .task_stats(StatsGroup::Organization)
        .await
        .expect("stats")
    else {
        panic!("grouped stats");
    };
    let mut orgs: Vec<_> = groups
        .iter()
        .map(|g| match &g.key {
            GroupKey::Organization { organization } => organization.clone().unwrap_or_default(),
            other => panic!("{other:?}"),
        })
        .collect();
    orgs.sort();
    assert_eq!(orgs, ["acme", "globex"]);
    let by_assignee = read
        .task_stats(StatsGroup::AssignedTo)
        .await
        .expect("stats");
    assert!(matches!(by_assignee, TaskStatsView::Grouped { groups, .. } if groups.len() == 2));
    svc.stop().await;
}

async fn missing_entities_operator_reads_and_bad_parameters(db: TestDb) {
    let svc = start(&db).await;
    let admin = client(&svc, ADMIN);
    let w = world(&admin, "acme").await;
    // Wait for the read model once; the refusals below must come back at once.
    let caught_up = client(&svc, ANALYST).after(&w.message);
    caught_up.actor(w.human.entity.id).await.expect("projected");
    let read = strict(&svc, ANALYST).read();
    let (cid, nobody) = (w.conversation.entity.id, Uuid::now_v7());
    let e = promptly(read.conversation(nobody)).await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(404), Some(codes::CONVERSATION_NOT_FOUND))
    );
    assert_eq!(
        promptly(read.actor(nobody)).await.code(),
        Some(codes::ACTOR_NOT_FOUND)
    );
    assert_eq!(
        promptly(read.task(nobody)).await.code(),
        Some(codes::TASK_NOT_FOUND)
    );
    assert_eq!(
        promptly(read.checkpoint(cid, nobody)).await.code(),
        Some(codes::CHECKPOINT_NOT_FOUND)
    );
    assert_eq!(
        promptly(read.message(cid, nobody)).await.code(),
        Some(codes::MESSAGE_NOT_FOUND)
    );
    let e = promptly(read.task_checkpoint(w.task.entity.id, nobody)).await;
    assert_eq!(e.code(), Some(codes::TASK_CHECKPOINT_NOT_FOUND));
    let e = promptly(read.messages(&MessageQuery::of(nobody))).await;
    assert_eq!(e.code(), Some(codes::CONVERSATION_NOT_FOUND));
    // A cursor of another list, a limit out of range, a token the store cannot have made.
    let page = admin
        .read()
        .tasks(&TaskQuery::new().limit(1))
        .await
        .expect("tasks");
    assert!(page.next_cursor.is_none());
    let e = promptly(read.conversations(&ConversationQuery::new().cursor("00"))).await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(400), Some(codes::INVALID_PARAMETER))
    );
    let e = promptly(read.tasks(&TaskQuery::new().limit(501))).await;
    assert_eq!(e.code(), Some(codes::INVALID_PARAMETER));
    let odd = strict(&svc, ANALYST).at(Position::new("1.2.3").expect("a token"));
    assert_eq!(
        promptly(odd.actor(nobody)).await.code(),
        Some(codes::INVALID_POSITION)
    );

    let report = admin.processors().await.expect("processors");
    assert!(report
        .processors
        .iter()
        .any(|p| p.record.name == "read_model"));
    assert!(admin.parked("read_model").await.expect("parked").is_empty());
    let e = promptly(strict(&svc, ANALYST).processors()).await;
    assert_eq!(e.code(), Some(codes::FORBIDDEN));
    svc.stop().await;
}

on_both_backends!(
    every_read_answers_its_view,
    missing_entities_operator_reads_and_bad_parameters,
);
