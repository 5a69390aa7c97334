//! A short `pm-bench` run against the real service on a fresh PostgreSQL database: every
//! figure of the report is there and plausible (the full runs are in `bench/run.sh`, not
//! timed tests).

use std::process::Command;

use pm_tests::{TestDb, TestService, ADMIN};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_mixed_run_reports_every_figure() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let svc = TestService::start(&db, &pm_tests::all_tokens()).await;
    let (base, url) = (svc.base.clone(), db.url.clone());
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_pm-bench"))
            .args(["--url", &base, "--database-url", &url, "--mix", "mixed"])
            .args([
                "--concurrency",
                "4",
                "--duration",
                "2s",
                "--subscribers",
                "2",
                "--json",
            ])
            .env("PM_BENCH_TOKEN", ADMIN)
            .output()
    })
    .await
    .expect("joined")
    .expect("pm-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "pm-bench failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
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
    svc.stop().await;
}
