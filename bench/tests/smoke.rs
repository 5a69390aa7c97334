//! Short `pm-bench` runs against the real service on a fresh PostgreSQL database: every
//! figure of the report is there and plausible (the full runs are in `bench/run.sh`, not
//! timed tests).

use std::process::{Command, Output};

use pm_tests::{TestDb, TestService, ADMIN};
use serde_json::Value;

/// `pm-bench --url <the service> --database-url <its database> <args> --json`.
async fn bench(svc: &TestService, db: &TestDb, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pm-bench"));
    command
        .args(["--url", &svc.base, "--database-url", &db.url])
        .args(args)
        .arg("--json")
        .env("PM_BENCH_TOKEN", ADMIN);
    tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .expect("pm-bench runs")
}

/// A `pm-bench` run (`args`) against a service started for it on a fresh database, which
/// must succeed: its stdout and stderr. `None` when PostgreSQL is not reachable (outside CI).
async fn successful_run(args: &[&str]) -> Option<(Vec<u8>, String)> {
    let db = TestDb::postgres().await?;
    let svc = TestService::start(&db, &pm_tests::all_tokens()).await;
    let output = bench(&svc, &db, args).await;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "pm-bench failed: {stderr}");
    svc.stop().await;
    Some((output.stdout, stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_mixed_run_reports_every_figure() {
    let Some((stdout, stderr)) = successful_run(&[
        "--mix",
        "mixed",
        "--concurrency",
        "4",
        "--duration",
        "2s",
        "--subscribers",
        "2",
    ])
    .await
    else {
        return;
    };
    let report: Value = serde_json::from_slice(&stdout).expect("one JSON object");
    let positive = |key: &str| {
        let v = report.pointer(key).and_then(Value::as_f64).unwrap_or(0.0);
        assert!(v > 0.0, "{key} = {v} in {report}");
    };
    for key in [
        "/commands_per_s",
        "/queries_per_s",
        "/raw_inserts_per_s",
        "/ratio",
        "/latency_ms/p50",
        "/latency_ms/p99",
        "/projection_lag_ms/count",
        "/saga_lag_ms/count",
        "/sse_delivery_ms/count",
        "/service/peak_rss_mib",
    ] {
        positive(key);
    }
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    assert!(stderr.contains("requests"), "a progress line: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_workers_run_reads_its_cycles_against_the_raw_queue() {
    let Some((stdout, stderr)) =
        successful_run(&["--mix", "workers", "--concurrency", "4", "--duration", "2s"]).await
    else {
        return;
    };
    let reports: Vec<Value> = String::from_utf8_lossy(&stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object a line"))
        .collect();
    let phases: Vec<_> = reports.iter().map(|r| &r["workers"]["phase"]).collect();
    assert_eq!(phases, ["peak", "half-peak"], "{reports:?}");
    let figure = |report: &Value, key: &str| {
        report
            .pointer(key)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("no {key} in {report}"))
    };
    let anchor = figure(&reports[0], "/workers/raw_queue_cycles_per_s");
    assert!(anchor > 0.0, "{}", reports[0]);
    for report in &reports {
        assert!(figure(report, "/raw_inserts_per_s") > 0.0, "{report}");
        assert_eq!(
            figure(report, "/workers/raw_queue_cycles_per_s"),
            anchor,
            "one anchor, measured once: {reports:?}"
        );
        let cycles = figure(report, "/workers/cycles_per_s");
        let ratio = figure(report, "/workers/queue_ratio");
        // The ratio is of the unrounded anchor, to 0.001.
        assert!(
            (ratio - cycles / anchor).abs() <= 0.001,
            "queue_ratio {ratio} against {cycles} / {anchor} in {report}"
        );
    }
    assert!(figure(&reports[0], "/workers/cycles_per_s") > 0.0);
    assert!(stderr.contains("raw queue baseline"), "{stderr}");
}
