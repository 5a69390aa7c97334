//! Crash hooks for black-box fault tests, compiled only with the `failpoints` feature
//! (the test suites enable it): with `PM_FAILPOINT=<name>` the process aborts (as
//! `kill -9` would end it: no unwinding, no answer, no graceful shutdown) when a command
//! reaches the point of that name. Unset, every hook is a no-op.
//!
//! The hooks are a layer around each command's handler, inside its `Idempotency-Key`
//! middleware ([`layer`]), so no handler calls them:
//!
//! | name | where |
//! |---|---|
//! | `abort_before_append` | a command passed its guard and its `Idempotency-Key` middleware, but nothing was appended |
//! | `abort_after_append` | a command's handler answered `2xx` (its fact is durable) but the answer was not sent |
//! | `abort_after_claim` | `POST /v1/turns/claim` committed a claim (the worker's lease is durable) but the answer was not sent — called by that handler, the one exception to "no handler calls them" |

use std::sync::OnceLock;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

fn armed() -> Option<&'static str> {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    ARMED
        .get_or_init(|| std::env::var("PM_FAILPOINT").ok().filter(|v| !v.is_empty()))
        .as_deref()
}

/// Aborts the process if `PM_FAILPOINT` names this point.
pub fn hit(name: &str) {
    if armed() == Some(name) {
        eprintln!("project-manager: PM_FAILPOINT={name} reached; aborting");
        std::process::abort();
    }
}

/// The hooks around a command's handler.
pub async fn layer(request: Request, next: Next) -> Response {
    hit("abort_before_append");
    let response = next.run(request).await;
    if response.status().is_success() {
        hit("abort_after_append");
    }
    response
}
