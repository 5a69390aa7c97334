//! MCP sessions, bounded per principal and ended when idle (TRUST.md "The boundary"): a
//! session holds a worker task and its channels until it ends, so one token must not open
//! them without end. The SDK's session manager ends a session after
//! `PM_MCP_SESSION_IDLE_SECS` without a request (or on `DELETE /mcp`); this gate counts
//! the sessions each principal opened and answers one `initialize` too many `429
//! too_many_requests` — other principals unaffected.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;

use crate::auth::Caller;
use crate::per_principal::{PerPrincipal, Slot};

/// The header naming a request's session (and, on `initialize`'s answer, the new one).
const SESSION_HEADER: &str = "mcp-session-id";

/// The sessions of one `/mcp` service, and whose each is.
#[derive(Debug)]
pub struct McpSessions {
    manager: Arc<LocalSessionManager>,
    limit: Arc<PerPrincipal>,
    /// Per principal, the sessions it opened, each with the slot it holds.
    held: Mutex<HashMap<String, Vec<(String, Slot)>>>,
}

impl McpSessions {
    /// Sessions of `manager`, at most `per_principal` per principal, each ending after
    /// `idle` without a request.
    pub fn new(per_principal: usize, idle: std::time::Duration) -> Arc<Self> {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(idle);
        Arc::new(Self {
            manager: Arc::new(manager),
            limit: PerPrincipal::new(
                "MCP sessions",
                crate::metrics::refusal::MCP_SESSIONS,
                per_principal,
            ),
            held: Mutex::new(HashMap::new()),
        })
    }

    /// The SDK's session manager, for the `/mcp` service.
    pub fn manager(&self) -> Arc<LocalSessionManager> {
        self.manager.clone()
    }

    /// Lets go of the slots of `principal`'s sessions that have ended (idle, deleted, their
    /// worker gone): the work is that principal's own few sessions, not everyone's.
    async fn prune(&self, principal: &str) {
        let ids: Vec<String> = {
            let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            held.get(principal)
                .map(|s| s.iter().map(|(id, _)| id.clone()).collect())
                .unwrap_or_default()
        };
        let mut ended = Vec::new();
        for id in ids {
            let live = self
                .manager
                .has_session(&Arc::from(id.as_str()))
                .await
                .unwrap_or(false);
            if !live {
                ended.push(id);
            }
        }
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sessions) = held.get_mut(principal) {
            sessions.retain(|(id, _)| !ended.contains(id));
            if sessions.is_empty() {
                held.remove(principal);
            }
        }
    }
}

/// The middleware in front of `/mcp` (behind the guard, which put the [`Caller`] in the
/// request): a request that opens a session (a `POST` without `Mcp-Session-Id`) takes one
/// of its principal's slots, kept while the session it opened lives.
pub async fn gate(State(sessions): State<Arc<McpSessions>>, req: Request, next: Next) -> Response {
    let opens = req.method() == Method::POST && !req.headers().contains_key(SESSION_HEADER);
    let principal = req
        .extensions()
        .get::<Caller>()
        .map(|c| c.principal().name().to_string());
    let (true, Some(principal)) = (opens, principal) else {
        return next.run(req).await;
    };
    sessions.prune(&principal).await;
    let slot = match sessions.limit.take(&principal) {
        Ok(slot) => slot,
        Err(refused) => return refused.into_response(),
    };
    let response = next.run(req).await;
    let opened = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(id) = opened {
        let mut held = sessions.held.lock().unwrap_or_else(|p| p.into_inner());
        held.entry(principal).or_default().push((id, slot));
    }
    response
}
