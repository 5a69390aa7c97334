//! The boundary against slow clients (TRUST.md "The boundary"), on the service as a
//! process over raw TCP: a body that does not arrive whole within
//! `PM_BODY_READ_TIMEOUT_MS` — sent partly then nothing, or trickled a byte at a time — is
//! answered `408 request_timeout`, its connection closes and nothing is written; and a
//! client stalled mid-request holds a SIGTERM only `PM_SHUTDOWN_GRACE_SECS`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use pm_tests::TestDb;
use serde_json::Value;

use crate::support::start;

/// Sends the headers of a JSON `POST` announcing `length` bytes, and the first of them.
fn stalled_post(addr: SocketAddr, path: &str, length: usize, first: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connected");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {length}\r\n\r\n{first}"
    );
    stream.write_all(head.as_bytes()).expect("sent");
    stream
}

/// Reads until the server closes the connection (at most `wait`); answers what it sent and
/// whether it closed.
fn read_to_close(stream: &mut TcpStream, wait: Duration) -> (String, bool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&got).into_owned(), true)
            }
            Err(_) => {}
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), false)
}

fn problem_code(answer: &str) -> String {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["code"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn assert_timed_out(answer: &str, closed: bool, took: Duration) {
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert_eq!(problem_code(answer), "request_timeout", "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(closed, "the connection stays open after the 408");
    assert!(
        took >= Duration::from_millis(450),
        "answered before the deadline: {took:?}"
    );
    assert!(took < Duration::from_secs(4), "answered late: {took:?}");
}

async fn a_body_that_does_not_arrive_in_time_is_408_and_closes(db: TestDb) {
    let svc = start(&[
        ("DATABASE_URL", db.url.as_str()),
        ("PM_BODY_READ_TIMEOUT_MS", "500"),
    ])
    .await;
    let addr = svc.addr();
    tokio::task::block_in_place(|| {
        // A command whose body stops half way: nothing is written.
        let started = Instant::now();
        let mut stream = stalled_post(addr, "/v1/actors", 100, "{\"kind\": ");
        let (answer, closed) = read_to_close(&mut stream, Duration::from_secs(5));
        assert_timed_out(&answer, closed, started.elapsed());

        // A byte every 100 ms does not reset the deadline: it is the whole body's.
        let started = Instant::now();
        let mut stream = stalled_post(addr, "/console/session", 60, "{");
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(100));
            if stream.write_all(b" ").is_err() {
                break;
            }
        }
        let (answer, closed) = read_to_close(&mut stream, Duration::from_secs(5));
        assert_timed_out(&answer, closed, started.elapsed());
    });
    // The service goes on answering, and the stalled command wrote nothing.
    let api = svc.api().clone();
    let actor = api.actor().await;
    assert!(!actor.is_empty());
    let page = api
        .get("/v1/events?types=project_manager.actor.registered")
        .await
        .expect("answered");
    assert_eq!(
        page.json["items"].as_array().map(Vec::len),
        Some(1),
        "{}",
        page.text
    );
    drop(svc);
}

async fn sigterm_closes_a_stalled_request_after_the_grace(db: TestDb) {
    let mut svc = start(&[
        ("DATABASE_URL", db.url.as_str()),
        ("PM_BODY_READ_TIMEOUT_MS", "60000"),
        ("PM_SHUTDOWN_GRACE_SECS", "1"),
    ])
    .await;
    let mut stream = stalled_post(svc.addr(), "/console/session", 100, "{");
    // Let the request reach its handler before the signal.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let status = svc.terminate(Duration::from_secs(10)).await;
    let took = started.elapsed();
    assert!(status.success(), "{status:?}: {}", svc.log_tail(20));
    assert!(took < Duration::from_secs(4), "exit took {took:?}");
    assert!(
        took >= Duration::from_millis(900),
        "the grace was not given: {took:?}"
    );
    assert!(
        svc.log().contains("closing their connections"),
        "{}",
        svc.log_tail(20)
    );
    let (_, closed) =
        tokio::task::block_in_place(|| read_to_close(&mut stream, Duration::from_secs(2)));
    assert!(closed, "the stalled connection is closed");
}

/// Many slow clients at once do not starve the others: 200 connections each stalled
/// mid-body, and the service still answers a reader within 100 ms; each stalled one gets
/// its `408` and is closed within the timeout.
async fn two_hundred_slow_bodies_do_not_starve_the_others(db: TestDb) {
    let svc = start(&[
        ("DATABASE_URL", db.url.as_str()),
        ("PM_BODY_READ_TIMEOUT_MS", "1500"),
    ])
    .await;
    let addr = svc.addr();
    let started = Instant::now();
    let mut stalled: Vec<TcpStream> = tokio::task::block_in_place(|| {
        (0..200)
            .map(|_| stalled_post(addr, "/v1/actors", 100, "{\"kind\": "))
            .collect()
    });
    let api = svc.api().clone();
    let mut took = Vec::new();
    for _ in 0..5 {
        let asked = Instant::now();
        let r = api.get("/v1/conversations").await.expect("answered");
        assert_eq!(r.status, 200, "{}", r.text);
        took.push(asked.elapsed());
    }
    took.sort();
    assert!(
        took[2] < Duration::from_millis(100),
        "answers while 200 bodies stall: {took:?}"
    );
    tokio::task::block_in_place(|| {
        for stream in &mut stalled {
            let (answer, closed) = read_to_close(stream, Duration::from_secs(5));
            assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
            assert!(closed, "a stalled connection stays open after its 408");
        }
    });
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "the 408s came late: {:?}",
        started.elapsed()
    );
    eprintln!("with 200 stalled bodies: readers answered in {took:?}");
}

/// On SIGTERM a request in flight that finishes within the grace gets its answer, an open
/// event stream and a long-polling claim end at once, and the process exits within the
/// grace and a second.
async fn sigterm_finishes_requests_in_flight_and_ends_streams(db: TestDb) {
    let mut svc = start(&[
        ("DATABASE_URL", db.url.as_str()),
        ("PM_BODY_READ_TIMEOUT_MS", "60000"),
        ("PM_SHUTDOWN_GRACE_SECS", "2"),
    ])
    .await;
    let addr = svc.addr();
    let (mut events, mut claim, mut command, rest) = tokio::task::block_in_place(|| {
        let mut events = TcpStream::connect(addr).expect("connected");
        events
            .write_all(
                b"GET /v1/events HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n\r\n",
            )
            .expect("sent");
        let body = r#"{"wait_ms": 30000}"#;
        let mut claim = TcpStream::connect(addr).expect("connected");
        let head = format!(
            "POST /v1/turns/claim HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        );
        claim.write_all(head.as_bytes()).expect("sent");
        let actor = r#"{"kind": "human", "display_name": "Late"}"#;
        let (first, rest) = actor.split_at(12);
        let command = stalled_post(addr, "/v1/actors", actor.len(), first);
        (events, claim, command, rest.to_string())
    });
    // Let the three reach their handlers before the signal.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &svc.pid().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(sent.success());
    // The command's client sends the rest within the grace: it is answered.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (answer, _) = tokio::task::block_in_place(|| {
        command.write_all(rest.as_bytes()).expect("the rest sent");
        read_to_close(&mut command, Duration::from_secs(3))
    });
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer:?}");
    let status = svc
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the process exits");
    let took = started.elapsed();
    assert!(status.success(), "{status:?}: {}", svc.log_tail(20));
    assert!(
        took < Duration::from_secs(3),
        "exit took {took:?} (grace 2 s)"
    );
    tokio::task::block_in_place(|| {
        let (_, closed) = read_to_close(&mut events, Duration::from_secs(1));
        assert!(closed, "the event stream ended");
        let (answer, closed) = read_to_close(&mut claim, Duration::from_secs(1));
        assert!(
            answer.starts_with("HTTP/1.1 204"),
            "the waiting claim: {answer:?}"
        );
        assert!(closed, "the waiting claim's connection ended");
    });
    eprintln!("SIGTERM with a request in flight, a stream and a claim: exited in {took:?}");
}

per_backend!(a_body_that_does_not_arrive_in_time_is_408_and_closes, sqlite: [], postgres: []);
per_backend!(two_hundred_slow_bodies_do_not_starve_the_others, sqlite: [], postgres: []);
per_backend!(sigterm_finishes_requests_in_flight_and_ends_streams, sqlite: [], postgres: []);
per_backend!(sigterm_closes_a_stalled_request_after_the_grace, sqlite: [], postgres: []);

/// No secret appears in what the service prints: an unparsable `DATABASE_URL` is named
/// with its password masked, and an unreachable one fails without printing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_database_url_is_named_without_its_password() {
    let _serial = crate::support::serial().await;
    pm_tests::process::use_binary(env!("CARGO_BIN_EXE_pm-test-server"));
    let (status, output) = pm_tests::process::ServiceProcess::run(
        &[],
        &[("DATABASE_URL", "postgres://pm:s3cret-pw@127.0.0.1:bad/pm")],
        Duration::from_secs(30),
    );
    assert!(!status.success());
    assert!(
        output.contains("postgres://pm:***@127.0.0.1:bad/pm"),
        "{output}"
    );
    assert!(
        !output.contains("s3cret-pw"),
        "the password was printed: {output}"
    );
    let (status, output) = pm_tests::process::ServiceProcess::run(
        &[],
        &[("DATABASE_URL", "postgres://pm:s3cret-pw@127.0.0.1:1/pm")],
        Duration::from_secs(60),
    );
    assert!(!status.success());
    assert!(
        output.contains("cannot connect to the database"),
        "{output}"
    );
    assert!(
        !output.contains("s3cret-pw"),
        "the password was printed: {output}"
    );
}
