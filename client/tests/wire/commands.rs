//! Commands: the `Idempotency-Key` of a call is the same on each retry; `503`s and
//! timeouts are retried (honouring `Retry-After`), `4xx` and `500` never.

use std::time::{Duration, Instant};

use pm_client::{
    codes, CreateTaskCheckpointInput, Error, RetryPolicy, TaskCheckpointType, TransportKind, Uuid,
    WriteStatus,
};

use crate::client;
use crate::fake::{problem, Fake, Reply};

const TASK: &str = "0190a0b0-0000-7000-8000-000000000002";
const ENTITY: &str = r#"{"id":"0190a0b0-0000-7000-8000-000000000003","task_id":"0190a0b0-0000-7000-8000-000000000002","type":"WORK_STARTED","created_at":"2026-11-22T05:35:27.123456Z"}"#;

fn input() -> CreateTaskCheckpointInput {
    CreateTaskCheckpointInput {
        checkpoint_type: TaskCheckpointType::WorkStarted,
    }
}

fn task() -> Uuid {
    TASK.parse().expect("uuid")
}

fn created(headers: Vec<(&'static str, String)>) -> Reply {
    Reply::Answer(201, headers, ENTITY.into())
}

#[tokio::test]
async fn unavailability_is_retried_with_one_key_after_retry_after() {
    let fake = Fake::start(|n, _| match n {
        0 => Reply::Answer(
            503,
            vec![("retry-after", "1".into())],
            problem(503, "service_unavailable"),
        ),
        1 => Reply::Answer(503, vec![], problem(503, "projection_lagging")),
        _ => created(vec![
            ("x-event-position", "77.3".into()),
            ("location", format!("/v1/tasks/{TASK}/checkpoints/x")),
            ("x-correlation-id", "corr-1".into()),
        ]),
    })
    .await;
    let started = Instant::now();
    // Retry-After: 1 s is within a 2 s longest delay.
    let c = pm_client::Client::builder(&fake.base)
        .retry(
            RetryPolicy::default()
                .base_delay(Duration::from_millis(10))
                .max_delay(Duration::from_secs(2)),
        )
        .build()
        .expect("client");
    let written = c
        .create_task_checkpoint(task(), input())
        .await
        .expect("written");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    assert_eq!(written.status, WriteStatus::Created);
    assert_eq!(written.position.as_ref().map(|p| p.as_str()), Some("77.3"));
    assert_eq!(written.correlation_id.as_deref(), Some("corr-1"));
    assert!(written
        .location
        .is_some_and(|l| l.starts_with("/v1/tasks/")));
    assert!(!written.replayed);
    let seen = fake.seen();
    assert_eq!(seen.len(), 3);
    let keys: Vec<_> = seen.iter().map(|s| s.header("idempotency-key")).collect();
    assert!(keys[0].is_some_and(|k| !k.is_empty()));
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    assert_eq!(keys[0], written.idempotency_key.as_deref());
    assert!(seen.iter().all(|s| s.body == r#"{"type":"WORK_STARTED"}"#));
    assert_eq!(seen[0].target, format!("/v1/tasks/{TASK}/checkpoints"));
    assert_eq!(seen[0].header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn client_errors_and_internal_errors_are_never_retried() {
    for (status, code) in [
        (400, codes::MALFORMED_JSON),
        (401, codes::UNAUTHORIZED),
        (403, codes::FORBIDDEN),
        (404, codes::TASK_NOT_FOUND),
        (409, codes::IDEMPOTENCY_KEY_IN_USE),
        (422, codes::VALIDATION_FAILED),
        (429, "too_many_requests"),
        (500, codes::INTERNAL_ERROR),
    ] {
        let fake = Fake::start(move |_, _| {
            Reply::Answer(
                status,
                vec![("retry-after", "0".into())],
                problem(status, code),
            )
        })
        .await;
        let err = client(&fake.base)
            .create_task_checkpoint(task(), input())
            .await
            .expect_err("refused");
        assert_eq!(err.code(), Some(code));
        assert_eq!(err.status(), Some(status));
        assert!(!err.is_retryable());
        assert_eq!(fake.seen().len(), 1, "{status} must not be retried");
    }
}

#[tokio::test]
async fn retries_are_bounded_by_the_policy() {
    let fake =
        Fake::start(|_, _| Reply::Answer(503, vec![], problem(503, "service_unavailable"))).await;
    let err = client(&fake.base)
        .create_task_checkpoint(task(), input())
        .await
        .expect_err("gives up");
    assert_eq!(err.code(), Some(codes::SERVICE_UNAVAILABLE));
    assert_eq!(fake.seen().len(), 4);
}

#[tokio::test]
async fn a_retry_after_beyond_the_longest_delay_is_returned_not_waited_for() {
    let fake = Fake::start(|_, _| {
        Reply::Answer(
            503,
            vec![("retry-after", "60".into())],
            problem(503, "service_unavailable"),
        )
    })
    .await;
    let started = Instant::now();
    let err = client(&fake.base)
        .create_task_checkpoint(task(), input())
        .await
        .expect_err("gives up");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.retry_after(), Some(Duration::from_secs(60)));
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test]
async fn a_timeout_is_retried_with_the_same_key() {
    let fake = Fake::start(|n, _| {
        if n == 0 {
            Reply::Silence
        } else {
            created(vec![])
        }
    })
    .await;
    let written = client(&fake.base)
        .create_task_checkpoint(task(), input())
        .idempotency_key("delivery-42")
        .await
        .expect("second attempt answers");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen
        .iter()
        .all(|s| s.header("idempotency-key") == Some("delivery-42")));
    assert_eq!(written.idempotency_key.as_deref(), Some("delivery-42"));
    assert_eq!(written.position, None);
}

#[tokio::test]
async fn an_unreachable_service_is_a_connect_error_after_the_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let err = client(&base)
        .create_task_checkpoint(task(), input())
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err,
            Error::Transport {
                kind: TransportKind::Connect,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_retryable());
}

#[tokio::test]
async fn a_replayed_answer_is_the_same_answer() {
    let fake = Fake::start(|_, _| {
        created(vec![
            ("idempotent-replayed", "true".into()),
            ("x-event-position", "5".into()),
        ])
    })
    .await;
    let written = client(&fake.base)
        .create_task_checkpoint(task(), input())
        .await
        .expect("written");
    assert!(written.replayed);
    assert_eq!(written.status, WriteStatus::Created);
    let existing = Fake::start(|_, _| Reply::Answer(200, vec![], ENTITY.into())).await;
    let written = client(&existing.base)
        .create_task_checkpoint(task(), input())
        .await
        .expect("written");
    assert_eq!(written.status, WriteStatus::Existing);
    assert!(!written.is_created());
}

#[tokio::test]
async fn invalid_keys_and_headers_are_refused_before_sending() {
    let fake = Fake::start(|_, _| created(vec![])).await;
    let c = client(&fake.base);
    for key in ["", "with space", "ü", &"k".repeat(256)] {
        let err = c
            .create_task_checkpoint(task(), input())
            .idempotency_key(key)
            .await
            .expect_err(key);
        assert!(matches!(err, Error::InvalidInput(_)), "{key:?}: {err}");
    }
    let err = c
        .create_task_checkpoint(task(), input())
        .causation_id("a\nb")
        .await
        .expect_err("bad header");
    assert!(matches!(err, Error::InvalidInput(_)));
    assert_eq!(fake.seen().len(), 0);
    c.create_task_checkpoint(task(), input())
        .correlation_id("corr-7")
        .causation_id("task:1:2")
        .await
        .expect("sent");
    let seen = fake.seen();
    assert_eq!(seen[0].header("x-correlation-id"), Some("corr-7"));
    assert_eq!(seen[0].header("x-causation-id"), Some("task:1:2"));
    assert_eq!(seen[0].header("authorization"), Some("Bearer t0k3n"));
}

#[tokio::test]
async fn an_answer_that_is_not_the_entity_is_a_decode_error() {
    let fake = Fake::start(|_, _| Reply::Answer(201, vec![], r#"{"id":"nope"}"#.into())).await;
    let err = client(&fake.base)
        .create_task_checkpoint(task(), input())
        .await
        .expect_err("decode");
    assert!(matches!(err, Error::Decode { .. }), "{err}");
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test]
async fn without_generated_keys_a_command_carries_none_and_is_not_retried() {
    let fake = Fake::start(|n, _| match n {
        0 => Reply::Answer(503, vec![], problem(503, "service_unavailable")),
        _ => created(vec![("x-event-position", "9".into())]),
    })
    .await;
    let c = pm_client::Client::builder(&fake.base)
        .idempotency_keys(false)
        .retry(RetryPolicy::default().base_delay(Duration::from_millis(10)))
        .build()
        .expect("client");
    let refused = c.create_task_checkpoint(task(), input()).await;
    assert_eq!(refused.expect_err("not retried").status(), Some(503));
    let written = c
        .create_task_checkpoint(task(), input())
        .await
        .expect("written");
    assert_eq!(written.idempotency_key, None);
    let keyed = c
        .create_task_checkpoint(task(), input())
        .idempotency_key("mine-1")
        .await
        .expect("written");
    assert_eq!(keyed.idempotency_key.as_deref(), Some("mine-1"));
    let seen = fake.seen();
    assert_eq!(seen.len(), 3, "one request per call");
    let keys: Vec<_> = seen.iter().map(|s| s.header("idempotency-key")).collect();
    assert_eq!(keys, vec![None, None, Some("mine-1")]);
}
