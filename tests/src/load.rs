//! A small load driver: `workers` tokio tasks post `MessageAdded` commands into one
//! conversation, each with a unique `Idempotency-Key` (and optionally a unique
//! `external_identity`), until stopped, a duration passes, or each has sent
//! `max_per_worker`. Every attempt is recorded with its key, body and outcome — an answer
//! (status, entity id, `X-Event-Position`) or a failure (connection error, timeout) — and
//! its latency, so a fault test can retry exactly the keys that had no answer and check
//! that every acknowledged fact is in the log.
//!
//! ```ignore
//! let load = Load::start(LoadConfig::messages(api, &conversation, &actor).workers(16));
//! tokio::time::sleep(Duration::from_secs(2)).await;
//! let report = load.stop().await;
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::http::Api;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The service.
    pub api: Api,
    /// The conversation the messages go to.
    pub conversation: String,
    /// The author of the messages (a registered actor).
    pub actor: String,
    /// Concurrent workers (default 16).
    pub workers: usize,
    /// Also send a unique `external_identity` (= the key) with each message.
    pub external_identity: bool,
    /// Pause between one worker's requests (default none).
    pub interval: Duration,
    /// Pause after a failed request (default 20 ms), so a dead service is not hammered.
    pub pause_after_failure: Duration,
    /// Per-request timeout (default 10 s).
    pub request_timeout: Duration,
    /// Stop each worker after this many requests (default unbounded).
    pub max_per_worker: Option<usize>,
    /// Prefix of the keys (default a fresh UUID), so runs never share keys.
    pub key_prefix: String,
}

impl LoadConfig {
    /// Messages into `conversation` by `actor` on `api`'s service.
    pub fn messages(api: &Api, conversation: &str, actor: &str) -> Self {
        Self {
            api: api.clone(),
            conversation: conversation.to_string(),
            actor: actor.to_string(),
            workers: 16,
            external_identity: false,
            interval: Duration::ZERO,
            pause_after_failure: Duration::from_millis(20),
            request_timeout: Duration::from_secs(10),
            max_per_worker: None,
            key_prefix: uuid::Uuid::new_v4().simple().to_string(),
        }
    }

    /// Sets the number of workers.
    #[must_use]
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// Sets the pause between one worker's requests.
    #[must_use]
    pub fn interval(mut self, pause: Duration) -> Self {
        self.interval = pause;
        self
    }

    /// Sends a unique `external_identity` with each message.
    #[must_use]
    pub fn with_external_identity(mut self) -> Self {
        self.external_identity = true;
        self
    }

    /// Sets the per-request timeout.
    #[must_use]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Limits each worker's requests.
    #[must_use]
    pub fn max_per_worker(mut self, n: usize) -> Self {
        self.max_per_worker = Some(n);
        self
    }

    /// The path every command goes to.
    pub fn path(&self) -> String {
        format!("/v1/conversations/{}/messages", self.conversation)
    }

    /// The body of the command with key `key` (its content is the key).
    pub fn body(&self, key: &str) -> Value {
        let mut body = json!({"actor_id": self.actor, "content": key});
        if self.external_identity {
            body["external_identity"] = json!(key);
        }
        body
    }
}

/// What one request got.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The service answered.
    Answered {
        /// Status code.
        status: u16,
        /// The entity's `id` (for 2xx).
        id: Option<String>,
        /// `X-Event-Position`.
        position: Option<String>,
        /// The problem `code` (for errors).
        code: Option<String>,
        /// `Retry-After`.
        retry_after: Option<String>,
    },
    /// No answer: connection refused or reset, timeout, broken body.
    Failed {
        /// The error.
        error: String,
    },
}

/// One request of the load.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The `Idempotency-Key` (also the message content).
    pub key: String,
    /// The path posted to.
    pub path: String,
    /// The body posted.
    pub body: Value,
    /// When it was sent.
    pub sent_at: Instant,
    /// How long until the answer or the failure.
    pub latency: Duration,
    /// The outcome.
    pub outcome: Outcome,
}

impl Attempt {
    /// The status, if answered.
    pub fn status(&self) -> Option<u16> {
        match &self.outcome {
            Outcome::Answered { status, .. } => Some(*status),
            Outcome::Failed { .. } => None,
        }
    }

    /// Whether it got a 2xx answer.
    pub fn acknowledged(&self) -> bool {
        self.status().is_some_and(|s| (200..300).contains(&s))
    }

    /// The entity id of a 2xx answer.
    pub fn id(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Answered { id, .. } => id.as_deref(),
            Outcome::Failed { .. } => None,
        }
    }

    /// The `X-Event-Position` of the answer.
    pub fn position(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Answered { position, .. } => position.as_deref(),
            Outcome::Failed { .. } => None,
        }
    }

    /// When it ended.
    pub fn ended_at(&self) -> Instant {
        self.sent_at + self.latency
    }
}

/// Posts one keyed command and records what happened.
pub async fn attempt(api: &Api, path: &str, key: &str, body: &Value) -> Attempt {
    let sent_at = Instant::now();
    let result = api.post_with(path, body, &[("idempotency-key", key)]).await;
    let latency = sent_at.elapsed();
    let outcome = match result {
        Ok(r) => Outcome::Answered {
            status: r.status,
            id: r.json["id"].as_str().map(str::to_string),
            position: r.header("x-event-position").map(str::to_string),
            code: r.json["code"].as_str().map(str::to_string),
            retry_after: r.header("retry-after").map(str::to_string),
        },
        Err(e) => Outcome::Failed {
            error: format!("{e:?}"),
        },
    };
    Attempt {
        key: key.to_string(),
        path: path.to_string(),
        body: body.clone(),
        sent_at,
        latency,
        outcome,
    }
}

/// A running load.
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<Vec<Attempt>>>,
    started: Instant,
}

impl Load {
    /// Starts the workers.
    pub fn start(config: LoadConfig) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let api = config.api.clone().with_timeout(config.request_timeout);
        let config = Arc::new(config);
        let workers = (0..config.workers)
            .map(|w| {
                let (api, config, stop) = (api.clone(), config.clone(), stop.clone());
                tokio::spawn(async move {
                    let path = config.path();
                    let mut attempts = Vec::new();
                    let mut n = 0usize;
                    while !stop.load(Ordering::Relaxed)
                        && config.max_per_worker.is_none_or(|max| n < max)
                    {
                        let key = format!("{}-{w}-{n}", config.key_prefix);
                        n += 1;
                        let a = attempt(&api, &path, &key, &config.body(&key)).await;
                        let failed = !matches!(a.outcome, Outcome::Answered { .. });
                        attempts.push(a);
                        if failed && !config.pause_after_failure.is_zero() {
                            tokio::time::sleep(config.pause_after_failure).await;
                        } else if !config.interval.is_zero() {
                            tokio::time::sleep(config.interval).await;
                        }
                    }
                    attempts
                })
            })
            .collect();
        Self {
            stop,
            workers,
            started: Instant::now(),
        }
    }

    /// Runs `config` for `duration` and returns the report.
    pub async fn run_for(config: LoadConfig, duration: Duration) -> LoadReport {
        let load = Self::start(config);
        tokio::time::sleep(duration).await;
        load.stop().await
    }

    /// Signals the workers to stop without waiting for them.
    pub fn signal_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the workers (each finishes its request in flight) and collects the report.
    ///
    /// # Panics
    /// When a worker panicked.
    pub async fn stop(self) -> LoadReport {
        self.signal_stop();
        let mut attempts = Vec::new();
        for w in self.workers {
            attempts.extend(w.await.expect("load worker"));
        }
        attempts.sort_by_key(|a| a.sent_at);
        LoadReport {
            attempts,
            elapsed: self.started.elapsed(),
        }
    }
}

/// Everything a load did.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Every request, by the time it was sent.
    pub attempts: Vec<Attempt>,
    /// From start to stop.
    pub elapsed: Duration,
}

impl LoadReport {
    /// Requests with a 2xx answer.
    pub fn acknowledged(&self) -> impl Iterator<Item = &Attempt> {
        self.attempts.iter().filter(|a| a.acknowledged())
    }

    /// Requests without an answer.
    pub fn failed(&self) -> impl Iterator<Item = &Attempt> {
        self.attempts
            .iter()
            .filter(|a| matches!(a.outcome, Outcome::Failed { .. }))
    }

    /// Requests answered with this status.
    pub fn with_status(&self, status: u16) -> impl Iterator<Item = &Attempt> {
        self.attempts
            .iter()
            .filter(move |a| a.status() == Some(status))
    }

    /// Count of answers per status (`0` = no answer).
    pub fn status_counts(&self) -> std::collections::BTreeMap<u16, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for a in &self.attempts {
            *counts.entry(a.status().unwrap_or(0)).or_insert(0) += 1;
        }
        counts
    }

    /// The `q` quantile (0.0–1.0) of the latencies of answered requests.
    pub fn latency_quantile(&self, q: f64) -> Duration {
        let mut l: Vec<Duration> = self
            .attempts
            .iter()
            .filter(|a| a.status().is_some())
            .map(|a| a.latency)
            .collect();
        quantile(&mut l, q)
    }
}

/// The `q` quantile (nearest rank) of `values` (sorted in place); zero when empty.
pub fn quantile(values: &mut [Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort();
    let rank = (q.clamp(0.0, 1.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}
