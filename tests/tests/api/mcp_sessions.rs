//! MCP sessions are bounded per principal and end when idle (TRUST.md "The boundary"): a
//! principal's `initialize` beyond `PM_MCP_SESSIONS_PER_PRINCIPAL` is `429
//! too_many_requests` with `Retry-After`, another principal is unaffected, and a session
//! ended — deleted, or idle for `PM_MCP_SESSION_IDLE_SECS` — gives its place back.

use std::time::Duration;

use pm_tests::{all_tokens, on_both_backends, TestDb, TestService, ADMIN, LLM};
use serde_json::json;

use crate::support::config;

/// `initialize` over plain HTTP: (status, the new session's id, `Retry-After`, the
/// problem's code when refused).
async fn initialize(
    svc: &TestService,
    token: &str,
) -> (u16, Option<String>, Option<String>, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "sessions-test", "version": "1"}}});
    let r = svc
        .client
        .post(format!("{}/mcp", svc.base))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .expect("sent");
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (status, id, retry) = (
        r.status().as_u16(),
        header("mcp-session-id"),
        header("retry-after"),
    );
    let code = if status == 429 {
        let problem: serde_json::Value = r.json().await.unwrap_or_default();
        problem["code"].as_str().unwrap_or_default().to_string()
    } else {
        String::new()
    };
    (status, id, retry, code)
}

async fn end(svc: &TestService, token: &str, session: &str) {
    let r = svc
        .client
        .delete(format!("{}/mcp", svc.base))
        .bearer_auth(token)
        .header("mcp-session-id", session)
        .send()
        .await
        .expect("sent");
    assert!(r.status().is_success(), "DELETE /mcp: {}", r.status());
}

async fn sessions_per_principal_are_bounded_and_end_when_idle(db: TestDb) {
    let mut config = config(&db);
    config.auth_tokens = all_tokens();
    config.mcp_sessions_per_principal = 2;
    config.mcp_session_idle_secs = 2;
    let svc = TestService::start_with(config).await;

    let (s1, first, _, _) = initialize(&svc, LLM).await;
    let (s2, _, _, _) = initialize(&svc, LLM).await;
    assert_eq!((s1, s2), (200, 200));
    let first = first.expect("a session id");
    let (status, id, retry, code) = initialize(&svc, LLM).await;
    assert_eq!((status, code.as_str()), (429, "too_many_requests"));
    assert!(id.is_none(), "no session was opened");
    assert!(retry.is_some(), "Retry-After");
    // The limit is visible in /metrics when it refuses.
    let metrics = svc.get(None, "/metrics").await.text;
    let refused = metrics
        .lines()
        .find(|l| l.starts_with("pm_http_refused_total{reason=\"mcp_sessions\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok());
    assert!(refused.is_some_and(|n| n >= 1.0), "{metrics}");
    // Another principal is not affected.
    let (other, _, _, _) = initialize(&svc, ADMIN).await;
    assert_eq!(other, 200);

    // A session ended gives its place back.
    end(&svc, LLM, &first).await;
    let (again, _, _, _) = initialize(&svc, LLM).await;
    assert_eq!(again, 200, "a deleted session's place");
    assert_eq!(initialize(&svc, LLM).await.0, 429);

    // Idle sessions end on their own.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(initialize(&svc, LLM).await.0, 200, "idle sessions ended");
    assert_eq!(initialize(&svc, LLM).await.0, 200);
    svc.stop().await;
}

on_both_backends!(sessions_per_principal_are_bounded_and_end_when_idle);
