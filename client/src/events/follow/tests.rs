//! Resume bookkeeping: what the follower yields, skips and reconnects with.

use std::time::Duration;

use eventsource_stream::Event as SseEvent;

use super::*;
use crate::error::Problem;
use crate::events::tests::cloud_event;

fn sse(event: &str, id: &str, data: String) -> SseEvent {
    SseEvent {
        event: event.into(),
        id: id.into(),
        data,
        retry: None,
    }
}

fn rune(position: &str) -> SseEvent {
    sse(
        "turn.started",
        position,
        cloud_event(position, "turn.started", "{}"),
    )
}

fn snapshot(cursor: &str) -> SseEvent {
    sse(
        "snapshot",
        "",
        format!(
            r#"{{"conversation_id":"0190a0b0-0000-7000-8000-000000000001","cursor":"{cursor}","session":null}}"#
        ),
    )
}

fn position(event: &Admit) -> Option<&str> {
    match event {
        Admit::Yield(e) => Some(e.position.as_str()),
        _ => None,
    }
}

#[test]
fn resumes_after_the_last_yielded_position() {
    let mut resume = Resume::new(None);
    assert_eq!(resume.last_event_id(), None);
    assert_eq!(position(&resume.admit(&rune("1"))), Some("1"));
    assert_eq!(position(&resume.admit(&rune("2.7"))), Some("2.7"));
    assert_eq!(resume.last_event_id().map(Position::as_str), Some("2.7"));
    let start = Resume::new(Some(Position::start()));
    assert_eq!(start.last_event_id().map(Position::as_str), Some("0"));
}

#[test]
fn an_event_repeated_after_a_reconnect_is_not_yielded_twice() {
    let mut resume = Resume::new(Some(Position::new("5").expect("position")));
    assert!(matches!(resume.admit(&rune("5")), Admit::Skip));
    assert_eq!(position(&resume.admit(&rune("6"))), Some("6"));
    assert!(matches!(resume.admit(&rune("6")), Admit::Skip));
    assert_eq!(resume.last_event_id().map(Position::as_str), Some("6"));
}

#[test]
fn the_snapshot_is_yielded_once_and_does_not_move_the_resume_point() {
    let mut resume = Resume::new(None);
    assert_eq!(position(&resume.admit(&snapshot("0"))), Some("0"));
    assert_eq!(resume.last_event_id(), None);
    assert_eq!(position(&resume.admit(&rune("3"))), Some("3"));
    // The stream reopened: a new snapshot comes first, and is not yielded again.
    assert!(matches!(resume.admit(&snapshot("3")), Admit::Skip));
    assert_eq!(resume.last_event_id().map(Position::as_str), Some("3"));
}

#[test]
fn an_unparsable_event_is_an_error_and_is_moved_past() {
    let mut resume = Resume::new(None);
    let bad = sse("project_manager.task.created", "8", "{not json".into());
    assert!(matches!(
        resume.admit(&bad),
        Admit::Fail(Error::Decode { .. })
    ));
    assert_eq!(resume.last_event_id().map(Position::as_str), Some("8"));
    assert_eq!(position(&resume.admit(&rune("9"))), Some("9"));
}

fn unavailable(retry_after: Option<Duration>) -> Error {
    Error::Problem(Problem {
        status: 503,
        code: "service_unavailable".into(),
        title: String::new(),
        detail: String::new(),
        kind: String::new(),
        retry_after,
    })
}

#[test]
fn the_follower_gives_up_on_refusals_and_on_a_service_it_never_reached() {
    let policy = RetryPolicy::default().max_attempts(3);
    let forbidden = Error::Problem(Problem {
        status: 403,
        code: "forbidden".into(),
        title: String::new(),
        detail: String::new(),
        kind: String::new(),
        retry_after: None,
    });
    assert!(gives_up(&policy, &forbidden, 1, true));
    let down = dropped("connection refused");
    assert!(!gives_up(&policy, &down, 2, false));
    assert!(gives_up(&policy, &down, 3, false));
    // Once connected, a follower outlives any outage.
    assert!(!gives_up(&policy, &down, 1_000, true));
    assert!(!gives_up(
        &policy,
        &idle(Duration::from_secs(1)),
        1_000,
        true
    ));
}

#[test]
fn reconnects_back_off_and_honour_retry_after() {
    let policy = RetryPolicy::default()
        .base_delay(Duration::from_millis(100))
        .max_delay(Duration::from_secs(2));
    let down = dropped("eof");
    assert_eq!(
        reconnect_delay(&policy, 1, &down, 0.0),
        Duration::from_millis(50)
    );
    assert_eq!(
        reconnect_delay(&policy, 50, &down, 0.999),
        policy.backoff(50, 0.999)
    );
    assert!(reconnect_delay(&policy, 50, &down, 0.999) <= Duration::from_secs(2));
    let asks = unavailable(Some(Duration::from_secs(30)));
    assert_eq!(
        reconnect_delay(&policy, 1, &asks, 0.5),
        Duration::from_secs(30)
    );
}

#[test]
fn a_lagged_notice_is_not_an_event_and_keeps_the_resume_point() {
    let mut resume = Resume::new(None);
    assert_eq!(position(&resume.admit(&rune("4"))), Some("4"));
    let lagged = sse(
        "lagged",
        "4",
        r#"{"reason":"the stream fell behind the log tail","resume_after":"4"}"#.into(),
    );
    assert!(matches!(resume.admit(&lagged), Admit::Skip));
    assert_eq!(resume.last_event_id().map(Position::as_str), Some("4"));
}
