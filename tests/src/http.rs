//! A small HTTP client for a running service (in-process [`crate::TestService`] or a
//! [`crate::process::ServiceProcess`]): requests that may fail (a killed service, a
//! stopped database) return `Result`, plus fixtures and log/processor helpers.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::Response;

/// A service's base URL, a client and an optional bearer token.
#[derive(Debug, Clone)]
pub struct Api {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The client (keep-alive pool, no proxy, 30 s timeout per request).
    pub client: reqwest::Client,
    /// Sent as `Authorization: Bearer` when set.
    pub token: Option<String>,
}

/// An HTTP client that pools keep-alive connections, never uses a proxy, and gives up on
/// a request after `timeout` (on connecting after 5 s).
pub fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client")
}

impl Api {
    /// A client for `base` (no token).
    pub fn new(base: impl Into<String>) -> Self {
        Self {
            base: base.into(),
            client: client(Duration::from_secs(30)),
            token: None,
        }
    }

    /// The same service with a bearer token.
    #[must_use]
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The same service with another per-request timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.client = client(timeout);
        self
    }

    /// `base + path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => req.bearer_auth(token),
            None => req,
        }
    }

    /// Sends a prepared request (the token is added) and buffers the answer.
    ///
    /// # Errors
    /// Connection errors, timeouts, a broken body.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Result<Response, reqwest::Error> {
        Response::read(self.auth(req).send().await?).await
    }

    /// `GET path`.
    ///
    /// # Errors
    /// See [`Api::send`].
    pub async fn get(&self, path: &str) -> Result<Response, reqwest::Error> {
        self.send(self.client.get(self.url(path))).await
    }

    /// `GET path` with extra headers.
    ///
    /// # Errors
    /// See [`Api::send`].
    pub async fn get_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<Response, reqwest::Error> {
        let mut req = self.client.get(self.url(path));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        self.send(req).await
    }

    /// `POST path` with a JSON body.
    ///
    /// # Errors
    /// See [`Api::send`].
    pub async fn post(&self, path: &str, body: &Value) -> Result<Response, reqwest::Error> {
        self.post_with(path, body, &[]).await
    }

    /// `POST path` with a JSON body and extra headers (e.g. `Idempotency-Key`).
    ///
    /// # Errors
    /// See [`Api::send`].
    pub async fn post_with(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> Result<Response, reqwest::Error> {
        let mut req = self.client.post(self.url(path)).json(body);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        self.send(req).await
    }

    /// `GET path`, which must answer; panics with the error otherwise.
    pub async fn must_get(&self, path: &str) -> Response {
        self.get(path)
            .await
            .unwrap_or_else(|e| panic!("GET {path} failed: {e}"))
    }

    /// The value of an unlabelled counter on `/metrics`; every counter is there from the
    /// start, so one that is not is a failure, never a zero.
    pub async fn counter(&self, name: &str) -> f64 {
        let text = self.must_get("/metrics").await.text;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} is not on /metrics"))
    }

    /// `POST path` expecting `201 Created`; returns the answer.
    pub async fn create(&self, path: &str, body: &Value) -> Response {
        let r = self
            .post(path, body)
            .await
            .unwrap_or_else(|e| panic!("POST {path} failed: {e}"));
        assert_eq!(r.status, 201, "POST {path} {body}: {}", r.text);
        r
    }

    /// Registers a human actor; returns its id.
    pub async fn actor(&self) -> String {
        let body = json!({"kind": "human", "display_name": "Alice"});
        self.create("/v1/actors", &body).await.id()
    }

    /// Starts a conversation with one actor; returns its id.
    pub async fn conversation(&self, actor: &str) -> String {
        let body = json!({"actor_ids": [actor], "title": "Fault test"});
        self.create("/v1/conversations", &body).await.id()
    }

    /// Adds a message; returns the answer (`201` expected).
    pub async fn message(&self, conversation: &str, actor: &str, content: &str) -> Response {
        let body = json!({"actor_id": actor, "content": content});
        self.create(&format!("/v1/conversations/{conversation}/messages"), &body)
            .await
    }

    /// Every event visible now for `query` (e.g. `types=project_manager.message.added`),
    /// paged with `limit=500`.
    ///
    /// # Errors
    /// A failed request; a page that is not `200` is a panic.
    pub async fn events(&self, query: &str) -> Result<Vec<Value>, reqwest::Error> {
        let mut all = Vec::new();
        let mut cursor = "0".to_string();
        loop {
            let path = format!("/v1/events?{query}&limit=500&cursor={cursor}");
            let page = self.get(&path).await?;
            assert_eq!(page.status, 200, "GET {path}: {}", page.text);
            let items = page.json["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                return Ok(all);
            }
            cursor = page.json["next_cursor"]
                .as_str()
                .expect("next_cursor")
                .to_string();
            all.extend(items);
        }
    }

    /// `GET /v1/admin/processors` (200 expected).
    ///
    /// # Errors
    /// A failed request.
    pub async fn processors(&self) -> Result<Value, reqwest::Error> {
        let r = self.get("/v1/admin/processors").await?;
        assert_eq!(r.status, 200, "GET /v1/admin/processors: {}", r.text);
        Ok(r.json)
    }

    /// Polls `GET path?min_position=<position>` (the read model has caught up with it)
    /// until it answers `200` or `timeout` passes; returns the last answer.
    ///
    /// # Errors
    /// A failed request.
    pub async fn read_at(
        &self,
        path: &str,
        position: &str,
        timeout: Duration,
    ) -> Result<Response, reqwest::Error> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let full = format!("{path}{sep}min_position={position}");
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.get(&full).await?;
            if r.status == 200 || Instant::now() >= deadline {
                return Ok(r);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The `read_model` entry of a processors report (`GET /v1/admin/processors` or
/// `/readyz`), or `Value::Null`.
pub fn read_model(report: &Value) -> &Value {
    report["processors"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "read_model"))
        .unwrap_or(&Value::Null)
}

/// The message count of a conversation as the read model has it.
pub fn message_count(conversation: &Value) -> i64 {
    conversation["message_count"].as_i64().unwrap_or(-1)
}

/// One Server-Sent Event as received.
#[derive(Debug, Clone)]
pub struct SseEvent {
    /// `id:` (the log position).
    pub id: String,
    /// `event:` (the fact type, or `snapshot`).
    pub event: String,
    /// `data:` parsed as JSON (`Value::Null` when it is not JSON).
    pub data: Value,
    /// When it arrived.
    pub at: Instant,
}

/// An open `text/event-stream` answer, read by a background task into a channel (so a
/// test can time each event's arrival). Dropping it closes the connection.
#[derive(Debug)]
pub struct SseStream {
    events: tokio::sync::mpsc::UnboundedReceiver<SseEvent>,
    reader: tokio::task::JoinHandle<()>,
}

impl SseStream {
    /// Opens `GET path` with `Accept: text/event-stream` and `headers` (e.g.
    /// `Last-Event-ID`).
    ///
    /// # Errors
    /// The answer when it is not `200` (buffered), or the connection error.
    pub async fn open(api: &Api, path: &str, headers: &[(&str, &str)]) -> Result<Self, String> {
        use futures::StreamExt;
        let mut req = api
            .auth(
                reqwest::Client::builder()
                    .no_proxy()
                    .build()
                    .map_err(|e| e.to_string())?
                    .get(api.url(path)),
            )
            .header("accept", "text/event-stream");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let r = req.send().await.map_err(|e| e.to_string())?;
        if r.status() != 200 {
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            return Err(format!("{status} {text}"));
        }
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            let mut body = r.bytes_stream();
            // Bytes, not text: a chunk may end inside a UTF-8 sequence.
            let mut buf: Vec<u8> = Vec::new();
            while let Some(Ok(chunk)) = body.next().await {
                buf.extend_from_slice(&chunk);
                while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                    let block: Vec<u8> = buf.drain(..end + 2).collect();
                    if let Some(event) = parse_sse_block(&String::from_utf8_lossy(&block)) {
                        if tx.send(event).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Self { events, reader })
    }

    /// The next event, or `None` when none comes within `timeout` (or the stream ended).
    pub async fn next(&mut self, timeout: Duration) -> Option<SseEvent> {
        tokio::time::timeout(timeout, self.events.recv())
            .await
            .ok()
            .flatten()
    }
}

impl Drop for SseStream {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn parse_sse_block(block: &str) -> Option<SseEvent> {
    let (mut id, mut event, mut data) = (String::new(), String::from("message"), String::new());
    let mut any = false;
    for line in block.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => id = value.to_string(),
            "event" => event = value.to_string(),
            "data" => {
                if any {
                    data.push('\n');
                }
                data.push_str(value);
                any = true;
            }
            _ => {}
        }
    }
    any.then(|| SseEvent {
        id,
        event,
        data: serde_json::from_str(&data).unwrap_or(Value::Null),
        at: Instant::now(),
    })
}
