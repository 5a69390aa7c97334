//! Every command through the client: `201` → `Created` with position and location; an
//! identical repeat onto a derived id → `200` `Existing` without a fact; refusals as
//! `Error::Problem` with the rule's code, returned at once (no retry) and without a fact.

use pm_client::{codes, ids, ActorKind, CheckpointType, TaskCheckpointType, Uuid, WriteStatus};
use pm_tests::{on_both_backends, TestDb, ADMIN, INGRESS, LLM};

use crate::support::{
    actor_input, checkpoint_input, client, conversation_input, log_len, message_input, progress,
    promptly, start, strict, task_input, world,
};

async fn every_command_answers_its_created_fact(db: TestDb) {
    let svc = start(&db).await;
    let (ingress, llm) = (client(&svc, INGRESS), client(&svc, LLM));
    let human = ingress
        .register_actor(actor_input(ActorKind::Human, "Alice", Some("gh:alice")))
        .await
        .expect("actor");
    assert_eq!(human.status, WriteStatus::Created);
    assert_eq!(human.entity.id, ids::actor_id("gh:alice"));
    assert_eq!(
        human.location.as_deref(),
        Some(format!("/v1/actors/{}", human.entity.id).as_str())
    );
    let conversation = ingress
        .start_conversation(conversation_input(
            vec![human.entity.id],
            "acme",
            Some("t-1"),
        ))
        .await
        .expect("conversation");
    let cid = conversation.entity.id;
    assert_eq!(cid, ids::conversation_id("tests", "t-1"));
    let checkpoint = llm
        .create_conversation_checkpoint(cid, checkpoint_input(CheckpointType::BeginWork))
        .await
        .expect("checkpoint");
    assert_eq!(checkpoint.entity.conversation_id, cid);
    let task = llm
        .create_task(cid, task_input(checkpoint.entity.id, Some(human.entity.id)))
        .await
        .expect("task");
    assert_eq!(task.entity.assigned_to, Some(human.entity.id));
    let started = llm
        .create_task_checkpoint(task.entity.id, progress(TaskCheckpointType::WorkStarted))
        .await
        .expect("task checkpoint");
    assert_eq!(started.entity.task_id, task.entity.id);
    let message = ingress
        .add_message(cid, message_input(human.entity.id, "hello", Some("m-1")))
        .await
        .expect("message");
    assert_eq!(message.entity.id, ids::message_id(cid, "m-1"));
    let positions = [
        &human.position,
        &conversation.position,
        &checkpoint.position,
        &task.position,
        &started.position,
        &message.position,
    ];
    assert!(positions.iter().all(|p| p.is_some()));
    for (i, a) in positions.iter().enumerate() {
        assert!(
            positions[i + 1..].iter().all(|b| b != a),
            "positions are distinct"
        );
    }
    for (location, prefix) in [
        (
            &checkpoint.location,
            format!("/v1/conversations/{cid}/checkpoints/"),
        ),
        (&task.location, "/v1/tasks/".to_string()),
        (
            &started.location,
            format!("/v1/tasks/{}/checkpoints/", task.entity.id),
        ),
        (
            &message.location,
            format!("/v1/conversations/{cid}/messages/"),
        ),
    ] {
        assert!(
            location.as_deref().is_some_and(|l| l.starts_with(&prefix)),
            "{location:?}"
        );
    }
    assert_eq!(log_len(&svc).await, 6);
    svc.stop().await;
}

async fn identical_repeats_onto_derived_ids_are_existing(db: TestDb) {
    let svc = start(&db).await;
    let ingress = client(&svc, INGRESS);
    let actor = actor_input(ActorKind::Human, "Bob", Some("gh:bob"));
    let first = ingress.register_actor(actor.clone()).await.expect("first");
    let again = ingress.register_actor(actor).await.expect("again");
    assert_eq!(
        (first.status, again.status),
        (WriteStatus::Created, WriteStatus::Existing)
    );
    assert_eq!(again.entity, first.entity);
    assert_eq!(again.position, None);
    let input = conversation_input(vec![first.entity.id], "acme", Some("t-2"));
    let c1 = ingress
        .start_conversation(input.clone())
        .await
        .expect("first");
    let c2 = ingress.start_conversation(input).await.expect("again");
    assert_eq!(
        (c2.status, c2.entity.id),
        (WriteStatus::Existing, c1.entity.id)
    );
    let m = message_input(first.entity.id, "hi", Some("m-9"));
    let m1 = ingress
        .add_message(c1.entity.id, m.clone())
        .await
        .expect("first");
    let m2 = ingress.add_message(c1.entity.id, m).await.expect("again");
    assert_eq!(
        (m2.status, m2.entity.id),
        (WriteStatus::Existing, m1.entity.id)
    );
    assert!(
        !m2.replayed,
        "a new call has a new key: Existing comes from the derived id"
    );
    assert_eq!(log_len(&svc).await, 3);
    svc.stop().await;
}

async fn refusals_are_problems_with_their_code_and_never_retried(db: TestDb) {
    let svc = start(&db).await;
    let admin = client(&svc, ADMIN);
    let w = world(&admin, "acme").await;
    let cid = w.conversation.entity.id;
    let before = log_len(&svc).await;
    let strict_admin = strict(&svc, ADMIN);
    let nobody = Uuid::now_v7();

    let e = promptly(
        strict_admin
            .create_conversation_checkpoint(nobody, checkpoint_input(CheckpointType::BeginWork))
            .send(),
    )
    .await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(404), Some(codes::CONVERSATION_NOT_FOUND))
    );
    assert!(e.is_not_found() && !e.is_retryable());
    let e = promptly(
        strict_admin
            .create_task_checkpoint(nobody, progress(TaskCheckpointType::WorkPaused))
            .send(),
    )
    .await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(404), Some(codes::TASK_NOT_FOUND))
    );
    let e = promptly(
        strict_admin
            .start_conversation(conversation_input(vec![nobody], "acme", None))
            .send(),
    )
    .await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(422), Some(codes::ACTOR_NOT_FOUND))
    );
    let e = promptly(
        strict_admin
            .create_task(cid, task_input(nobody, None))
            .send(),
    )
    .await;
    assert_eq!(e.code(), Some(codes::CHECKPOINT_NOT_FOUND));
    let need = admin
        .create_conversation_checkpoint(cid, checkpoint_input(CheckpointType::NeedInformation))
        .await
        .expect("checkpoint");
    let e = promptly(
        strict_admin
            .create_task(cid, task_input(need.entity.id, None))
            .send(),
    )
    .await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(422), Some(codes::CHECKPOINT_NOT_BEGIN_WORK))
    );
    let mut input = message_input(w.human.entity.id, "x", None);
    input.task_id = Some(nobody);
    let e = promptly(strict_admin.add_message(cid, input).send()).await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(422), Some(codes::TASK_NOT_FOUND))
    );
    // Same derived id, other content.
    let keyed = conversation_input(vec![w.human.entity.id], "acme", Some("t-3"));
    admin
        .start_conversation(keyed.clone())
        .await
        .expect("first");
    let mut other = keyed;
    other.organization = Some(pm_client::label("globex").expect("text"));
    let e = promptly(strict_admin.start_conversation(other).send()).await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(409), Some(codes::CONVERSATION_EXISTS))
    );
    assert!(e.is_conflict());
    admin
        .register_actor(actor_input(ActorKind::Human, "Carol", Some("gh:carol")))
        .await
        .expect("first");
    let e = promptly(
        strict_admin
            .register_actor(actor_input(ActorKind::Human, "Caroline", Some("gh:carol")))
            .send(),
    )
    .await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(409), Some(codes::ALREADY_EXISTS))
    );
    // A role that may not: 403, never retried.
    let e = promptly(
        strict(&svc, INGRESS)
            .create_conversation_checkpoint(cid, checkpoint_input(CheckpointType::BeginWork))
            .send(),
    )
    .await;
    assert_eq!((e.status(), e.code()), (Some(403), Some(codes::FORBIDDEN)));
    assert!(e.is_auth());
    let e = promptly(strict(&svc, "wrong").read().actor(w.human.entity.id)).await;
    assert_eq!(e.code(), Some(codes::UNAUTHORIZED));

    // Only the three successful commands above wrote facts.
    assert_eq!(log_len(&svc).await, before + 3);
    svc.stop().await;
}

on_both_backends!(
    every_command_answers_its_created_fact,
    identical_repeats_onto_derived_ids_are_existing,
    refusals_are_problems_with_their_code_and_never_retried,
);
