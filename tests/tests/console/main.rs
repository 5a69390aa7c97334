//! The operator console in a real browser, on both stores: the service runs here and
//! `tests/browser/console.mjs` (Playwright driving Debian's headless Chromium) works it
//! as an operator would. `tests/browser/setup.sh` installs Chromium and playwright-core
//! when missing; when that is impossible the test is skipped loudly locally and fails
//! under `CI=true`. Screenshots land in `target/console-screenshots/<store>/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pm_tests::{
    all_tokens, in_ci, on_both_backends, TestDb, TestService, ADMIN, ANALYST, INGRESS, LLM,
};

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

async fn the_console_works_in_a_browser(db: TestDb) {
    if let Err(why) = browser_ready() {
        assert!(!in_ci(), "the browser tests cannot run under CI: {why}");
        eprintln!("SKIPPED: the console's browser test: {why}");
        return;
    }
    let svc = TestService::start(&db, &all_tokens()).await;
    let store = if db.url.starts_with("sqlite") {
        "sqlite"
    } else {
        "postgres"
    };
    let shots = workspace().join("target/console-screenshots").join(store);
    let base = svc.base.clone();
    let script = workspace().join("tests/browser/console.mjs");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(&script)
            .env("PM_URL", base)
            .env("PM_ADMIN", ADMIN)
            .env("PM_ANALYST", ANALYST)
            .env("PM_INGRESS", INGRESS)
            .env("PM_LLM", LLM)
            .env("SCREENSHOTS", &shots)
            .output()
    })
    .await
    .expect("joined")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
    svc.stop().await;
}

on_both_backends!(the_console_works_in_a_browser);
