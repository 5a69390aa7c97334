//! The README's walkthrough, run as written: its marked shell blocks, in order, with
//! `bash` (`set -euo pipefail`) against a real service on a free port, on SQLite and on
//! PostgreSQL; and the Python example of docs/API.md's derived ids, run with `python3`.
//!
//! Marks (HTML comments, invisible on GitHub) on the line before a fenced block:
//! `<!-- walkthrough -->` runs on every backend, `<!-- walkthrough: sqlite -->` and
//! `<!-- walkthrough: postgres -->` on that backend only, `<!-- walkthrough: start … -->`
//! is the block that starts the service: never run (this test starts its own, with the
//! tokens the first block exports), only checked to say `cargo run --release`.
//!
//! Without `bash`, `curl` or `jq` (or the backend's `sqlite3` / `psql`) the test skips
//! with a loud message; under `CI=true` it fails instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pm_tests::{in_ci, TestDb, TestService};
use serde_json::Value;

/// The database URL the README's PostgreSQL blocks spell out; the test puts its own there.
const README_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/project_manager";

/// How long the whole walkthrough may take.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    All,
    Start,
    Sqlite,
    Postgres,
}

#[derive(Debug)]
struct Block {
    mark: Mark,
    text: String,
}

fn repo_file(path: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()))
}

/// The marked fenced blocks of a Markdown text, in order.
fn marked_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        let Some(mark) = line
            .trim()
            .strip_prefix("<!-- walkthrough")
            .and_then(|rest| rest.strip_suffix("-->"))
        else {
            continue;
        };
        let mark = match mark.trim().trim_start_matches(':').trim() {
            "" => Mark::All,
            "sqlite" => Mark::Sqlite,
            "postgres" => Mark::Postgres,
            other if other.starts_with("start") => Mark::Start,
            other => panic!("README: unknown walkthrough mark {other:?}"),
        };
        let fence = lines.next().unwrap_or_default();
        assert_eq!(
            fence.trim(),
            "```sh",
            "README: a walkthrough mark must be followed by a ```sh block"
        );
        let text: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        blocks.push(Block {
            mark,
            text: text.join("\n"),
        });
    }
    blocks
}

/// Whether `program` runs (`program --version`).
fn available(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `false` (after a loud message) when a tool is missing outside CI.
///
/// # Panics
/// Under `CI=true` when a tool is missing.
fn tools_present(tools: &[&str], what: &str) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !available(t)).collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        !in_ci(),
        "{what} needs {missing:?}, which is not installed (CI=true)"
    );
    eprintln!("\n!!!!! SKIPPING {what}: {missing:?} not installed !!!!!\n");
    false
}

/// Runs `script` with `bash` in `dir`, with `env`, killed after `timeout`: (success,
/// stdout, stderr).
fn run_bash(
    script: &str,
    dir: &Path,
    env: &[(&str, &str)],
    timeout: Duration,
) -> (bool, String, String) {
    let script_path = dir.join("walkthrough.sh");
    std::fs::write(&script_path, script).expect("write script");
    let mut command = Command::new("bash");
    command
        .arg(&script_path)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in ["PM_URL", "PM_AUTH_TOKENS", "DATABASE_URL", "PM_BIND"] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("spawn bash");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for bash") {
            break Some(status);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("bash output");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if status.is_none() {
        stderr.push_str(&format!("\n(killed after {timeout:?})"));
    }
    (status.is_some_and(|s| s.success()), stdout, stderr)
}

/// The README's walkthrough on `db` (`sqlite` or `postgres`).
async fn walkthrough(db: TestDb, dir: PathBuf) {
    let readme = repo_file("README.md");
    let blocks = marked_blocks(&readme);
    let start: Vec<&Block> = blocks.iter().filter(|b| b.mark == Mark::Start).collect();
    assert_eq!(
        start.len(),
        1,
        "README: one walkthrough block starts the service"
    );
    assert!(
        start[0].text.contains("cargo run --release"),
        "README: the start block runs `cargo run --release`"
    );
    let first = blocks.first().expect("README has walkthrough blocks");
    assert_eq!(
        first.mark,
        Mark::All,
        "README: the walkthrough opens with its setup"
    );

    // The tokens the README's own setup exports: the service gets exactly those.
    let (ok, tokens, stderr) = run_bash(
        &format!(
            "set -euo pipefail\n{}\nprintf '%s' \"$PM_AUTH_TOKENS\"\n",
            first.text
        ),
        &dir,
        &[],
        Duration::from_secs(10),
    );
    assert!(ok && !tokens.is_empty(), "the setup block: {stderr}");

    let backend = if db.kind == "postgres" {
        Mark::Postgres
    } else {
        Mark::Sqlite
    };
    let mut config = project_manager::Config::defaults();
    config.bind = "127.0.0.1:0".parse().expect("addr");
    config.database_url = Some(if backend == Mark::Sqlite {
        // Where the README's `sqlite3 data/project-manager.db` finds it (bash runs in `dir`).
        std::fs::create_dir_all(dir.join("data")).expect("data dir");
        format!("sqlite://{}", dir.join("data/project-manager.db").display())
    } else {
        db.url.clone()
    });
    config.auth_tokens = tokens;
    config.db_pool_size = 8;
    config.log_poll_ms = 50;
    let svc = TestService::start_with(config).await;

    let mut script = String::from("set -euo pipefail\n");
    let mut ran = 0;
    for (i, block) in blocks.iter().enumerate() {
        let text = match block.mark {
            Mark::All => block.text.clone(),
            Mark::Sqlite | Mark::Postgres if block.mark == backend => {
                if backend == Mark::Postgres {
                    assert!(
                        block.text.contains(README_PG_URL),
                        "README: the psql block names {README_PG_URL}"
                    );
                }
                block.text.replace(README_PG_URL, &db.url)
            }
            _ => continue,
        };
        script.push_str(&format!("echo '@@block {i}'\n{text}\n"));
        ran += 1;
    }
    script.push_str("echo \"@@ids $CONV $TASK\"\n");
    let base = svc.base.clone();
    let dir_for_bash = dir.clone();
    let (ok, stdout, stderr) = tokio::task::spawn_blocking(move || {
        run_bash(&script, &dir_for_bash, &[("PM_URL", &base)], SCRIPT_TIMEOUT)
    })
    .await
    .expect("bash thread");
    assert!(
        ok,
        "the README walkthrough failed on {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        db.kind
    );
    assert!(ran >= 6, "README: only {ran} walkthrough blocks ran");

    let ids = stdout
        .lines()
        .find_map(|l| l.strip_prefix("@@ids "))
        .expect("ids line");
    let (conv, task) = ids.split_once(' ').expect("two ids");
    assert!(
        uuid::Uuid::parse_str(conv).is_ok(),
        "CONV is an id: {conv:?}"
    );
    assert!(
        uuid::Uuid::parse_str(task).is_ok(),
        "TASK is an id: {task:?}"
    );
    // The derived ids the README quotes are the ones the walkthrough got.
    let derived = pm_client::ids::conversation_id("github", "org/repo#42").to_string();
    assert_eq!(conv, derived, "CONV is derived from github + org/repo#42");
    for id in [
        derived,
        pm_client::ids::actor_id("github:alice").to_string(),
    ] {
        assert!(readme.contains(&id), "README quotes the derived id {id}");
        assert!(stdout.contains(&id), "the walkthrough printed {id}");
    }

    // The analysts' block: the walkthrough's own task, conversation and message.
    let analysts = blocks
        .iter()
        .position(|b| b.text.contains("latest_checkpoint_type=BEGIN_WORK"))
        .expect("README: the analysts' block");
    let out = block_output(&stdout, analysts);
    let lines: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        lines
            .iter()
            .any(|v| v["id"] == task && v["status"] == "WORK_STARTED"),
        "the WORK_STARTED task is listed:\n{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains(conv) && l.contains("BEGIN_WORK")),
        "the conversation whose latest checkpoint is BEGIN_WORK is listed:\n{out}"
    );
    assert!(
        lines
            .iter()
            .any(|v| v["task_id"] == task && v["id"] != task),
        "a message with the task's task_id is listed:\n{out}"
    );

    // The SQL block shows the same data.
    let sql = blocks
        .iter()
        .position(|b| b.mark == backend)
        .expect("README: an SQL block for this backend");
    let out = block_output(&stdout, sql);
    let expected = if backend == Mark::Sqlite {
        "Fix the login bug"
    } else {
        "WORK_STARTED"
    };
    assert!(
        out.contains(expected),
        "the SQL block shows {expected}:\n{out}"
    );

    svc.stop().await;
    drop(db);
}

/// What block `index` printed.
fn block_output(stdout: &str, index: usize) -> String {
    let marker = format!("@@block {index}");
    stdout
        .lines()
        .skip_while(|l| *l != marker)
        .skip(1)
        .take_while(|l| !l.starts_with("@@"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pm-readme-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_walkthrough_runs_on_sqlite() {
    if !tools_present(
        &["bash", "curl", "jq", "sqlite3"],
        "the README walkthrough (SQLite)",
    ) {
        return;
    }
    let dir = temp_dir();
    let db = TestDb::sqlite().await.expect("sqlite");
    walkthrough(db, dir.clone()).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_walkthrough_runs_on_postgres() {
    if !tools_present(
        &["bash", "curl", "jq", "psql"],
        "the README walkthrough (PostgreSQL)",
    ) {
        return;
    }
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let dir = temp_dir();
    walkthrough(db, dir.clone()).await;
    let _ = std::fs::remove_dir_all(dir);
}

/// docs/API.md's Python example of the derived ids prints what the service derives, and
/// what the page says it prints.
#[test]
fn api_md_python_ids_example_matches_the_service() {
    let api = repo_file("docs/API.md");
    let python = fenced_after(&api, "```python").expect("docs/API.md: a ```python block");
    let printed = fenced_after(&api, "```text").expect("docs/API.md: its output block");
    let conversation = pm_client::ids::conversation_id("github", "org/repo#42");
    let expected = format!(
        "{conversation}\n{}\n{}",
        pm_client::ids::message_id(conversation, "github-comment-990"),
        pm_client::ids::actor_id("github:alice"),
    );
    assert_eq!(printed.trim(), expected, "docs/API.md's printed ids");
    if !tools_present(&["python3"], "the Python ids example") {
        return;
    }
    let output = Command::new("python3")
        .arg("-c")
        .arg(&python)
        .output()
        .expect("run python3");
    assert!(
        output.status.success(),
        "python3: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), expected);
}

/// The first fenced block opened by `fence` after the "Derived ids" heading.
fn fenced_after(markdown: &str, fence: &str) -> Option<String> {
    let section = &markdown[markdown.find("## Derived ids")?..];
    let start = section.find(&format!("{fence}\n"))? + fence.len() + 1;
    let end = section[start..].find("```")?;
    Some(section[start..start + end].to_string())
}
