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
pub mod pg_server;
pub mod process;
pub mod sockets;

use std::path::PathBuf;

use project_manager::app::Hooks;
use project_manager::{Application, Config};
use serde_json::Value;
use sqlx::{Connection, Executor, PgConnection};
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

/// A database for one test: a SQLite file in a fresh directory, or a fresh PostgreSQL
/// database (dropped when the value is dropped).
#[derive(Debug)]
pub struct TestDb {
    /// The `DATABASE_URL`.
    pub url: String,
    /// `sqlite` or `postgres`.
    pub kind: &'static str,
    pg: Option<(String, String)>,
    dir: Option<PathBuf>,
}

/// The URL of the shared PostgreSQL server's `postgres` database (`PM_TEST_PG_URL`).
pub fn pg_admin_url() -> String {
    std::env::var("PM_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Whether the tests run under `CI=true` (where a missing server fails a test instead of
/// skipping it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

impl TestDb {
    /// The PostgreSQL database's name (`None` for SQLite).
    pub fn pg_name(&self) -> Option<&str> {
        self.pg.as_ref().map(|(_, name)| name.as_str())
    }

    /// A fresh SQLite database file.
    pub async fn sqlite() -> Option<Self> {
        let dir = std::env::temp_dir().join(format!("pm-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Some(Self {
            url: format!("sqlite://{}", dir.join("pm.db").display()),
            kind: "sqlite",
            pg: None,
            dir: Some(dir),
        })
    }

    /// A fresh PostgreSQL database, or `None` (with a loud message) when no server is
    /// reachable outside CI.
    ///
    /// # Panics
    /// Under `CI=true` when PostgreSQL is unreachable.
    pub async fn postgres() -> Option<Self> {
        let admin = pg_admin_url();
        let mut conn = match PgConnection::connect(&admin).await {
            Ok(conn) => conn,
            Err(e) => {
                if in_ci() {
                    panic!("PostgreSQL at {admin} is unreachable under CI=true: {e}");
                }
                eprintln!(
                    "\n!!!!! SKIPPING a PostgreSQL test: {admin} is unreachable ({e}) !!!!!\n"
                );
                return None;
            }
        };
        let name = format!("pm_test_{}", uuid::Uuid::new_v4().simple());
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .expect("create test database");
        let base = admin
            .rsplit_once('/')
            .map_or(admin.as_str(), |(b, _)| b)
            .to_string();
        Some(Self {
            url: format!("{base}/{name}"),
            kind: "postgres",
            pg: Some((admin, name)),
            dir: None,
        })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some((admin, name)) = self.pg.take() {
            // Drop needs async; run it on a runtime of its own on another thread.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                if let Ok(rt) = rt {
                    rt.block_on(async {
                        if let Ok(mut conn) = PgConnection::connect(&admin).await {
                            let _ = conn
                                .execute(
                                    format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str(),
                                )
                                .await;
                        }
                    });
                }
            })
            .join();
        }
    }
}

/// The real service, running in this process on a free port.
pub struct TestService {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// An HTTP client.
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
}

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

/// Generates one `#[tokio::test]` per backend for each named `async fn(TestDb)`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(db) = $crate::TestDb::sqlite().await {
                        super::$name(db).await;
                    }
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(db) = $crate::TestDb::postgres().await {
                        super::$name(db).await;
                    }
                }
            )*
        }
    };
}
