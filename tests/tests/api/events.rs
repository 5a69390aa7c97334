//! `GET /v1/events` as JSON pages: CloudEvents 1.0 items, keyset paging, `cursor` and
//! `Last-Event-ID`, the `types` and `conversation_id` filters, correlation ids.

use chrono::DateTime;
use pm_tests::{on_both_backends, Response, TestDb, TestService, ADMIN};
use serde_json::{json, Value};

use crate::support::{
    actor, assert_problem, checkpoint, event_of, events, events_page, get_with, message, post_with,
    task_checkpoint, wait_events, world, World, FACTS,
};

fn positions(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["position"].as_str().expect("position").to_string())
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect()
}

/// Asserts `event` is the CloudEvent of the fact `answer` acknowledged.
fn assert_cloud_event(event: &Value, answer: &Response, kind: &str, subject: &str, seq: u64) {
    assert_eq!(event["specversion"], "1.0", "{event}");
    assert!(
        event["id"].as_str().is_some_and(|id| !id.is_empty()),
        "{event}"
    );
    assert_eq!(event["type"], kind, "{event}");
    assert_eq!(event["subject"], subject, "{event}");
    let source = event["source"].as_str().expect("source");
    let parts: Vec<&str> = source.split('/').collect();
    assert!(
        parts.len() == 4 && parts[1] == "project-manager" && !parts[2].is_empty(),
        "source {source}"
    );
    assert_eq!(parts[3], subject, "source {source}");
    let time = event["time"].as_str().expect("time");
    DateTime::parse_from_rfc3339(time).expect("time is RFC 3339");
    assert!(time.ends_with('Z'), "time {time} is not UTC");
    assert_eq!(event["datacontenttype"], "application/json");
    assert_eq!(
        event["data"], answer.json,
        "data is the acknowledged entity"
    );
    assert_eq!(
        event["position"].as_str(),
        answer.header("x-event-position"),
        "position is X-Event-Position"
    );
    assert_eq!(
        event["sequence"],
        seq.to_string(),
        "sequence is a string: {event}"
    );
    assert!(event["correlationid"].is_string(), "{event}");
}

async fn events_are_cloud_events_of_the_facts(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let body = json!({"kind": "human", "display_name": "Ann"});
    let a = svc.post(Some(ADMIN), "/v1/actors", &body).await;
    let body = json!({"actor_ids": [a.id()], "title": "t"});
    let headers = [
        ("x-correlation-id", "corr-42"),
        ("x-causation-id", "cause-7"),
    ];
    let c = post_with(&svc, Some(ADMIN), "/v1/conversations", &body, &headers).await;
    let cid = c.id();
    let path = format!("/v1/conversations/{cid}/checkpoints");
    let body = json!({"checkpoint_type": "BEGIN_WORK", "summary": "go"});
    let cp = svc.post(Some(ADMIN), &path, &body).await;
    let path = format!("/v1/conversations/{cid}/tasks");
    let body = json!({"checkpoint_id": cp.id(), "instructions": "do", "assigned_to": a.id()});
    let t = svc.post(Some(ADMIN), &path, &body).await;
    let tc = task_checkpoint(&svc, &t.id(), "WORK_STARTED").await;
    let path = format!("/v1/conversations/{cid}/messages");
    let body = json!({"actor_id": a.id(), "content": "hi", "task_id": t.id()});
    let m = svc.post(Some(ADMIN), &path, &body).await;

    let all = wait_events(&svc, FACTS, 6).await;
    assert_eq!(all.len(), 6);
    let p = "project_manager.";
    for (answer, kind, subject, seq, source) in [
        (&a, "actor.registered", a.id(), 1, Some("actor")),
        (
            &c,
            "conversation.started",
            cid.clone(),
            1,
            Some("conversation"),
        ),
        (&cp, "conversation.checkpoint.created", cp.id(), 1, None),
        (&t, "task.created", t.id(), 1, Some("task")),
        (&tc, "task.checkpoint.created", t.id(), 2, Some("task")),
        (&m, "message.added", m.id(), 1, Some("message")),
    ] {
        let event = event_of(&all, &answer.id());
        assert_cloud_event(event, answer, &format!("{p}{kind}"), &subject, seq);
        if let Some(source) = source {
            assert_eq!(
                event["source"],
                format!("/project-manager/{source}/{subject}")
            );
        }
        let expected = if kind.starts_with("actor") {
            Value::Null
        } else {
            json!(cid)
        };
        assert_eq!(
            event["conversationid"], expected,
            "conversationid of {event}"
        );
    }
    let conversation = event_of(&all, &cid);
    assert_eq!(conversation["correlationid"], "corr-42");
    assert_eq!(conversation["causationid"], "cause-7");
    let ids: std::collections::BTreeSet<&str> =
        all.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids.len(), 6, "CloudEvent ids are unique");
    svc.stop().await;
}

async fn some_events(svc: &TestService, messages: usize) -> World {
    let w = world(svc).await;
    for i in 0..messages {
        message(svc, &w.conversation, &w.actor, &format!("message {i}")).await;
    }
    w
}

async fn paging_visits_every_event_once_in_order(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    some_events(&svc, 15).await;
    let all = wait_events(&svc, FACTS, 19).await;
    assert_eq!(all.len(), 19);
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let page = events_page(&svc, &format!("{FACTS}&limit=4&cursor={cursor}")).await;
        let items = page.json["items"].as_array().cloned().expect("items");
        assert!(items.len() <= 4);
        let next = page.json["next_cursor"].as_str().expect("next_cursor");
        if items.is_empty() {
            assert_eq!(next, cursor, "an empty page keeps the cursor");
            break;
        }
        assert_eq!(
            next,
            items[items.len() - 1]["position"].as_str().expect("pos")
        );
        cursor = next.to_string();
        seen.extend(items);
    }
    assert_eq!(seen, all, "paging saw every event once, in order");
    let first = events_page(&svc, FACTS).await;
    assert_eq!(first.json["items"].as_array().map(Vec::len), Some(19));
    svc.stop().await;
}

async fn cursor_and_last_event_id_resume_after_a_position(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    some_events(&svc, 4).await;
    let all = wait_events(&svc, FACTS, 8).await;
    let at = positions(&all)[4].clone();
    let by_cursor = events_page(&svc, &format!("{FACTS}&cursor={at}")).await;
    assert_eq!(by_cursor.json["items"], json!(all[5..]));
    let by_header = get_with(
        &svc,
        &format!("/v1/events?{FACTS}"),
        &[("last-event-id", &at)],
    )
    .await;
    assert_eq!(by_header.status, 200, "{}", by_header.text);
    assert_eq!(by_header.json["items"], json!(all[5..]));
    let from_zero = events_page(&svc, &format!("{FACTS}&cursor=0")).await;
    assert_eq!(from_zero.json["items"], json!(all));
    let last = positions(&all)[7].clone();
    let after_end = events_page(&svc, &format!("{FACTS}&cursor={last}")).await;
    assert_eq!(after_end.json["items"], json!([]));
    assert_eq!(after_end.json["next_cursor"], last.as_str());
    svc.stop().await;
}

async fn types_filter_takes_prefixes_exact_names_and_lists(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let w = some_events(&svc, 2).await;
    task_checkpoint(&svc, &w.task, "WORK_STARTED").await;
    actor(&svc).await;
    let all = wait_events(&svc, FACTS, 8).await;
    let only = |wanted: &dyn Fn(&str) -> bool| -> Vec<Value> {
        all.iter()
            .filter(|e| wanted(e["type"].as_str().unwrap_or("")))
            .cloned()
            .collect()
    };
    let task = events(&svc, "types=project_manager.task.*").await;
    assert_eq!(
        types(&task),
        [
            "project_manager.task.created",
            "project_manager.task.checkpoint.created"
        ]
    );
    let exact = events(&svc, "types=project_manager.task.created").await;
    assert_eq!(exact, only(&|t| t == "project_manager.task.created"));
    let list = "types=project_manager.actor.registered,project_manager.message.*";
    let listed = events(&svc, list).await;
    assert_eq!(listed.len(), 4);
    assert_eq!(
        listed,
        only(&|t| t == "project_manager.actor.registered"
            || t.starts_with("project_manager.message."))
    );
    assert!(events(&svc, "types=project_manager.nothing.*")
        .await
        .is_empty());
    svc.stop().await;
}

async fn conversation_filter_returns_everything_of_that_conversation(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let mut worlds = Vec::new();
    for _ in 0..2 {
        let w = some_events(&svc, 1).await;
        task_checkpoint(&svc, &w.task, "WORK_STARTED").await;
        checkpoint(&svc, &w.conversation, "NEED_INFORMATION").await;
        worlds.push(w);
    }
    let all = wait_events(&svc, FACTS, 14).await;
    for w in &worlds {
        let got = events(&svc, &format!("{FACTS}&conversation_id={}", w.conversation)).await;
        let want: Vec<Value> = all
            .iter()
            .filter(|e| e["conversationid"] == w.conversation.as_str())
            .cloned()
            .collect();
        assert_eq!(got, want);
        let mut kinds = types(&got);
        kinds.sort_unstable();
        assert_eq!(
            kinds,
            [
                "project_manager.conversation.checkpoint.created",
                "project_manager.conversation.checkpoint.created",
                "project_manager.conversation.started",
                "project_manager.message.added",
                "project_manager.task.checkpoint.created",
                "project_manager.task.created",
            ]
        );
        assert_eq!(
            event_of(&got, &w.conversation)["subject"],
            w.conversation.as_str()
        );
        event_of(&got, &w.task);
        event_of(&got, &w.begin_work);
    }
    svc.stop().await;
}

/// A position that is not in the log is `400 invalid_position` (API.md).
async fn bad_cursors_are_400_invalid_position(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    for cursor in ["abc", "-1", "1.2.3", "x.1", "1e3", "12.34", "99999999"] {
        let r = svc
            .get(Some(ADMIN), &format!("/v1/events?cursor={cursor}"))
            .await;
        assert_problem(&r, 400, "invalid_position");
        let r = get_with(&svc, "/v1/events", &[("last-event-id", cursor)]).await;
        assert_problem(&r, 400, "invalid_position");
    }
    let r = svc
        .get(Some(ADMIN), "/v1/events?conversation_id=nope")
        .await;
    assert_problem(&r, 400, "invalid_parameter");
    // At most 64 names or prefixes (each is a term of the query).
    let many = vec!["a.*"; 65].join(",");
    let r = svc
        .get(Some(ADMIN), &format!("/v1/events?types={many}"))
        .await;
    assert_problem(&r, 400, "invalid_parameter");
    let enough = vec!["a.*"; 64].join(",");
    let r = svc
        .get(Some(ADMIN), &format!("/v1/events?types={enough}"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    svc.stop().await;
}

on_both_backends!(
    events_are_cloud_events_of_the_facts,
    paging_visits_every_event_once_in_order,
    cursor_and_last_event_id_resume_after_a_position,
    types_filter_takes_prefixes_exact_names_and_lists,
    conversation_filter_returns_everything_of_that_conversation,
    bad_cursors_are_400_invalid_position,
);
