//! # pm-tests — black-box test support
//!
//! Starts the real service (the `project-manager` library's [`Application`]) on port 0
//! against a fresh SQLite file or a fresh PostgreSQL database, and talks to it over HTTP.
//!
//! PostgreSQL comes from `PM_TEST_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); each test creates its own database and
//! drops it. Without a reachable server the PostgreSQL tests skip with a loud message,
//! unless `CI=true`, where they fail.
//!
//! For process-level fault tests (the service as a separate process that can be killed,
//! a private PostgreSQL server that can be stopped) see [`process`], [`pg_server`],
//! [`load`], [`sockets`] and [`http`].

pub mod http;
pub mod load;
pub mod nats;
pub mod otlp;
pub mod pg_server;
pub mod process;
pub mod sockets;

use project_manager::app::Hooks;
use project_manager::{Application, Config};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The admin token every [`TestService`] with auth is configured with.
pub const ADMIN: &str = "admin-token-0001";
/// The ingress token.
pub const INGRESS: &str = "ingress-token-0001";
/// The llm token.
pub const LLM: &str = "llm-token-0001";
/// The analyst token.
pub const ANALYST: &str = "analyst-token-0001";

/// `PM_AUTH_TOKENS` with one token per role.
pub fn all_tokens() -> String {
    format!("admin:{ADMIN},ingress:{INGRESS},llm:{LLM},analyst:{ANALYST}")
}

pub use pm_test_db::{in_ci, on_both_backends, pg_admin_url, TestDb};

/// The real service, running in this process on a free port.
pub struct TestService {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// An HTTP client.
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
}

/// `PM_TOOL_DEFAULT_ACTION` of the test services: `allow`, so that a call the worker says
/// needs no approval runs at once, as the tool machine's own tests need. The service's
/// default is `require_approval`; the tool policy tests (`tests/api/policies.rs`) run
/// under it.
pub const WORKER_DECIDES: pm_domain::tool_policy::PolicyAction =
    pm_domain::tool_policy::PolicyAction::Allow;

impl TestService {
    /// Starts the service on `db` with `PM_AUTH_TOKENS=tokens` ("" = open mode).
    ///
    /// # Panics
    /// When the service cannot start.
    pub async fn start(db: &TestDb, tokens: &str) -> Self {
        let mut config = Config::defaults();
        config.bind = "127.0.0.1:0".parse().expect("addr");
        config.database_url = Some(db.url.clone());
        config.auth_tokens = tokens.to_string();
        config.db_pool_size = 8;
        config.log_poll_ms = 50;
        config.tool_default_action = WORKER_DECIDES;
        Self::start_with(config).await
    }

    /// Starts the service with a full configuration.
    ///
    /// # Panics
    /// When the service cannot start.
    pub async fn start_with(config: Config) -> Self {
        Self::start_with_hooks(config, Hooks::default()).await
    }

    /// Starts the service with a full configuration and test hooks (failure injection).
    ///
    /// # Panics
    /// When the service cannot start.
    pub async fn start_with_hooks(config: Config, hooks: Hooks) -> Self {
        let app = Application::build_with(&config, hooks)
            .await
            .expect("service starts");
        let base = format!("http://127.0.0.1:{}", app.port());
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(app.run_until(async move {
            let _ = stopped.await;
        }));
        Self {
            base,
            client: reqwest::Client::new(),
            stop: Some(stop),
            handle: Some(handle),
        }
    }

    /// Stops the service gracefully and waits until it has.
    ///
    /// # Panics
    /// When the server task failed.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            handle.await.expect("server task").expect("server ran");
        }
    }

    /// `POST base+path` with a JSON body and an optional bearer token.
    pub async fn post(&self, token: Option<&str>, path: &str, body: &Value) -> Response {
        let mut req = self.client.post(format!("{}{path}", self.base)).json(body);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        Response::from(req.send().await.expect("request sent")).await
    }

    /// `GET base+path` with an optional bearer token.
    pub async fn get(&self, token: Option<&str>, path: &str) -> Response {
        let mut req = self.client.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        Response::from(req.send().await.expect("request sent")).await
    }
}

/// A buffered HTTP answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: reqwest::header::HeaderMap,
    /// The body parsed as JSON (`Value::Null` when it is not JSON).
    pub json: Value,
    /// The raw body.
    pub text: String,
}

impl Response {
    async fn from(r: reqwest::Response) -> Self {
        Self::read(r).await.expect("body read")
    }

    /// Buffers a reqwest answer.
    ///
    /// # Errors
    /// When the body cannot be read (the connection broke).
    pub async fn read(r: reqwest::Response) -> Result<Self, reqwest::Error> {
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await?;
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Self {
            status,
            headers,
            json,
            text,
        })
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The problem `code`, for error answers.
    pub fn code(&self) -> &str {
        self.json["code"].as_str().unwrap_or("")
    }

    /// The entity `id`.
    pub fn id(&self) -> String {
        self.json["id"].as_str().unwrap_or_default().to_string()
    }
}
