//! The retry decision table, backoff bounds and `Retry-After` parsing.

use std::time::{Duration, SystemTime};

use super::*;
use crate::error::{Problem, TransportKind};

fn problem(status: u16, code: &str, retry_after: Option<Duration>) -> Error {
    Error::Problem(Problem {
        status,
        code: code.into(),
        title: String::new(),
        detail: String::new(),
        kind: String::new(),
        retry_after,
    })
}

fn transport(kind: TransportKind) -> Error {
    Error::Transport {
        kind,
        source: "boom".into(),
    }
}

#[test]
fn only_unavailability_and_transport_failures_are_retried() {
    let retried = [
        problem(503, "service_unavailable", None),
        problem(503, "projection_lagging", None),
        Error::Status {
            status: 502,
            body: "bad gateway".into(),
            retry_after: None,
        },
        Error::Status {
            status: 504,
            body: String::new(),
            retry_after: None,
        },
        transport(TransportKind::Connect),
        transport(TransportKind::Timeout),
        transport(TransportKind::Other),
    ];
    for e in &retried {
        assert!(is_retryable(e), "{e}");
    }
    let never = [
        problem(400, "malformed_json", None),
        problem(401, "unauthorized", None),
        problem(403, "forbidden", None),
        problem(404, "conversation_not_found", None),
        problem(409, "concurrency_conflict", None),
        problem(409, "idempotency_key_in_use", Some(Duration::from_secs(1))),
        problem(422, "validation_failed", None),
        problem(429, "too_many_requests", Some(Duration::from_secs(1))),
        problem(500, "internal_error", None),
        Error::decode("body", "eof"),
        Error::InvalidInput("x".into()),
    ];
    for e in &never {
        assert!(!is_retryable(e), "{e}");
    }
}

#[test]
fn attempts_are_bounded() {
    let policy = RetryPolicy::default().max_attempts(3);
    let e = problem(503, "service_unavailable", None);
    assert!(policy.decide(1, &e, 0.5).is_some());
    assert!(policy.decide(2, &e, 0.5).is_some());
    assert_eq!(policy.decide(3, &e, 0.5), None);
    assert_eq!(RetryPolicy::none().decide(1, &e, 0.5), None);
    assert_eq!(RetryPolicy::default().max_attempts(0).attempts(), 1);
    let not_found = problem(404, "task_not_found", None);
    assert_eq!(policy.decide(1, &not_found, 0.5), None);
}

#[test]
fn backoff_doubles_within_half_and_full_of_its_cap() {
    let policy = RetryPolicy::default()
        .base_delay(Duration::from_millis(100))
        .max_delay(Duration::from_secs(1));
    for (failures, cap_ms) in [
        (1, 100),
        (2, 200),
        (3, 400),
        (4, 800),
        (5, 1000),
        (40, 1000),
    ] {
        let cap = Duration::from_millis(cap_ms);
        for jitter in [0.0, 0.25, 0.5, 0.999_999] {
            let d = policy.backoff(failures, jitter);
            assert!(d >= cap / 2 && d <= cap, "{failures} {jitter} {d:?}");
        }
        assert_eq!(policy.backoff(failures, 0.0), cap / 2);
    }
    // Out-of-range jitter is clamped, never beyond the cap.
    assert!(policy.backoff(1, 7.0) <= Duration::from_millis(100));
    assert_eq!(policy.backoff(u32::MAX, 1.0), Duration::from_secs(1));
}

#[test]
fn retry_after_is_honoured_but_never_beyond_the_longest_delay() {
    let policy = RetryPolicy::default()
        .base_delay(Duration::from_millis(10))
        .max_delay(Duration::from_secs(3));
    let asks = |secs| problem(503, "service_unavailable", Some(Duration::from_secs(secs)));
    assert_eq!(
        policy.decide(1, &asks(2), 0.0),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        policy.decide(1, &asks(3), 0.9),
        Some(Duration::from_secs(3))
    );
    assert_eq!(policy.decide(1, &asks(4), 0.0), None);
    // Retry-After: 0 still backs off.
    assert_eq!(
        policy.decide(1, &asks(0), 0.0),
        Some(Duration::from_millis(5))
    );
}

#[test]
fn retry_after_parses_seconds_and_http_dates() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
    assert_eq!(parse_retry_after("5", now), Some(Duration::from_secs(5)));
    assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
    assert_eq!(
        parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now),
        Some(Duration::from_secs(10))
    );
    assert_eq!(
        parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now),
        Some(Duration::ZERO)
    );
    for bad in ["", "-1", "1.5", "soon", "99999999999999999999999"] {
        assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
    }
}

#[test]
fn jitter_is_a_fraction() {
    for _ in 0..100 {
        let j = jitter();
        assert!((0.0..1.0).contains(&j));
    }
}
