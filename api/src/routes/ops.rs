//! Operations endpoints: liveness, readiness, Prometheus metrics, the OpenAPI and AsyncAPI
//! documents.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use pm_application::log::LogReader;
use serde_json::json;

use pm_application::sagas::SAGAS;
use pm_infrastructure::read_model::READ_MODEL;

use crate::state::AppState;

/// `GET /healthz`: the process is alive.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "Alive")))]
pub async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: the store answers and the read-model and saga processors run (here or
/// on another replica that owns them); `503` otherwise. Shows each processor's lag.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "Ready"), (status = 503, description = "Not ready")))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    if let Err(e) = state.db.ping().await {
        tracing::warn!(error = %e, "readiness check failed");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            Json(json!({"status": "unavailable", "store": state.db.kind(), "reason": "store unreachable"})),
        )
            .into_response();
    }
    let report = match crate::routes::admin::processor_report(&state).await {
        Ok(report) => report,
        Err(e) => return e.into_response(),
    };
    // Every processor runs somewhere: here, or on the replica that owns it.
    let runs = |name: &str, local_leader: bool| {
        local_leader
            || report
                .processors
                .iter()
                .any(|p| p.record.name == name && p.record.lease_owner.is_some())
    };
    let ready = runs(READ_MODEL, state.processor_status.borrow().leader)
        && runs(SAGAS, state.saga_status.borrow().leader);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let processors: Vec<_> = report
        .processors
        .iter()
        .map(|p| {
            json!({"name": p.record.name, "position": p.record.position, "lag_events": p.lag_events, "lease_owner": p.record.lease_owner})
        })
        .collect();
    // An append in progress this long keeps the events after it from readers.
    let held_back_ms = state
        .log
        .held_back()
        .await
        .ok()
        .flatten()
        .map_or(0, |d| d.as_millis() as u64);
    let mut response = (
        status,
        Json(json!({
            "status": if ready { "ready" } else { "starting" },
            "store": state.db.kind(),
            "head": report.head,
            "log_held_back_ms": held_back_ms,
            "processors": processors,
        })),
    )
        .into_response();
    if !ready {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}

/// `GET /metrics`: Prometheus text.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus text")))]
pub async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

/// `GET /asyncapi.json`: the AsyncAPI 3.0 document of the relay, the doorbells, the
/// webhooks and the SSE stream.
#[utoipa::path(get, path = "/asyncapi.json", tag = "operations", responses((status = 200, description = "The AsyncAPI 3.0 document of what the service sends outside HTTP answers")))]
pub async fn asyncapi() -> Response {
    Json(crate::asyncapi::document()).into_response()
}

/// `GET /openapi.json`: the OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, description = "This document")))]
pub async fn openapi() -> Response {
    Json(crate::openapi::document()).into_response()
}
