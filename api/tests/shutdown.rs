//! The binary itself: it starts on a fresh SQLite file, serves, and on SIGTERM closes
//! open event streams and exits cleanly.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Removes ANSI colour sequences from a log line.
fn plain(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn sigterm_closes_event_streams_and_exits_cleanly() {
    let dir = std::env::temp_dir().join(format!("pm-shutdown-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_project-manager"))
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", dir.join("pm.db").display()),
        )
        .env("PM_BIND", "127.0.0.1:0")
        .env("RUST_LOG", "info")
        .env_remove("PM_AUTH_TOKENS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .map(|l| plain(&l))
        .find_map(|l| {
            l.contains("listening")
                .then(|| {
                    l.split("addr=")
                        .nth(1)
                        .map(|a| a.split_whitespace().next().unwrap_or("").to_string())
                })
                .flatten()
        })
        .expect("the service logs its address");

    let mut stream = TcpStream::connect(&addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        stream,
        "GET /v1/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .expect("request");
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).expect("response starts");
    assert_eq!(&head, b"HTTP/1.1 200", "the stream opened");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    // The open stream ends (EOF) instead of holding the shutdown up.
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the event stream was closed at shutdown"
    );
    let exit = loop {
        if let Some(exit) = child.try_wait().expect("wait") {
            break exit;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the service exits after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "clean exit, got {exit}");
    let _ = std::fs::remove_dir_all(dir);
}
