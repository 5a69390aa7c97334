//! The router: every endpoint of API.md with its role guard, and the layers around them
//! (correlation ids, metrics, tracing, the body limit, `Idempotency-Key`).

pub mod admin;
pub mod commands;
pub mod events;
pub mod idempotency;
pub mod ops;
pub mod queries;
pub mod sagas;

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::extract::CorrelationId;
use crate::state::AppState;

const INGRESS: &[Role] = &[Role::Ingress];
const LLM: &[Role] = &[Role::Llm];
const INGRESS_LLM: &[Role] = &[Role::Ingress, Role::Llm];
const ADMIN: &[Role] = &[];
/// Readers: every role may read (analysts exist for it; writers may read back).
pub const READERS: &[Role] = &[Role::Ingress, Role::Llm, Role::Analyst];

/// Wraps a method router so only `roles` (and admin) get through; `Idempotency-Key` is
/// honoured on commands.
fn command(
    state: &AppState,
    roles: &'static [Role],
    route: MethodRouter<AppState>,
) -> MethodRouter<AppState> {
    route
        .layer(middleware::from_fn_with_state(
            state.clone(),
            idempotency::idempotency,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), guard(roles)))
}

/// Wraps an operator route so only admin gets through.
fn admin(state: &AppState, route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.layer(middleware::from_fn_with_state(state.clone(), guard(ADMIN)))
}

/// Wraps a read route so every authenticated role may use it.
pub fn read(state: &AppState, route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.layer(middleware::from_fn_with_state(
        state.clone(),
        guard(READERS),
    ))
}

type GuardFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;

fn guard(
    roles: &'static [Role],
) -> impl Fn(State<AppState>, Request, Next) -> GuardFuture + Clone + Send + 'static {
    move |State(state): State<AppState>, req: Request, next: Next| {
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            let caller =
                match <Caller as axum::extract::FromRequestParts<AppState>>::from_request_parts(
                    &mut parts, &state,
                )
                .await
                {
                    Ok(caller) => caller,
                    Err(e) => return e.into_response(),
                };
            if let Err(e) = caller.require(roles) {
                return e.into_response();
            }
            next.run(Request::from_parts(parts, body)).await
        })
    }
}

/// The whole application router.
pub fn router(state: AppState) -> Router {
    let s = &state;
    let api = Router::new()
        .route(
            "/v1/actors",
            command(s, INGRESS, post(commands::register_actor)),
        )
        .route("/v1/actors/{id}", read(s, get(queries::actor)))
        .route(
            "/v1/conversations",
            command(s, INGRESS, post(commands::start_conversation))
                .merge(read(s, get(queries::conversations))),
        )
        .route(
            "/v1/conversations/{id}",
            read(s, get(queries::conversation)),
        )
        .route(
            "/v1/conversations/{id}/checkpoints",
            command(s, LLM, post(commands::create_conversation_checkpoint))
                .merge(read(s, get(queries::checkpoints))),
        )
        .route(
            "/v1/conversations/{id}/tasks",
            command(s, LLM, post(commands::create_task))
                .merge(read(s, get(queries::conversation_tasks))),
        )
        .route(
            "/v1/conversations/{id}/messages",
            command(s, INGRESS_LLM, post(commands::add_message))
                .merge(read(s, get(queries::messages))),
        )
        .route(
            "/v1/conversations/{id}/checkpoints/{child}",
            read(s, get(queries::checkpoint)),
        )
        .route(
            "/v1/conversations/{id}/messages/{child}",
            read(s, get(queries::message)),
        )
        .route(
            "/v1/tasks/{id}/checkpoints/{child}",
            read(s, get(queries::task_checkpoint)),
        )
        .route("/v1/tasks", read(s, get(queries::tasks)))
        .route("/v1/tasks/{id}", read(s, get(queries::task)))
        .route(
            "/v1/tasks/{id}/checkpoints",
            command(s, LLM, post(commands::create_task_checkpoint)),
        )
        .route("/v1/stats/tasks", read(s, get(queries::task_stats)))
        .route("/v1/admin/processors", admin(s, get(admin::processors)))
        .route(
            "/v1/admin/processors/{name}/parked",
            admin(s, get(admin::parked)),
        )
        .route(
            "/v1/admin/projections/{name}/rebuild",
            admin(s, post(admin::rebuild_projection)),
        )
        .route("/v1/sessions/{id}", read(s, get(sagas::session)))
        .route("/v1/sessions/{id}/pause", admin(s, post(sagas::pause)))
        .route("/v1/sessions/{id}/resume", admin(s, post(sagas::resume)))
        .route("/v1/sessions/{id}/archive", admin(s, post(sagas::archive)))
        .route("/v1/agents", read(s, get(sagas::agents)))
        .route("/v1/agents/{id}", read(s, get(sagas::agent)))
        .route("/v1/agents/{id}/kill", admin(s, post(sagas::kill)))
        .route("/v1/turns", read(s, get(sagas::turns)))
        .route("/v1/turns/{id}", read(s, get(sagas::turn)))
        .route("/v1/anomalies", read(s, get(sagas::anomalies)))
        .route("/v1/events", read(s, get(events::events)))
        .layer(DefaultBodyLimit::max(state.max_body_bytes));
    let ops = Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi));
    api.merge(ops)
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
        .layer(middleware::from_fn(correlate))
        .with_state(state)
}

/// The span every request's log lines are logged in: method, path and the correlation id
/// ([`correlate`] runs first and sets it).
fn request_span(req: &Request) -> tracing::Span {
    let correlation_id = req
        .extensions()
        .get::<CorrelationId>()
        .map_or("", |c| c.0.as_str());
    tracing::info_span!(
        "request",
        method = %req.method(),
        path = %req.uri().path(),
        correlation_id,
    )
}

/// Gives every request a correlation id (from `X-Correlation-Id`, else `X-Request-Id`,
/// else a new UUIDv7) and echoes it in the answer.
async fn correlate(mut req: Request, next: Next) -> Response {
    let id = ["x-correlation-id", "x-request-id"]
        .iter()
        .find_map(|h| req.headers().get(*h))
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    req.extensions_mut().insert(CorrelationId(id.clone()));
    let mut response = next.run(req).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-correlation-id", value);
    }
    response
}

/// Counts requests and records their latency by method, route and status.
async fn record_metrics(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    let labels = [("method", method), ("route", route), ("status", status)];
    metrics::counter!("http_requests_total", &labels).increment(1);
    metrics::histogram!("http_request_duration_seconds", &labels)
        .record(start.elapsed().as_secs_f64());
    response
}
