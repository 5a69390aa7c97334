//! The operator console in a real browser, on both stores: the service runs here and
//! `tests/browser/console.mjs` (Playwright driving Debian's headless Chromium) works it
//! as an operator would. `tests/browser/setup.sh` installs Chromium and playwright-core
//! when missing; when that is impossible the test is skipped loudly locally and fails
//! under `CI=true`. Screenshots land in `target/console-screenshots/<store>/`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use pm_tests::{
    all_tokens, in_ci, on_both_backends, TestDb, TestService, ADMIN, ANALYST, INGRESS, LLM,
};
use project_manager::Config;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Runs the setup once per process; `Err` says why the browser cannot run.
fn browser_ready() -> Result<(), String> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            let script = workspace().join("tests/browser/setup.sh");
            let out = Command::new("bash")
                .arg(&script)
                .output()
                .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{} failed: {}",
                    script.display(),
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        })
        .clone()
}

/// The service on `db` at `port` (fixed, so a restart keeps the page's address).
async fn serve(db: &TestDb, port: u16) -> TestService {
    let mut config = Config::defaults();
    config.bind = SocketAddr::from(([127, 0, 0, 1], port));
    config.database_url = Some(db.url.clone());
    config.auth_tokens = all_tokens();
    config.db_pool_size = 8;
    config.log_poll_ms = 50;
    config.tool_default_action = pm_tests::WORKER_DECIDES;
    TestService::start_with(config).await
}

async fn the_console_works_in_a_browser(db: TestDb) {
    if let Err(why) = browser_ready() {
        assert!(!in_ci(), "the browser tests cannot run under CI: {why}");
        eprintln!("SKIPPED: the console's browser test: {why}");
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut svc = Some(serve(&db, port).await);
    let store = if db.url.starts_with("sqlite") {
        "sqlite"
    } else {
        "postgres"
    };
    let shots = workspace().join("target/console-screenshots").join(store);
    let mut node = Command::new("node")
        .arg(workspace().join("tests/browser/console.mjs"))
        .env("PM_URL", format!("http://127.0.0.1:{port}"))
        .env("PM_ADMIN", ADMIN)
        .env("PM_ANALYST", ANALYST)
        .env("PM_INGRESS", INGRESS)
        .env("PM_LLM", LLM)
        .env("SCREENSHOTS", &shots)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let mut stdin = node.stdin.take().expect("stdin");
    let (lines, mut received) = tokio::sync::mpsc::unbounded_channel();
    let stdout = node.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let stderr = node.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = BufReader::new(stderr).read_to_string(&mut text);
        text
    });
    // The script's steps, and its requests to stop and start the service.
    let mut log = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    while let Ok(Some(line)) = tokio::time::timeout_at(deadline, received.recv()).await {
        match line.as_str() {
            "@stop" => {
                if let Some(running) = svc.take() {
                    running.stop().await;
                }
            }
            "@start" => svc = Some(serve(&db, port).await),
            _ => {
                log.push_str(&line);
                log.push('\n');
                continue;
            }
        }
        writeln!(stdin, "ok").expect("the script reads");
    }
    let _ = node.kill();
    let status = node.wait().expect("node ends");
    let errors = errors.join().unwrap_or_default();
    eprintln!("{log}");
    assert!(
        status.success(),
        "the browser test failed:\n{log}\n{errors}"
    );
    if let Some(running) = svc {
        running.stop().await;
    }
}

on_both_backends!(the_console_works_in_a_browser);
