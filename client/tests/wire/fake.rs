//! A scripted HTTP/1.1 server on a loopback port: records every request and answers each
//! with what the test's script says (an answer, an SSE body, or silence). One request
//! per connection (`Connection: close`), which is all the client's retries need.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET /v1/tasks?status=… HTTP/1.1`, split: method.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Lower-cased header names with their values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Seen {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What to answer.
pub enum Reply {
    /// Status, extra headers, body (JSON or problem+json by status).
    Answer(u16, Vec<(&'static str, String)>, String),
    /// `200 text/event-stream` with this body, then close.
    Sse(String),
    /// `200 text/event-stream` with this body, then silence with the connection open.
    SseHold(String),
    /// Read the request and never answer (a timeout).
    Silence,
    /// This reply, after a pause (a long-poll that waits).
    Late(Duration, Box<Reply>),
}

type Script = Box<dyn Fn(usize, &Seen) -> Reply + Send + Sync>;

/// The running server.
pub struct Fake {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    /// Starts a server answering the `n`-th request (0-based) with `script(n, request)`.
    pub async fn start(script: impl Fn(usize, &Seen) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(Box::new(script));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, log.clone(), script.clone()));
            }
        });
        Self { base, seen }
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

async fn serve(mut conn: TcpStream, log: Arc<Mutex<Vec<Seen>>>, script: Arc<Script>) {
    let Some(seen) = read_request(&mut conn).await else {
        return;
    };
    let n = {
        let mut log = log.lock().expect("lock");
        log.push(seen.clone());
        log.len() - 1
    };
    let mut reply = script(n, &seen);
    while let Reply::Late(pause, late) = reply {
        tokio::time::sleep(pause).await;
        reply = *late;
    }
    let raw = match reply {
        Reply::Answer(status, headers, body) => {
            let kind = if status >= 400 {
                "application/problem+json"
            } else {
                "application/json"
            };
            let mut head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            format!("{head}\r\n{body}")
        }
        Reply::Sse(body) => format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
        ),
        Reply::SseHold(body) => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = conn.write_all(format!("{head}{body}").as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
            return;
        }
        Reply::Silence | Reply::Late(..) => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            return;
        }
    };
    let _ = conn.write_all(raw.as_bytes()).await;
    let _ = conn.shutdown().await;
}

async fn read_request(conn: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let target = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen {
        method,
        target,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    })
}

/// A problem+json body.
pub fn problem(status: u16, code: &str) -> String {
    format!(
        r#"{{"type":"https://x/{code}","title":"T","status":{status},"detail":"because","code":"{code}"}}"#
    )
}
