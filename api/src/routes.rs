//! The router: every endpoint of API.md (see [`table`]) with its role guard, and the
//! layers around them (correlation ids, metrics, tracing, the body limit,
//! `Idempotency-Key`).

pub mod access;
pub mod admin;
pub mod commands;
pub mod events;
pub mod forget;
pub mod idempotency;
pub mod me;
pub mod ops;
pub mod queries;
pub mod sagas;
pub mod scope;
pub mod table;
pub mod tool_policies;
pub mod tools;
pub mod webhooks;
pub mod workers;

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::MethodRouter;
use axum::Router;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::auth::Role;
use crate::error::ApiError;
use crate::extract::CorrelationId;
use crate::state::AppState;
use access::{guard, Access, READERS};
use pm_infrastructure::otlp::live::LiveSpans;

/// Wraps an endpoint's handler in its guard (and, for a command, the `Idempotency-Key`
/// middleware inside the guard).
fn guarded(
    state: &AppState,
    access: Access,
    path: &str,
    route: MethodRouter<AppState>,
) -> MethodRouter<AppState> {
    let rule = scope::path_scope(path);
    let layer =
        |roles: &'static [Role]| middleware::from_fn_with_state(state.clone(), guard(roles, rule));
    match access {
        Access::Open => route,
        Access::Read => route.layer(layer(READERS)),
        Access::Admin => route.layer(layer(&[])),
        Access::Call(roles) => route.layer(layer(roles)),
        Access::Command(roles) => with_failpoints(route)
            .layer(middleware::from_fn_with_state(
                state.clone(),
                idempotency::idempotency,
            ))
            .layer(layer(roles)),
    }
}

/// The fault tests' crash hooks around a command's handler ([`crate::failpoint`]).
#[cfg(feature = "failpoints")]
fn with_failpoints(route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.layer(middleware::from_fn(crate::failpoint::layer))
}

/// Without the `failpoints` feature: the handler as it is.
#[cfg(not(feature = "failpoints"))]
fn with_failpoints(route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route
}

/// The whole application router: the HTTP API ([`api`]) and `/mcp` ([`crate::mcp`]),
/// whose tools call the HTTP API, behind the same tokens (any role may connect).
pub fn router(state: AppState) -> Router {
    let api = api(state.clone());
    let sessions = crate::mcp::sessions::McpSessions::new(
        state.mcp.sessions_per_principal,
        state.mcp.session_idle,
    );
    let mcp = crate::mcp::service(
        api.clone(),
        &state.mcp,
        state.tail.clone(),
        state.max_body_bytes,
        sessions.manager(),
    );
    let body_read_timeout = state.body_read_timeout;
    let open_mode = middleware::from_fn_with_state(state.clone(), crate::open_mode::layer);
    let spans = state.spans.clone();
    let guard = middleware::from_fn_with_state(state, guard(READERS, scope::PathScope::Unnamed));
    let mcp = tower::ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(spans, request_context))
        .layer(middleware::from_fn(record_metrics))
        .layer(guard)
        .layer(middleware::from_fn_with_state(
            sessions,
            crate::mcp::sessions::gate,
        ))
        .service(mcp);
    api.route_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(
            body_read_timeout,
            crate::body_deadline::layer,
        ))
        .layer(open_mode)
}

/// The HTTP API, built from [`table::endpoints`].
fn api(state: AppState) -> Router {
    let mut router = Router::new();
    for endpoint in table::endpoints() {
        router = router.route(
            endpoint.path,
            guarded(&state, endpoint.access, endpoint.path, endpoint.route),
        );
    }
    router
        .merge(crate::console::routes())
        .layer(DefaultBodyLimit::max(state.max_body_bytes))
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this endpoint does not take this method",
            )
        })
        .layer(middleware::from_fn(record_metrics))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        .layer(middleware::from_fn_with_state(
            state.spans.clone(),
            request_context,
        ))
        .with_state(state)
}

/// The span every request's log lines are logged in: method, path, the correlation id and
/// the W3C trace id ([`request_context`] runs first and sets them).
fn request_span(req: &Request) -> tracing::Span {
    let correlation_id = req
        .extensions()
        .get::<CorrelationId>()
        .map_or("", |c| c.0.as_str());
    let trace_id = req
        .extensions()
        .get::<crate::trace::RequestTrace>()
        .map_or("", |t| t.0.trace_id());
    tracing::info_span!(
        "request",
        method = %req.method(),
        path = %req.uri().path(),
        correlation_id,
        trace_id,
    )
}

/// The outermost middleware of every request: its correlation id ([`correlate`]) and its
/// span in its trace ([`crate::trace::begin`]), named in the answer. One layer for both:
/// each `from_fn` layer clones the whole stack inside it on every request.
async fn request_context(
    State(spans): State<Option<LiveSpans>>,
    mut req: Request,
    next: Next,
) -> Response {
    let id = correlate(&mut req);
    let begun = crate::trace::begin(spans.as_ref(), &mut req);
    let mut response = next.run(req).await;
    crate::trace::end(begun, &mut response);
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-correlation-id", value);
    }
    response
}

/// Gives `req` a correlation id (from `X-Correlation-Id`, else `X-Request-Id`, else a new
/// UUIDv7), to be echoed in the answer.
fn correlate(req: &mut Request) -> String {
    let id = ["x-correlation-id", "x-request-id"]
        .iter()
        .find_map(|h| req.headers().get(*h))
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    req.extensions_mut().insert(CorrelationId(id.clone()));
    id
}

/// Counts requests and records their latency by method, route and status.
async fn record_metrics(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = req.method().to_string();
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let route = matched
        .as_ref()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let mut response = next.run(req).await;
    // The request's span is named by its route (`crate::trace::end`, outside the router).
    if let Some(matched) = matched {
        response.extensions_mut().insert(matched);
    }
    let status = response.status().as_u16().to_string();
    let labels = [("method", method), ("route", route), ("status", status)];
    metrics::counter!("http_requests_total", &labels).increment(1);
    metrics::histogram!("http_request_duration_seconds", &labels)
        .record(start.elapsed().as_secs_f64());
    response
}
