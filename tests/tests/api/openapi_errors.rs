//! The commands' answers against `/openapi.json`: every command's `201`, and every error
//! the suite provokes on it — `400`, `401`, `403`, `404`, `409` (its own codes and
//! `idempotency_key_in_use`, which every command can answer), `413`, `415`, `422` — must
//! be a status its operation documents, with a body that fits the documented schema.

use std::str::FromStr;
use std::time::Duration;

use pm_infrastructure::db::Args;
use pm_infrastructure::Database;
use pm_tests::{
    all_tokens, on_both_backends, Response, TestDb, TestService, ANALYST, INGRESS, LLM,
};
use serde_json::{json, Value};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

use crate::documented::assert_answer;
use crate::support::{assert_problem, config, post_raw, post_with};

const NIL: &str = "00000000-0000-0000-0000-000000000000";

/// One command: its documented path, a real path, its writer's token and a valid body.
struct Command {
    template: &'static str,
    path: String,
    token: &'static str,
    body: Value,
}

/// Checks `r` has `status` and `code` and is documented for `command`.
fn check(doc: &Value, command: &Command, r: &Response, status: u16, code: &str) {
    if status < 300 {
        assert_eq!(r.status, status, "{}: {}", command.template, r.text);
    } else {
        assert_problem(r, status, code);
    }
    assert_answer(doc, "post", command.template, r);
}

/// Marks the answered `Idempotency-Key` `key` pending again, as if another live replica
/// were still running its request; returns what keeps that replica alive.
async fn claimed_elsewhere(db: &TestDb, key: &str) -> Option<PgConnection> {
    let store = Database::connect(&db.url, 2, Duration::from_secs(5))
        .await
        .expect("connect");
    let (owner, replica) = if db.kind == "postgres" {
        // A replica is alive while a session of the database carries its name.
        let owner = "openapi-test-other-replica".to_string();
        let options = PgConnectOptions::from_str(&db.url)
            .expect("url")
            .application_name(&owner);
        let conn = PgConnection::connect_with(&options).await.expect("connect");
        (owner, Some(conn))
    } else {
        // SQLite: a replica of another process is alive while that process runs; this
        // test's parent (cargo, or the harness that started it) does. (An id under this
        // process's own id is alive only if this process made it.)
        (
            format!("{}-other-replica", std::os::unix::process::parent_id()),
            None,
        )
    };
    let changed = store
        .execute(
            "UPDATE idempotency_keys SET status = NULL, body = NULL, location = NULL, \
             position = NULL, owner = $1 WHERE key = $2",
            Args::new().text(owner).text(key),
        )
        .await
        .expect("update");
    assert_eq!(changed, 1, "the key {key} is stored");
    replica
}

async fn command_answers_match_the_document(db: TestDb) {
    let mut config = config(&db);
    config.auth_tokens = all_tokens();
    config.max_body_bytes = 4096;
    let svc = TestService::start_with(config).await;
    let doc = svc.get(None, "/openapi.json").await.json;
    let post = |token: &str, path: &str, body: Value| {
        let (token, path) = (token.to_string(), path.to_string());
        let svc = &svc;
        async move { svc.post(Some(&token), &path, &body).await }
    };

    // The entities the commands work on, each checked as a 201.
    let mut commands = vec![Command {
        template: "/v1/actors",
        path: "/v1/actors".into(),
        token: INGRESS,
        body: json!({"kind": "human", "display_name": "Ann"}),
    }];
    let actor = post(INGRESS, "/v1/actors", commands[0].body.clone()).await;
    check(&doc, &commands[0], &actor, 201, "");
    let a = actor.id();
    commands.push(Command {
        template: "/v1/conversations",
        path: "/v1/conversations".into(),
        token: INGRESS,
        body: json!({"actor_ids": [a], "title": "Login"}),
    });
    let c = post(INGRESS, "/v1/conversations", commands[1].body.clone())
        .await
        .id();
    commands.push(Command {
        template: "/v1/conversations/{id}/checkpoints",
        path: format!("/v1/conversations/{c}/checkpoints"),
        token: LLM,
        body: json!({"checkpoint_type": "BEGIN_WORK", "summary": "Fix it"}),
    });
    let cp = post(LLM, &commands[2].path, commands[2].body.clone())
        .await
        .id();
    commands.push(Command {
        template: "/v1/conversations/{id}/tasks",
        path: format!("/v1/conversations/{c}/tasks"),
        token: LLM,
        body: json!({"checkpoint_id": cp, "instructions": "Patch"}),
    });
    let t = post(LLM, &commands[3].path, commands[3].body.clone())
        .await
        .id();
    commands.push(Command {
        template: "/v1/tasks/{id}/checkpoints",
        path: format!("/v1/tasks/{t}/checkpoints"),
        token: LLM,
        body: json!({"type": "WORK_STARTED"}),
    });
    commands.push(Command {
        template: "/v1/conversations/{id}/messages",
        path: format!("/v1/conversations/{c}/messages"),
        token: INGRESS,
        body: json!({"actor_id": a, "content": "On it"}),
    });

    for (i, command) in commands.iter().enumerate() {
        let created = post(command.token, &command.path, command.body.clone()).await;
        check(&doc, command, &created, 201, "");
        let r = svc.post(None, &command.path, &command.body).await;
        check(&doc, command, &r, 401, "unauthorized");
        let r = post(ANALYST, &command.path, command.body.clone()).await;
        check(&doc, command, &r, 403, "forbidden");
        let r = post(command.token, &command.path, json!({})).await;
        check(&doc, command, &r, 422, "validation_failed");
        let r = post_raw(
            &svc,
            Some(command.token),
            &command.path,
            "application/json",
            "{",
        )
        .await;
        check(&doc, command, &r, 400, "malformed_json");
        let r = post_raw(&svc, Some(command.token), &command.path, "text/plain", "hi").await;
        check(&doc, command, &r, 415, "unsupported_media_type");
        let big = json!({"padding": "x".repeat(5000)});
        let r = post(command.token, &command.path, big).await;
        check(&doc, command, &r, 413, "payload_too_large");
        let keyed = |key: &'static str, body: Value| {
            let command = &command;
            let svc = &svc;
            async move {
                post_with(
                    svc,
                    Some(command.token),
                    &command.path,
                    &body,
                    &[("idempotency-key", key)],
                )
                .await
            }
        };
        let key = ["k0", "k1", "k2", "k3", "k4", "k5"][i];
        let first = keyed(key, command.body.clone()).await;
        assert!(matches!(first.status, 200 | 201), "{}", first.text);
        let other = keyed(key, json!({"other": true})).await;
        check(&doc, command, &other, 422, "idempotency_key_reused");
        let replica = claimed_elsewhere(&db, key).await;
        let r = keyed(key, command.body.clone()).await;
        check(&doc, command, &r, 409, "idempotency_key_in_use");
        drop(replica);
        let r = post_with(
            &svc,
            Some(command.token),
            &command.path,
            &command.body,
            &[("idempotency-key", "")],
        )
        .await;
        check(&doc, command, &r, 400, "invalid_parameter");
        if command.path.contains(&c) || command.path.contains(&t) {
            let path = command.path.replace(&c, NIL).replace(&t, NIL);
            let r = post(command.token, &path, command.body.clone()).await;
            let code = if command.template.starts_with("/v1/tasks") {
                "task_not_found"
            } else {
                "conversation_not_found"
            };
            check(&doc, command, &r, 404, code);
        }
    }

    // The commands' own 409s and 422s.
    let [actors, conversations, _, tasks, _, messages] = &commands[..] else {
        unreachable!()
    };
    let identified = json!({"kind": "ai", "display_name": "Bot", "external_identity": "bot:1"});
    check(
        &doc,
        actors,
        &post(INGRESS, "/v1/actors", identified.clone()).await,
        201,
        "",
    );
    check(
        &doc,
        actors,
        &post(INGRESS, "/v1/actors", identified).await,
        200,
        "",
    );
    let other = json!({"kind": "ai", "display_name": "Other", "external_identity": "bot:1"});
    check(
        &doc,
        actors,
        &post(INGRESS, "/v1/actors", other).await,
        409,
        "already_exists",
    );
    let external =
        json!({"actor_ids": [a], "title": "A", "external_source": "mail", "external_id": "1"});
    check(
        &doc,
        conversations,
        &post(INGRESS, "/v1/conversations", external.clone()).await,
        201,
        "",
    );
    check(
        &doc,
        conversations,
        &post(INGRESS, "/v1/conversations", external).await,
        200,
        "",
    );
    let other =
        json!({"actor_ids": [a], "title": "B", "external_source": "mail", "external_id": "1"});
    let r = post(INGRESS, "/v1/conversations", other).await;
    check(&doc, conversations, &r, 409, "conversation_exists");
    let unknown = json!({"actor_ids": [NIL], "title": "C"});
    let r = post(INGRESS, "/v1/conversations", unknown).await;
    check(&doc, conversations, &r, 422, "actor_not_found");
    let r = post(
        LLM,
        &tasks.path,
        json!({"checkpoint_id": NIL, "instructions": "x"}),
    )
    .await;
    check(&doc, tasks, &r, 422, "checkpoint_not_found");
    let delivered = json!({"actor_id": a, "content": "Hi", "external_identity": "mail:9"});
    check(
        &doc,
        messages,
        &post(INGRESS, &messages.path, delivered.clone()).await,
        201,
        "",
    );
    check(
        &doc,
        messages,
        &post(INGRESS, &messages.path, delivered).await,
        200,
        "",
    );
    let changed = json!({"actor_id": a, "content": "Bye", "external_identity": "mail:9"});
    let r = post(INGRESS, &messages.path, changed).await;
    check(&doc, messages, &r, 409, "already_exists");
    let r = post(
        INGRESS,
        &messages.path,
        json!({"actor_id": a, "content": "x", "task_id": NIL}),
    )
    .await;
    check(&doc, messages, &r, 422, "task_not_found");
    svc.stop().await;
}

on_both_backends!(command_answers_match_the_document);
