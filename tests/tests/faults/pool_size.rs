//! Defect 9: a pool larger than the server's `max_connections` is warned about at start
//! (and the service keeps serving); the default pool is not.

use std::time::Duration;

use pm_tests::process::ServiceProcess;
use pm_tests::TestDb;
use serde_json::json;

use crate::support::{serial, start};

/// The log lines that warn about `max_connections`.
fn max_connections_warnings(svc: &ServiceProcess) -> Vec<String> {
    svc.log()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("max_connections"))
        .map(str::to_string)
        .collect()
}

async fn serves(svc: &ServiceProcess) {
    let body = json!({"kind": "ai", "display_name": "Pool"});
    svc.api().create("/v1/actors", &body).await;
    let r = svc.api().must_get("/readyz").await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_larger_than_max_connections_is_warned_about() {
    let _serial = serial().await;
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let mut svc = start(&[
        ("DATABASE_URL", db.url.as_str()),
        ("PM_DB_POOL_SIZE", "200"),
    ])
    .await;
    serves(&svc).await;
    let warnings = max_connections_warnings(&svc);
    svc.terminate(Duration::from_secs(10)).await;
    assert!(
        !warnings.is_empty(),
        "PM_DB_POOL_SIZE=200 with max_connections=100: no WARN line mentions max_connections; log:\n{}",
        svc.log_tail(20)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_pool_logs_no_max_connections_warning() {
    let _serial = serial().await;
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let mut svc = start(&[("DATABASE_URL", db.url.as_str())]).await;
    serves(&svc).await;
    let warnings = max_connections_warnings(&svc);
    svc.terminate(Duration::from_secs(10)).await;
    assert!(warnings.is_empty(), "unexpected warnings: {warnings:#?}");
}
