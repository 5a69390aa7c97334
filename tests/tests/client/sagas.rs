//! The sagas through the client: sessions, agents, turns and anomalies as typed reads
//! with read-your-writes, and the operator controls with their `409` and `404` codes.

use pm_client::{
    AgentQuery, AgentRole, AgentState, AnomalyQuery, SessionQuery, SessionState, TurnInput,
    TurnQuery, TurnState, Uuid,
};
use pm_tests::{on_both_backends, TestDb, ADMIN, LLM};

use crate::support::{client, start, world};

async fn saga_reads_and_controls(db: TestDb) {
    let svc = start(&db).await;
    let admin = client(&svc, ADMIN);
    let w = world(&admin, "acme").await;
    let cid = w.conversation.entity.id;

    // The root agent acts for the conversation's ai actor, which the task is assigned
    // to: it runs the task's turn (streaming since WORK_STARTED), and the human
    // message's turn waits in its inbox (one turn at a time).
    let read = admin.after(&w.message);
    let session = read.session(cid).await.expect("session");
    assert_eq!(session.state, SessionState::Active);
    let active = read
        .sessions(&SessionQuery::new().state(SessionState::Active))
        .await
        .expect("sessions");
    assert!(active.items.contains(&session), "{active:?}");
    let paused = read
        .sessions(&SessionQuery::new().state(SessionState::Paused))
        .await
        .expect("sessions");
    assert!(paused.items.iter().all(|s| s.conversation_id != cid));
    let agents = read
        .agents(&AgentQuery::new().conversation_id(cid))
        .await
        .expect("agents");
    let root = agents
        .items
        .iter()
        .find(|a| a.role == AgentRole::Root)
        .expect("a root agent");
    assert_eq!(root.actor_id, Some(w.ai.entity.id));
    assert_eq!(Some(root.id), session.root_agent_id);
    assert_eq!(read.agent(root.id).await.expect("agent"), *root);
    let turns = read
        .turns(&TurnQuery::new().agent_id(root.id))
        .await
        .expect("turns");
    let task_id = w.task.entity.id;
    let working = turns
        .items
        .iter()
        .find(|t| t.input == TurnInput::Task { task_id })
        .expect("the task's turn");
    assert_eq!(working.state, TurnState::Streaming, "{turns:?}");
    assert_eq!(root.active_turn_id, Some(working.id));
    let message_id = w.message.entity.id;
    let waiting = turns
        .items
        .iter()
        .find(|t| t.input == TurnInput::Message { message_id })
        .expect("the message's turn");
    assert_eq!(waiting.state, TurnState::Queued);
    assert_eq!(root.queued_turn_ids, vec![waiting.id]);
    assert_eq!(read.turn(waiting.id).await.expect("turn"), *waiting);
    let task_turns = read
        .turns(&TurnQuery::new().task_id(task_id))
        .await
        .expect("task turns");
    assert_eq!(task_turns.items, vec![working.clone()]);

    // Controls: admin only; a control the state has no edge for is a 409 with its code.
    let llm = client(&svc, LLM);
    let refused = llm.pause_session(cid).await.expect_err("llm may not pause");
    assert_eq!(refused.status(), Some(403));
    let paused = admin.pause_session(cid).await.expect("pause");
    assert_eq!(paused.view.state, SessionState::Paused);
    let position = paused.position.clone().expect("the pause's position");
    let again = admin.pause_session(cid).await.expect_err("paused twice");
    assert_eq!(
        (again.status(), again.code()),
        (Some(409), Some("session_transition_not_allowed"))
    );
    // A pause stops dispatching; the running turn goes on.
    let still = admin.at(position).turn(working.id).await.expect("turn");
    assert_eq!(still.state, TurnState::Streaming);
    let resumed = admin.resume_session(cid).await.expect("resume");
    assert_eq!(resumed.view.state, SessionState::Active);

    let killed = admin.kill_agent(root.id).await.expect("kill");
    assert_eq!(killed.view.state, AgentState::Terminated);
    let again = admin.kill_agent(root.id).await.expect_err("killed twice");
    assert_eq!(
        (again.status(), again.code()),
        (Some(409), Some("agent_transition_not_allowed"))
    );
    let nobody = Uuid::new_v4();
    let missing = admin.kill_agent(nobody).await.expect_err("no such agent");
    assert_eq!(missing.code(), Some("agent_not_found"));
    let missing = admin.read().session(nobody).await.expect_err("no session");
    assert!(missing.is_not_found(), "{missing:?}");
    assert_eq!(missing.code(), Some("session_not_found"));

    // A kill interrupts the running turn and the queued ones.
    let at_kill = admin.at(killed.position.expect("the kill's position"));
    for turn in [working.id, waiting.id] {
        let turn = at_kill.turn(turn).await.expect("turn");
        assert_eq!(turn.state, TurnState::Interrupted, "{turn:?}");
    }
    let anomalies = at_kill
        .anomalies(&AnomalyQuery::new().conversation_id(cid))
        .await
        .expect("anomalies");
    assert!(anomalies.items.is_empty(), "{:?}", anomalies.items);
    svc.stop().await;
}

on_both_backends!(saga_reads_and_controls);
