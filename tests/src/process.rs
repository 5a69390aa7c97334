//! The service as a separate process (the `pm-test-server` binary, which is exactly
//! `project-manager`): started on a free port with a given environment, its stdout and
//! stderr captured in a log file, and ended the hard way (`kill -9`) or the polite one
//! (SIGTERM).
//!
//! ```ignore
//! let svc = ServiceProcess::start(&[("DATABASE_URL", &db.url)]).await;
//! let r = svc.api().post("/v1/actors", &json!({"kind": "ai", "display_name": "x"})).await;
//! svc.kill9();
//! ```

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::http::Api;

/// How long [`ServiceProcess::start`] waits for the listening line and readiness.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

static BINARY: OnceLock<PathBuf> = OnceLock::new();

/// Sets the service binary (integration tests pass
/// `env!("CARGO_BIN_EXE_pm-test-server")`). Without it, [`server_binary`] looks for it.
pub fn use_binary(path: impl Into<PathBuf>) {
    let _ = BINARY.set(path.into());
}

/// The service binary: the one set by [`use_binary`], else `$PM_TEST_SERVER_BIN`, else
/// `pm-test-server` next to (or one level above) this test executable — where cargo puts
/// it for integration tests (`target/<profile>/deps/…`) and examples
/// (`target/<profile>/examples/…`).
///
/// # Panics
/// When it cannot be found.
pub fn server_binary() -> PathBuf {
    if let Some(path) = BINARY.get() {
        return path.clone();
    }
    if let Ok(path) = std::env::var("PM_TEST_SERVER_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("current exe");
    let name = format!("pm-test-server{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(&name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "cannot find {name} near {}: build it (cargo build -p pm-tests --bin pm-test-server) \
                 or set PM_TEST_SERVER_BIN",
                exe.display()
            )
        })
}

/// Removes ANSI colour sequences (the service logs in colour only to a terminal; this
/// keeps logs of other builds readable too).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
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

/// The address of a `listening` log line, text (`… listening addr=127.0.0.1:4711 …`) or
/// JSON (`{"fields":{"message":"… listening","addr":"127.0.0.1:4711"},…}`).
fn listening_addr(line: &str) -> Option<SocketAddr> {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(line) {
        return json["fields"]["addr"].as_str()?.parse().ok();
    }
    let addr = line.split("addr=").nth(1)?.split_whitespace().next()?;
    addr.trim_matches('"').parse().ok()
}

/// Variables the service reads that a test's own environment must not leak into it.
const CLEARED: &[&str] = &[
    "DATABASE_URL",
    "PM_AUTH_TOKENS",
    "PM_BIND",
    "PM_FAILPOINT",
    "PM_MAX_BODY_BYTES",
    "PM_DB_POOL_SIZE",
    "PM_COMMAND_ATTEMPTS",
    "PM_LOG_POLL_MS",
    "PM_PROJECTION_LINGER_MS",
    "PM_MAX_CONNECTIONS",
    "PM_HEADER_READ_TIMEOUT_MS",
    "PM_IDLE_TIMEOUT_MS",
    "PM_LOG_FORMAT",
];

/// A running (or ended) service process.
pub struct ServiceProcess {
    child: Child,
    pid: u32,
    dir: PathBuf,
    log_path: PathBuf,
    addr: Option<SocketAddr>,
    api: Option<Api>,
    exit: Option<ExitStatus>,
}

impl std::fmt::Debug for ServiceProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProcess")
            .field("pid", &self.pid)
            .field("addr", &self.addr)
            .field("log", &self.log_path)
            .field("exit", &self.exit)
            .finish_non_exhaustive()
    }
}

impl ServiceProcess {
    /// Starts the service with `PM_BIND=127.0.0.1:0`, `RUST_LOG=info` (unless given) and
    /// `env`, and waits until it logs `listening addr=…` and `GET /readyz` answers `200`.
    ///
    /// # Panics
    /// When it does not get there within [`START_TIMEOUT`] (with the log's tail).
    pub async fn start(env: &[(&str, &str)]) -> Self {
        let mut svc = Self::spawn(&[], env);
        svc.wait_ready(START_TIMEOUT).await;
        svc
    }

    /// Spawns the binary with `args` (e.g. `["migrate"]`) and `env` without waiting for
    /// anything: for processes expected to exit (see [`ServiceProcess::wait_exit`]) or
    /// to be waited for with [`ServiceProcess::wait_listening`] /
    /// [`ServiceProcess::wait_ready`].
    ///
    /// # Panics
    /// When the binary cannot be spawned.
    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!("pm-proc-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let log_path = dir.join("service.log");
        let out = File::create(&log_path).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut cmd = Command::new(server_binary());
        cmd.args(args);
        for name in CLEARED {
            cmd.env_remove(name);
        }
        cmd.env("PM_BIND", "127.0.0.1:0").env("NO_COLOR", "1");
        if !env.iter().any(|(k, _)| *k == "RUST_LOG") {
            cmd.env("RUST_LOG", "info,sqlx::postgres::notice=warn");
        }
        for (name, value) in env {
            cmd.env(name, value);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("pm-test-server starts");
        Self {
            pid: child.id(),
            child,
            dir,
            log_path,
            addr: None,
            api: None,
            exit: None,
        }
    }

    /// Waits until the log has the `listening addr=…` line; returns the address.
    ///
    /// # Panics
    /// When the process exits first or `timeout` passes (with the log's tail).
    pub async fn wait_listening(&mut self, timeout: Duration) -> SocketAddr {
        if let Some(addr) = self.addr {
            return addr;
        }
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.log();
            let found = log
                .lines()
                .filter(|l| l.contains("listening"))
                .find_map(listening_addr);
            if let Some(addr) = found {
                self.addr = Some(addr);
                self.api = Some(Api::new(format!("http://{addr}")));
                return addr;
            }
            if let Some(status) = self.try_exit() {
                panic!(
                    "the service exited ({status}) before listening; log tail:\n{}",
                    self.log_tail(40)
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "the service did not log `listening addr=` within {timeout:?}; log tail:\n{}",
                    self.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the listening line, then until `GET /readyz` answers `200`.
    ///
    /// # Panics
    /// When that does not happen within `timeout` (with the log's tail).
    pub async fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        self.wait_listening(timeout).await;
        let api = self.api().clone().with_timeout(Duration::from_secs(2));
        loop {
            let last = match api.get("/readyz").await {
                Ok(r) if r.status == 200 => return,
                Ok(r) => format!("{} {}", r.status, r.text),
                Err(e) => e.to_string(),
            };
            if let Some(status) = self.try_exit() {
                panic!(
                    "the service exited ({status}) before it was ready; log tail:\n{}",
                    self.log_tail(40)
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "GET /readyz was not 200 within {timeout:?} (last: {last}); log tail:\n{}",
                    self.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `http://127.0.0.1:<port>`.
    ///
    /// # Panics
    /// Before the process listens.
    pub fn base(&self) -> &str {
        &self.api().base
    }

    /// The listening address.
    ///
    /// # Panics
    /// Before the process listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
            .expect("the service has not logged its address yet")
    }

    /// A client for this service (open mode: no token; add one with [`Api::with_token`]).
    ///
    /// # Panics
    /// Before the process listens.
    pub fn api(&self) -> &Api {
        self.api
            .as_ref()
            .expect("the service has not logged its address yet")
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The directory holding the log file (removed on drop unless `PM_TEST_KEEP_LOGS` is
    /// set).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Everything the process wrote to stdout and stderr so far, without colours.
    pub fn log(&self) -> String {
        let bytes = std::fs::read(&self.log_path).unwrap_or_default();
        strip_ansi(&String::from_utf8_lossy(&bytes))
    }

    /// The last `lines` lines of [`ServiceProcess::log`].
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The exit status, if the process has ended (does not wait).
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        self.try_exit().is_none()
    }

    /// `kill -9` (SIGKILL) and wait until the process is gone.
    pub fn kill9(&mut self) -> ExitStatus {
        if let Some(status) = self.try_exit() {
            return status;
        }
        let _ = self.child.kill();
        let status = self.child.wait().expect("wait for the killed service");
        self.exit = Some(status);
        status
    }

    /// Sends SIGTERM (`kill -TERM <pid>`) and waits up to `timeout` for the exit.
    ///
    /// # Panics
    /// When the process does not exit in time (it is then killed).
    pub async fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        if let Some(status) = self.try_exit() {
            return status;
        }
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .expect("kill -TERM");
        assert!(sent.success(), "kill -TERM {} failed", self.pid);
        match self.wait_exit(timeout).await {
            Some(status) => status,
            None => {
                self.kill9();
                panic!(
                    "the service did not exit within {timeout:?} of SIGTERM; log tail:\n{}",
                    self.log_tail(40)
                )
            }
        }
    }

    /// Waits up to `timeout` for the process to exit; `None` if it still runs.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Runs the binary with `args` and `env` to its end (blocking, at most `timeout`):
    /// e.g. `["migrate"]`. Returns the exit status and the output.
    ///
    /// # Panics
    /// When it does not end within `timeout`.
    pub fn run(args: &[&str], env: &[(&str, &str)], timeout: Duration) -> (ExitStatus, String) {
        let mut p = Self::spawn(args, env);
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = p.try_exit() {
                return (status, p.log());
            }
            if Instant::now() >= deadline {
                p.kill9();
                panic!(
                    "pm-test-server {args:?} did not end within {timeout:?}; log tail:\n{}",
                    p.log_tail(40)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let keep = std::env::var_os("PM_TEST_KEEP_LOGS").is_some();
        if std::thread::panicking() {
            let kept = if keep {
                format!("log kept in {}", self.log_path.display())
            } else {
                "set PM_TEST_KEEP_LOGS=1 to keep the whole log".to_string()
            };
            eprintln!(
                "service process {} ({kept}); log tail:\n{}",
                self.pid,
                self.log_tail(30)
            );
        }
        if !keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
