//! The sagas end to end through HTTP: a conversation from `conversation.started` to
//! `WORK_COMPLETED` and archive — a question, the auto-decide timeout, three tasks for one
//! worker run one turn at a time, a watchdog timeout, closing — checking the session,
//! agent and turn rows, the runes on the log, the SSE snapshot and that no anomaly was
//! recorded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Duration as Span;
use pm_application::clock::{Clock, ManualClock};
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use project_manager::app::Hooks;
use serde_json::{json, Value};

use crate::reads::{checkpoint, message, post, read, task, task_checkpoint};
use crate::support::{config, events};

/// A service on `db` whose clock the test moves.
pub async fn start(db: &TestDb, clock: &Arc<ManualClock>) -> TestService {
    let hooks = Hooks {
        clock: Some(clock.clone() as Arc<dyn Clock>),
        ..Hooks::default()
    };
    TestService::start_with_hooks(config(db), hooks).await
}

/// Registers an actor of `kind`.
pub async fn actor(svc: &TestService, kind: &str, name: &str) -> String {
    post(
        svc,
        "/v1/actors",
        json!({"kind": kind, "display_name": name}),
    )
    .await
    .id
}

/// Polls `GET path` until `done` holds for its body (10 s at most); returns the body.
pub async fn wait_for(svc: &TestService, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = svc.get(Some(ADMIN), path).await;
        if r.status == 200 && done(&r.json) {
            return r.json;
        }
        assert!(
            Instant::now() < deadline,
            "GET {path} never got there: {} {}",
            r.status,
            r.text
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The items of a saga list read at `min`.
pub async fn items(svc: &TestService, path: &str, min: &str) -> Vec<Value> {
    read(svc, path, min).await["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The types of the conversation's events, in log order.
pub async fn types(svc: &TestService, conversation: &str) -> Vec<String> {
    events(svc, &format!("conversation_id={conversation}"))
        .await
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn count(types: &[String], name: &str) -> usize {
    types.iter().filter(|t| *t == name).count()
}

/// A turn's row.
async fn turn(svc: &TestService, id: &Value, min: &str) -> Value {
    let id = id.as_str().expect("turn id");
    read(svc, &format!("/v1/turns/{id}"), min).await
}

async fn full_conversation(db: TestDb) {
    let clock = Arc::new(ManualClock::new());
    let svc = start(&db, &clock).await;
    let human = actor(&svc, "human", "Hana").await;
    let llm = actor(&svc, "ai", "Lin").await;
    let worker = actor(&svc, "ai", "Wes").await;
    let c = post(
        &svc,
        "/v1/conversations",
        json!({"actor_ids": [human, llm], "title": "Fix the login bug"}),
    )
    .await;
    let conv = c.id.clone();
    let session = read(&svc, &format!("/v1/sessions/{conv}"), &c.position).await;
    assert_eq!(session["state"], "created", "{session}");
    assert_eq!(session["conversation_state"], Value::Null);
    let root = session["root_agent_id"].clone();

    // The human asks: a conversation turn is dispatched to the root agent at once.
    let asked = message(&svc, &conv, &human, json!({"content": "login fails"})).await;
    let root_agent = read(
        &svc,
        &format!("/v1/agents/{}", root.as_str().expect("root")),
        &asked.position,
    )
    .await;
    assert_eq!(root_agent["actor_id"], llm.as_str());
    assert_eq!(root_agent["state"], "running_turn", "{root_agent}");
    let t1 = root_agent["active_turn_id"].clone();
    let first_turn = turn(&svc, &t1, &asked.position).await;
    assert_eq!(first_turn["state"], "dispatched");
    assert_eq!(
        first_turn["input"],
        json!({"kind": "message", "message_id": asked.id}),
        "the turn answers the human's message"
    );

    // The LLM answers (the turn streams), then needs information.
    let answer = message(&svc, &conv, &llm, json!({"content": "which browser?"})).await;
    assert_eq!(
        turn(&svc, &t1, &answer.position).await["state"],
        "streaming"
    );
    let question = checkpoint(&svc, &conv, "NEED_INFORMATION").await;
    let waiting = read(&svc, &format!("/v1/sessions/{conv}"), &question.position).await;
    assert_eq!(waiting["conversation_state"], "waiting_user", "{waiting}");
    assert_eq!(waiting["waiting_checkpoint_id"], question.id.as_str());
    assert!(waiting["waiting_since"].is_string(), "{waiting}");
    let done = turn(&svc, &t1, &question.position).await;
    assert_eq!(
        (done["state"].as_str(), done["deliverable"].as_str()),
        (Some("completed"), Some(answer.id.as_str())),
        "the turn delivered the LLM's last message: {done}"
    );

    // Nobody answers: the session timeout auto-decides with a new root turn.
    clock.advance(Span::seconds(301));
    let decided = wait_for(&svc, &format!("/v1/sessions/{conv}"), |s| {
        s["conversation_state"] == "queued"
    })
    .await;
    assert_eq!(decided["waiting_since"], Value::Null);
    let root_agent = wait_for(
        &svc,
        &format!("/v1/agents/{}", root.as_str().expect("root")),
        |a| a["state"] == "running_turn",
    )
    .await;
    let t2 = root_agent["active_turn_id"].clone();
    assert_ne!(t1, t2);
    let auto = turn(&svc, &t2, "0").await;
    assert_eq!(
        auto["input"],
        json!({"kind": "auto_decide", "checkpoint_id": question.id})
    );

    // The LLM begins work and creates three tasks for the worker.
    let begin = checkpoint(&svc, &conv, "BEGIN_WORK").await;
    assert_eq!(turn(&svc, &t2, &begin.position).await["state"], "completed");
    let mut tasks = Vec::new();
    let mut last = begin.position.clone();
    for _ in 0..3 {
        let t = task(&svc, &conv, &begin.id, Some(&worker)).await;
        last = t.position.clone();
        tasks.push(t.id);
    }
    let agents = items(
        &svc,
        &format!("/v1/agents?conversation_id={conv}&actor_id={worker}"),
        &last,
    )
    .await;
    assert_eq!(agents.len(), 1, "one worker agent: {agents:?}");
    let worker_agent = agents[0]["id"].as_str().expect("worker").to_string();
    let task_turn = |n: usize| {
        let svc = &svc;
        let task_id = tasks[n].clone();
        async move {
            let turns = items(svc, &format!("/v1/turns?task_id={task_id}"), "0").await;
            turns[0].clone()
        }
    };
    let first = task_turn(0).await;
    assert_eq!(first["state"], "dispatched");
    assert_eq!(first["input"], json!({"kind": "task", "task_id": tasks[0]}));
    assert_eq!(first["agent_id"], worker_agent.as_str());
    for n in [1, 2] {
        assert_eq!(
            task_turn(n).await["state"],
            "queued",
            "strictly one at a time"
        );
    }
    let inbox = read(&svc, &format!("/v1/agents/{worker_agent}"), &last).await;
    assert_eq!(inbox["active_turn_id"], first["id"]);
    assert_eq!(
        inbox["queued_turn_ids"],
        json!([task_turn(1).await["id"], task_turn(2).await["id"]]),
        "FIFO inbox"
    );

    // Task 1 is worked; task 2's turn is leased next and times out.
    task_checkpoint(&svc, &tasks[0], "WORK_STARTED").await;
    let report = message(
        &svc,
        &conv,
        &worker,
        json!({"content": "patched", "task_id": tasks[0]}),
    )
    .await;
    let completed = task_checkpoint(&svc, &tasks[0], "WORK_COMPLETED").await;
    let first = turn(&svc, &first["id"], &completed.position).await;
    assert_eq!(first["state"], "completed");
    assert_eq!(first["deliverable"], report.id.as_str());
    let second = task_turn(1).await;
    assert_eq!(second["state"], "dispatched", "FIFO: task 2's turn is next");
    clock.advance(Span::seconds(601));
    let second = wait_for(
        &svc,
        &format!("/v1/turns/{}", second["id"].as_str().expect("id")),
        |t| t["state"] == "error",
    )
    .await;
    assert_eq!(second["deliverable_reason"], "watchdog");
    let third = wait_for(
        &svc,
        &format!(
            "/v1/turns/{}",
            task_turn(2).await["id"].as_str().expect("id")
        ),
        |t| t["state"] == "dispatched",
    )
    .await;
    let session = read(&svc, &format!("/v1/sessions/{conv}"), "0").await;
    assert_eq!(
        session["state"], "active",
        "one error is below the threshold"
    );
    assert_eq!(session["consecutive_errors"], 1);

    // Task 3 is worked; task 2 is retried; the LLM declares the work completed.
    task_checkpoint(&svc, &tasks[2], "WORK_STARTED").await;
    message(
        &svc,
        &conv,
        &worker,
        json!({"content": "done", "task_id": tasks[2]}),
    )
    .await;
    let completed = task_checkpoint(&svc, &tasks[2], "WORK_COMPLETED").await;
    assert_eq!(
        turn(&svc, &third["id"], &completed.position).await["state"],
        "completed"
    );
    let retried = task_checkpoint(&svc, &tasks[1], "WORK_STARTED").await;
    let retries = items(
        &svc,
        &format!("/v1/turns?task_id={}", tasks[1]),
        &retried.position,
    )
    .await;
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert_eq!(retries[1]["state"], "streaming");
    let finished = checkpoint(&svc, &conv, "WORK_COMPLETED").await;
    let closed = read(&svc, &format!("/v1/sessions/{conv}"), &finished.position).await;
    assert_eq!(
        (
            closed["state"].as_str(),
            closed["conversation_state"].as_str()
        ),
        (Some("closed"), Some("succeeded")),
        "{closed}"
    );
    let agents = items(
        &svc,
        &format!("/v1/agents?conversation_id={conv}"),
        &finished.position,
    )
    .await;
    assert_eq!(agents.len(), 2);
    assert!(
        agents.iter().all(|a| a["state"] == "terminated"),
        "{agents:?}"
    );
    let retry = turn(&svc, &retries[1]["id"], &finished.position).await;
    assert_eq!(
        (
            retry["state"].as_str(),
            retry["deliverable_reason"].as_str()
        ),
        (Some("interrupted"), Some("session_closed"))
    );

    // An operator archives it; a second archive is not an edge.
    let r = svc
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{conv}/archive"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["state"], "archived");
    assert!(r.header("x-event-position").is_some());
    let again = svc
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{conv}/archive"),
            &json!({}),
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.text);
    assert_eq!(again.json["code"], "session_transition_not_allowed");

    // Every turn ended once; the runes tell the story; nothing was an anomaly.
    let turns = items(&svc, &format!("/v1/turns?conversation_id={conv}"), "0").await;
    assert_eq!(turns.len(), 6, "{turns:?}");
    let by = |state: &str| turns.iter().filter(|t| t["state"] == state).count();
    assert_eq!((by("completed"), by("error"), by("interrupted")), (4, 1, 1));
    assert!(turns.iter().all(|t| t["terminal_rune"].is_string()));
    let log = types(&svc, &conv).await;
    for (rune, n) in [
        ("session.created", 1),
        ("session.activated", 1),
        ("user.input.required", 1),
        ("interaction.auto_decide.timeout", 1),
        ("turn.completed", 4),
        ("turn.error", 1),
        ("turn.interrupted", 1),
        ("conversation.completed", 1),
        ("session.closed", 1),
        ("session.archived", 1),
        ("agent.terminated", 2),
        ("plan.goal_met", 1),
        ("saga.anomaly", 0),
    ] {
        assert_eq!(count(&log, rune), n, "{rune} in {log:?}");
    }
    let anomalies = items(&svc, &format!("/v1/anomalies?conversation_id={conv}"), "0").await;
    assert!(anomalies.is_empty(), "{anomalies:?}");

    // Runes name what caused them.
    let all = events(
        &svc,
        &format!("conversation_id={conv}&types=turn.*,session.*"),
    )
    .await;
    assert!(all
        .iter()
        .all(|e| e["causationid"].is_string() && e["correlationid"].is_string()));

    // A conversation's SSE stream opens with the session's snapshot.
    let snapshot = sse_snapshot(&svc, &conv).await;
    assert_eq!(snapshot["session"]["state"], "archived");
    assert_eq!(snapshot["agents"].as_array().map(Vec::len), Some(2));
    assert_eq!(snapshot["turns"].as_array().map(Vec::len), Some(6));
    svc.stop().await;
}

/// The `event: snapshot` that opens `/v1/events?conversation_id=` over SSE.
pub async fn sse_snapshot(svc: &TestService, conversation: &str) -> Value {
    let mut r = svc
        .client
        .get(format!(
            "{}/v1/events?conversation_id={conversation}",
            svc.base
        ))
        .bearer_auth(ADMIN)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("stream opens");
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let chunk = tokio::time::timeout(Duration::from_secs(5), r.chunk())
            .await
            .expect("the stream sends")
            .expect("chunk");
        let Some(chunk) = chunk else { break };
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(end) = text.find("\n\n") {
            let block = &text[..end];
            assert!(block.starts_with("event: snapshot"), "first event: {block}");
            let data = block
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .expect("data line");
            return serde_json::from_str(data).expect("snapshot JSON");
        }
    }
    panic!("no snapshot in {text}");
}

on_both_backends!(full_conversation);
