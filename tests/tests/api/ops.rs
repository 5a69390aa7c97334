//! Operations endpoints: liveness, readiness, Prometheus metrics, the OpenAPI document.

use pm_tests::{on_both_backends, TestDb, TestService};

use crate::support::world;

async fn health_and_readiness_answer_200(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    for path in ["/healthz", "/readyz"] {
        let r = svc.get(None, path).await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.text);
    }
    svc.stop().await;
}

async fn metrics_count_requests_and_facts(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    world(&svc).await;
    let r = svc.get(None, "/metrics").await;
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .is_some_and(|c| c.starts_with("text/plain")));
    for metric in ["http_requests_total", "pm_facts_appended_total"] {
        assert!(
            r.text.lines().any(|l| l.starts_with(metric)),
            "no {metric} in {}",
            r.text
        );
    }
    assert!(r
        .text
        .lines()
        .any(|l| l.starts_with("pm_facts_appended_total")
            && l.contains("project_manager.task.created")));
    svc.stop().await;
}

async fn openapi_describes_every_command_and_the_event_log(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let r = svc.get(None, "/openapi.json").await;
    assert_eq!(r.status, 200);
    let version = r.json["openapi"].as_str().expect("openapi version");
    assert!(version.starts_with("3.1"), "openapi {version}");
    let paths = &r.json["paths"];
    for path in [
        "/v1/actors",
        "/v1/conversations",
        "/v1/conversations/{id}/checkpoints",
        "/v1/conversations/{id}/tasks",
        "/v1/conversations/{id}/messages",
        "/v1/tasks/{id}/checkpoints",
    ] {
        assert!(paths[path]["post"].is_object(), "no POST {path} in {paths}");
    }
    for path in ["/v1/events", "/healthz", "/readyz", "/metrics"] {
        assert!(paths[path]["get"].is_object(), "no GET {path} in {paths}");
    }
    svc.stop().await;
}

on_both_backends!(
    health_and_readiness_answer_200,
    metrics_count_requests_and_facts,
    openapi_describes_every_command_and_the_event_log,
);
