//! `Idempotency-Key` through the client: a reused key gets the first answer again (same
//! entity, same position, `replayed`) and no new fact; a key reused for another request is
//! refused; calls without a key of their own get a fresh key each.

use pm_client::{codes, CheckpointType, WriteStatus};
use pm_tests::{on_both_backends, TestDb, ADMIN, INGRESS, LLM};

use crate::support::{
    checkpoint_input, client, log_len, message_input, promptly, start, strict, world,
};

async fn a_reused_key_gets_the_first_answer_without_a_new_fact(db: TestDb) {
    let svc = start(&db).await;
    let w = world(&client(&svc, ADMIN), "acme").await;
    let cid = w.conversation.entity.id;
    let llm = client(&svc, LLM);
    let before = log_len(&svc).await;
    let send = || {
        llm.create_conversation_checkpoint(cid, checkpoint_input(CheckpointType::NeedInformation))
            .idempotency_key("decision-77")
    };
    let first = send().await.expect("first");
    let again = send().await.expect("again");
    assert!(!first.replayed && again.replayed);
    assert_eq!(again.status, WriteStatus::Created, "the same answer: 201");
    assert_eq!(again.entity, first.entity);
    assert_eq!(again.position, first.position);
    assert_eq!(again.location, first.location);
    assert_eq!(again.idempotency_key.as_deref(), Some("decision-77"));
    assert_eq!(log_len(&svc).await, before + 1);

    // The same key for another request: refused at once.
    let other = strict(&svc, LLM)
        .create_conversation_checkpoint(cid, checkpoint_input(CheckpointType::CloseConversation))
        .idempotency_key("decision-77");
    let e = promptly(other.send()).await;
    assert_eq!(
        (e.status(), e.code()),
        (Some(422), Some(codes::IDEMPOTENCY_KEY_REUSED))
    );

    // Without a key of their own, identical calls are two commands (two keys).
    let a = llm
        .create_conversation_checkpoint(cid, checkpoint_input(CheckpointType::BeginWork))
        .await
        .expect("a");
    let b = llm
        .create_conversation_checkpoint(cid, checkpoint_input(CheckpointType::BeginWork))
        .await
        .expect("b");
    assert_ne!(a.entity.id, b.entity.id);
    assert_ne!(a.idempotency_key, b.idempotency_key);
    assert_eq!(log_len(&svc).await, before + 3);
    svc.stop().await;
}

async fn keys_are_scoped_to_the_role(db: TestDb) {
    let svc = start(&db).await;
    let w = world(&client(&svc, ADMIN), "acme").await;
    let cid = w.conversation.entity.id;
    let input = message_input(w.human.entity.id, "same words", None);
    let by_ingress = client(&svc, INGRESS)
        .add_message(cid, input.clone())
        .idempotency_key("k-1")
        .await
        .expect("ingress");
    // Another principal that may speak as the same person (an LLM may not: speak_for.rs).
    let by_admin = client(&svc, ADMIN)
        .add_message(cid, input)
        .idempotency_key("k-1")
        .await
        .expect("admin");
    assert!(!by_admin.replayed);
    assert_ne!(by_admin.entity.id, by_ingress.entity.id);
    svc.stop().await;
}

on_both_backends!(
    a_reused_key_gets_the_first_answer_without_a_new_fact,
    keys_are_scoped_to_the_role,
);
