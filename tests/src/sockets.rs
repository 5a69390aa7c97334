//! Raw TCP clients for connection-hygiene tests: idle connections that never send a
//! byte, slowloris connections that dribble a request's headers, one raw HTTP/1.1
//! request with a classified outcome, and raising this process's own open-file limit.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit; returns the new soft
/// limit. (Processes spawned afterwards inherit it.)
///
/// # Panics
/// When the limit cannot be read or set.
pub fn raise_nofile_limit() -> u64 {
    let (_, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).expect("getrlimit");
    rlimit::increase_nofile_limit(hard).expect("raise RLIMIT_NOFILE")
}

/// Opens `n` TCP connections to `addr` that send nothing (blocking), paced at 64 per
/// 50 ms: a client connecting faster than the server accepts overflows its listen
/// backlog (128 by default), and every dropped SYN costs a one-second retransmission.
///
/// # Panics
/// When a connection cannot be made within 10 s.
pub fn open_idle(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut open = Vec::with_capacity(n);
    for i in 0..n {
        if i > 0 && i % 64 == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        open.push(
            TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("idle connection {i} of {n}: {e}")),
        );
    }
    open
}

/// How a raw request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawAnswer {
    /// An HTTP answer: its status and its head (status line and headers).
    Status {
        /// Status code.
        status: u16,
        /// Status line and headers.
        head: String,
    },
    /// The connection was refused.
    Refused,
    /// The server closed (EOF or reset) without an answer.
    Closed,
    /// Neither an answer nor a close within the timeout.
    NoAnswer,
}

impl RawAnswer {
    /// A header's value (case-insensitive name) of an HTTP answer.
    pub fn header(&self, name: &str) -> Option<String> {
        let RawAnswer::Status { head, .. } = self else {
            return None;
        };
        head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// Sends `GET path` with `Connection: close` on a fresh connection and reads the answer's
/// head (blocking, at most `timeout` in all).
pub fn raw_get(addr: SocketAddr, path: &str, timeout: Duration) -> RawAnswer {
    let deadline = Instant::now() + timeout;
    let mut stream = match TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => s,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => return RawAnswer::Refused,
        Err(e) if e.kind() == ErrorKind::TimedOut => return RawAnswer::NoAnswer,
        Err(_) => return RawAnswer::Closed,
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return RawAnswer::Closed;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return RawAnswer::NoAnswer;
        }
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return RawAnswer::NoAnswer
            }
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&got).to_string();
    let head = text.split("\r\n\r\n").next().unwrap_or("").to_string();
    match head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
    {
        Some(status) if head.starts_with("HTTP/") => RawAnswer::Status { status, head },
        _ => RawAnswer::Closed,
    }
}

/// One slowloris connection: connects, sends the start of a request, then one more byte
/// of headers every `interval`, never finishing them; returns how long after connecting
/// the server closed it (EOF, reset, or a failed write), or `None` if it was still open
/// after `give_up`. An HTTP answer (e.g. `408`) followed by a close counts as closed.
pub async fn slowloris(
    addr: SocketAddr,
    interval: Duration,
    give_up: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let Ok(stream) = tokio::net::TcpStream::connect(addr).await else {
        return Some(started.elapsed());
    };
    let opening = format!("GET /v1/events HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ");
    if write_all(&stream, opening.as_bytes()).await.is_err() {
        return Some(started.elapsed());
    }
    let mut buf = [0u8; 1024];
    let mut next_byte = Instant::now() + interval;
    loop {
        if started.elapsed() >= give_up {
            return None;
        }
        let wait = next_byte.saturating_duration_since(Instant::now());
        tokio::select! {
            ready = stream.readable() => {
                if ready.is_err() {
                    return Some(started.elapsed());
                }
                match stream.try_read(&mut buf) {
                    Ok(0) => return Some(started.elapsed()),
                    // Bytes of an answer: keep reading until the close.
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => return Some(started.elapsed()),
                }
            }
            () = tokio::time::sleep(wait) => {
                if write_all(&stream, b"a").await.is_err() {
                    return Some(started.elapsed());
                }
                next_byte = Instant::now() + interval;
            }
        }
    }
}

async fn write_all(stream: &tokio::net::TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether the server has closed `stream` (EOF or reset), checked without blocking for
/// more than `wait`.
pub fn is_closed(stream: &mut TcpStream, wait: Duration) -> bool {
    let _ = stream.set_read_timeout(Some(wait.max(Duration::from_millis(1))));
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}
