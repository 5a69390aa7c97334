//! `GET /v1/sessions`: the operators' list of sessions, filtered by lifecycle state and
//! FCMP conversation state, keyset-paged oldest first like every list.

use pm_tests::{on_both_backends, TestDb, TestService, ADMIN};
use serde_json::{json, Value};

use crate::reads::{message, post, read};
use crate::sagas::{actor, items};
use crate::support::config;

fn ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|s| {
            s["conversation_id"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

async fn sessions_are_listed_by_state(db: TestDb) {
    let svc = TestService::start_with(config(&db)).await;
    let human = actor(&svc, "human", "Hana").await;
    let llm = actor(&svc, "ai", "Lin").await;
    let mut conversations = Vec::new();
    for title in ["One", "Two", "Three"] {
        let c = post(
            &svc,
            "/v1/conversations",
            json!({"actor_ids": [human, llm], "title": title}),
        )
        .await;
        read(&svc, &format!("/v1/sessions/{}", c.id), &c.position).await;
        conversations.push(c.id);
    }
    // The second one's human speaks: its session is active, and may be paused.
    message(&svc, &conversations[1], &human, json!({"content": "hello"})).await;
    let session = format!("/v1/sessions/{}", conversations[1]);
    crate::sagas::wait_for(&svc, &session, |s| s["state"] == "active").await;
    let paused = svc
        .post(
            Some(ADMIN),
            &format!("/v1/sessions/{}/pause", conversations[1]),
            &json!({"reason": "maintenance"}),
        )
        .await;
    assert_eq!(paused.status, 200, "{}", paused.text);
    let at = paused
        .header("x-event-position")
        .expect("a position")
        .to_string();

    let all = items(&svc, "/v1/sessions", &at).await;
    assert_eq!(ids(&all), conversations, "oldest first");
    let only = items(&svc, "/v1/sessions?state=paused", &at).await;
    assert_eq!(ids(&only), vec![conversations[1].clone()]);
    assert_eq!(only[0]["state"], "paused");
    let created = items(&svc, "/v1/sessions?state=created", &at).await;
    assert_eq!(
        ids(&created),
        vec![conversations[0].clone(), conversations[2].clone()]
    );
    let none = items(&svc, "/v1/sessions?conversation_state=waiting_user", &at).await;
    assert!(none.is_empty(), "{none:?}");

    // Pages of one.
    let first = read(&svc, "/v1/sessions?limit=2", &at).await;
    assert_eq!(
        ids(first["items"].as_array().expect("items")),
        conversations[..2]
    );
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let second = read(&svc, &format!("/v1/sessions?limit=2&cursor={cursor}"), &at).await;
    assert_eq!(
        ids(second["items"].as_array().expect("items")),
        conversations[2..]
    );
    assert_eq!(second["next_cursor"], Value::Null);

    for (query, name) in [
        ("state=asleep", "state"),
        ("conversation_state=asleep", "conversation_state"),
    ] {
        let r = svc.get(Some(ADMIN), &format!("/v1/sessions?{query}")).await;
        assert_eq!(
            (r.status, r.code()),
            (400, "invalid_parameter"),
            "{}",
            r.text
        );
        assert!(
            r.json["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with(name)),
            "{}",
            r.text
        );
    }
    svc.stop().await;
}

on_both_backends!(sessions_are_listed_by_state);
