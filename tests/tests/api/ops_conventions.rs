//! Operators' conventions, checked on the binary itself: every metric README.md lists is on
//! `/metrics` right after the start with `# HELP` and `# TYPE`; logs carry no colour codes
//! off a terminal; `PM_LOG_FORMAT=json` writes one JSON object per line, a request's lines
//! carrying its correlation id; a bad `PM_LOG_FORMAT` stops the start; `--version`.

use std::time::{Duration, Instant};

use pm_tests::process::ServiceProcess;
use pm_tests::TestDb;
use serde_json::Value;

/// README.md, whose `GET /metrics` item names the metrics.
const README: &str = include_str!("../../../README.md");

/// Spawns the service binary on a fresh SQLite database and waits until it is ready.
async fn start(db: &TestDb, env: &[(&str, &str)]) -> ServiceProcess {
    pm_tests::process::use_binary(env!("CARGO_BIN_EXE_pm-test-server"));
    let mut all = vec![("DATABASE_URL", db.url.as_str())];
    all.extend_from_slice(env);
    ServiceProcess::start(&all).await
}

/// Runs the binary with `args` and `env` to its end.
fn run(args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    pm_tests::process::use_binary(env!("CARGO_BIN_EXE_pm-test-server"));
    ServiceProcess::run(args, env, Duration::from_secs(30))
}

/// The metric names README.md's `GET /metrics` item lists.
fn readme_metrics() -> Vec<&'static str> {
    let start = README
        .find("- `GET /metrics`")
        .expect("README.md has a `GET /metrics` item");
    let item = &README[start + 2..];
    let end = item.find("\n- ").unwrap_or(item.len());
    item[..end]
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.starts_with("pm_") || w.starts_with("http_"))
        .filter(|w| w.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .collect()
}

/// The raw bytes the process wrote (stdout and stderr), colour codes and all.
fn raw_log(svc: &ServiceProcess) -> Vec<u8> {
    std::fs::read(svc.dir().join("service.log")).expect("the service's log file")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_lists_every_readme_metric_with_help_and_type_right_after_start() {
    let Some(db) = TestDb::sqlite().await else {
        return;
    };
    let names = readme_metrics();
    assert!(names.len() >= 15, "README lists too few metrics: {names:?}");
    let mut svc = start(&db, &[]).await;
    let r = svc.api().must_get("/metrics").await;
    let text = &r.text;
    for name in &names {
        for kind in ["HELP", "TYPE"] {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("# {kind} {name} "))),
                "no `# {kind} {name}` in /metrics:\n{text}"
            );
        }
        assert!(
            text.lines()
                .any(|l| !l.starts_with('#') && l.starts_with(name)),
            "no sample of {name} in /metrics:\n{text}"
        );
    }
    // Zeros, not gaps, for the label values known at start.
    for line in [
        r#"pm_facts_appended_total{type="project_manager.task.created"} 0"#,
        r#"pm_command_conflicts_total{aggregate="task"} 0"#,
        r#"pm_processor_parked_total{processor="read_model"} 0"#,
        r#"pm_processor_parked_total{processor="sagas"} 0"#,
        "pm_http_connections_rejected_total 0",
        "pm_saga_deadlines_fired_total 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no `{line}` in /metrics:\n{text}"
        );
    }
    svc.kill9();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_have_no_colour_codes_off_a_terminal() {
    let Some(db) = TestDb::sqlite().await else {
        return;
    };
    // The harness sets NO_COLOR; unset it, so only "stderr is not a terminal" is tested.
    let mut svc = start(&db, &[("NO_COLOR", "")]).await;
    svc.api().must_get("/healthz").await;
    svc.terminate(Duration::from_secs(10)).await;
    let log = raw_log(&svc);
    assert!(!log.is_empty(), "the service logged nothing");
    assert!(
        !log.contains(&0x1b),
        "ESC in the log:\n{}",
        String::from_utf8_lossy(&log)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_json_lines_carrying_the_correlation_id() {
    let Some(db) = TestDb::sqlite().await else {
        return;
    };
    let mut svc = start(&db, &[("PM_LOG_FORMAT", "json"), ("NO_COLOR", "")]).await;
    let id = format!("ops-conventions-{}", uuid::Uuid::new_v4());
    let r = svc
        .api()
        .get_with(
            "/v1/events",
            &[
                ("x-correlation-id", id.as_str()),
                (
                    "traceparent",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                ),
            ],
        )
        .await
        .expect("GET /v1/events");
    assert_eq!(r.status, 200, "{}", r.text);
    // The request's line is written as the answer leaves; give the pipe a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&raw_log(&svc)).contains(&id) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    svc.terminate(Duration::from_secs(10)).await;
    let log = raw_log(&svc);
    assert!(!log.contains(&0x1b), "ESC in the JSON log");
    let text = String::from_utf8(log).expect("the log is UTF-8");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| panic!("not a JSON object line: {l:?}\nlog:\n{text}"))
        })
        .collect();
    assert!(lines.len() >= 2, "too few log lines:\n{text}");
    let carries = |line: &Value| {
        let spans = line["spans"].as_array().cloned().unwrap_or_default();
        spans
            .iter()
            .chain(std::iter::once(&line["span"]))
            .any(|s| s["correlation_id"] == id.as_str())
    };
    let request_lines: Vec<&Value> = lines.iter().filter(|l| carries(l)).collect();
    assert!(
        !request_lines.is_empty(),
        "no line carries the correlation id {id}:\n{text}"
    );
    assert!(
        request_lines
            .iter()
            .any(|l| l["fields"]["status"] == 200 || l["fields"]["status"] == "200"),
        "the request's response line carries its status:\n{text}"
    );
    assert!(
        request_lines.iter().all(|l| {
            let spans = l["spans"].as_array().cloned().unwrap_or_default();
            spans
                .iter()
                .chain(std::iter::once(&l["span"]))
                .any(|s| s["trace_id"] == "0af7651916cd43dd8448eb211c80319c")
        }),
        "the request's lines carry the W3C trace id it continues:\n{text}"
    );
}

#[test]
fn an_unknown_log_format_stops_the_start_naming_the_setting() {
    let (status, out) = run(&[], &[("PM_LOG_FORMAT", "xml")]);
    assert!(!status.success(), "started with PM_LOG_FORMAT=xml:\n{out}");
    for needle in ["xml", "log-format", "text", "json"] {
        assert!(out.contains(needle), "no {needle:?} in:\n{out}");
    }
}

#[test]
fn version_prints_the_name_and_version() {
    for flag in ["--version", "-V"] {
        let (status, out) = run(&[flag], &[]);
        assert!(status.success(), "{flag}: {status}\n{out}");
        assert_eq!(
            out.trim_end(),
            format!("project-manager {}", env!("CARGO_PKG_VERSION")),
            "{flag}"
        );
    }
}
