//! Webhook subscriptions (DELIVERY.md "Webhooks", admin): register a URL with event-type
//! filters and a secret, list, read, delete, and resume a paused one (from the failed
//! event or a given position). Deliveries are the dispatcher's
//! ([`pm_application::webhooks::dispatch`]).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use pm_application::log::{LogPosition, LogReader};
use pm_application::scope::Scope;
use pm_application::webhooks::policy::{HostPolicy, UrlError};
use pm_application::webhooks::{check_types, signature, NewWebhook, WebhookStore, WebhookView};
use pm_infrastructure::webhooks::http::check_registration;
use pm_infrastructure::webhooks::DbWebhookStore;
use serde::Deserialize;
use tokio::sync::Notify;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{parse_json, path_uuid, RawBody};
use crate::state::AppState;

/// What the admin routes need: the store, the policy registrations are checked against,
/// and the dispatcher's doorbell (so this replica picks a change up at once).
#[derive(Debug, Clone)]
pub struct WebhookAdmin {
    /// The subscriptions.
    pub store: DbWebhookStore,
    /// `PM_WEBHOOK_ALLOWED_HOSTS`.
    pub policy: Arc<HostPolicy>,
    /// Rung after every change.
    pub changes: Arc<Notify>,
}

/// The body of `POST /v1/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    /// Where deliveries are posted: an `http` or `https` URL the host policy allows.
    #[schema(
        example = "https://hooks.example.com/project-manager",
        max_length = 2048
    )]
    pub url: String,
    /// Event types (`project_manager.task.created`), prefix patterns (`turn.*`) or `*`;
    /// 1–64 entries.
    #[schema(example = json!(["turn.*", "project_manager.task.created"]))]
    pub types: Vec<String>,
    /// `whsec_<base64 of 24–64 bytes>`; generated when absent.
    pub secret: Option<String>,
}

/// The optional body of `POST /v1/webhooks/{id}/resume`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeWebhook {
    /// Deliver again from this log position (inclusive); default: from the event that
    /// failed (the one after the subscription's `position`).
    pub from_position: Option<String>,
}

/// The subscriptions.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct WebhookList {
    /// Every subscription, oldest first.
    pub items: Vec<WebhookView>,
}

fn not_found(id: Uuid) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "webhook_not_found",
        format!("no webhook {id}"),
    )
}

/// The refusal of a URL: its form, or the host policy.
fn refused_url(e: UrlError) -> ApiError {
    match e {
        UrlError::NotAllowed(m) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "webhook_url_not_allowed",
            m,
        ),
        UrlError::Invalid(m) | UrlError::Unresolvable(m) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed", m)
        }
    }
}

/// `POST /v1/webhooks`: subscribes a URL; deliveries start with the events after the
/// log's head now.
#[utoipa::path(post, path = "/v1/webhooks", tag = "webhooks", request_body = CreateWebhook,
    responses((status = 201, body = WebhookView, description = "Subscribed; the answer carries the secret (only this once)"),
              (status = 422, body = crate::error::Problem, description = "A bad URL, filter or secret (`validation_failed`), or a URL the host policy refuses (`webhook_url_not_allowed`).")))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let body: CreateWebhook = parse_json(&body)?;
    check_types(&body.types).map_err(|e| ApiError::validation("types", e))?;
    let admin = &state.webhooks;
    check_registration(&admin.policy, &body.url)
        .await
        .map_err(refused_url)?;
    let secret = match body.secret {
        Some(secret) => {
            signature::key(&secret).map_err(|e| ApiError::validation("secret", e))?;
            secret
        }
        None => signature::generate().map_err(ApiError::internal)?,
    };
    let new = NewWebhook {
        id: Uuid::now_v7(),
        url: body.url,
        types: body.types,
        scope: caller.scope().clone(),
        secret,
        position: state.log.head().await?,
        // As stored (microseconds): the answer equals what `GET` shows.
        at: pm_domain::time::truncate(chrono::Utc::now()),
    };
    admin.store.create(&new).await?;
    admin.changes.notify_one();
    let view = new.view();
    let location = format!("/v1/webhooks/{}", new.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(view),
    )
        .into_response())
}

/// `GET /v1/webhooks`.
#[utoipa::path(get, path = "/v1/webhooks", tag = "webhooks",
    responses((status = 200, body = WebhookList, description = "Every subscription, oldest first (without secrets)")))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<WebhookList>, ApiError> {
    let mut items = state.webhooks.store.list().await?;
    items.retain(|w| mine(&caller, w));
    Ok(Json(WebhookList { items }))
}

/// Whether `caller` may see subscription `webhook` (TRUST.md "Organizations"): one whose
/// registrant's organizations are all the caller's — another organization's webhook
/// answers as if it did not exist.
fn mine(caller: &Caller, webhook: &WebhookView) -> bool {
    Scope::parse(&webhook.organizations).is_ok_and(|theirs| caller.scope().covers(&theirs))
}

/// The subscription `id` if `caller` may see it.
async fn find(state: &AppState, caller: &Caller, id: Uuid) -> Result<WebhookView, ApiError> {
    match state.webhooks.store.get(id).await? {
        Some(view) if mine(caller, &view) => Ok(view),
        _ => Err(not_found(id)),
    }
}

/// `GET /v1/webhooks/{id}`.
#[utoipa::path(get, path = "/v1/webhooks/{id}", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 200, body = WebhookView, description = "The subscription (without its secret)"),
              (status = 404, body = crate::error::Problem, description = "No such webhook (`webhook_not_found`).")))]
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<WebhookView>, ApiError> {
    let id = path_uuid(&id, "webhook_not_found", "webhook")?;
    find(&state, &caller, id).await.map(Json)
}

/// `DELETE /v1/webhooks/{id}`: deliveries stop at once on this replica and within a second
/// on the one delivering (a delivery under way may still arrive; none moves the deleted
/// subscription's cursor).
#[utoipa::path(delete, path = "/v1/webhooks/{id}", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"),
              (status = 404, body = crate::error::Problem, description = "No such webhook (`webhook_not_found`).")))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = path_uuid(&id, "webhook_not_found", "webhook")?;
    find(&state, &caller, id).await?;
    if !state.webhooks.store.delete(id).await? {
        return Err(not_found(id));
    }
    state.webhooks.changes.notify_one();
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/webhooks/{id}/resume`: active again, from the failed event or
/// `from_position`; also rewinds (or skips ahead on) an active subscription.
#[utoipa::path(post, path = "/v1/webhooks/{id}/resume", tag = "webhooks", params(("id" = Uuid, Path)),
    request_body(content = Option<ResumeWebhook>, description = "Optional"),
    responses((status = 200, body = WebhookView, description = "Active again"),
              (status = 404, body = crate::error::Problem, description = "No such webhook (`webhook_not_found`)."),
              (status = 422, body = crate::error::Problem, description = "`from_position` is not a position of the log (`validation_failed`).")))]
pub async fn resume(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Json<WebhookView>, ApiError> {
    let id = path_uuid(&id, "webhook_not_found", "webhook")?;
    find(&state, &caller, id).await?;
    let body: ResumeWebhook = super::workers::body_or_default(&body)?;
    let from = match body.from_position.as_deref() {
        Some(raw) => {
            let from: LogPosition = raw
                .parse()
                .map_err(|e| ApiError::validation("from_position", e))?;
            let head = state.log.head().await?;
            if from.0 < 1 || from.0 > head.0.saturating_add(1) {
                return Err(ApiError::validation(
                    "from_position",
                    format!("must be between 1 and the log's head + 1 ({})", head.0 + 1),
                ));
            }
            Some(from)
        }
        None => None,
    };
    let view = state
        .webhooks
        .store
        .resume(id, from, chrono::Utc::now())
        .await?
        .ok_or_else(|| not_found(id))?;
    state.webhooks.changes.notify_one();
    Ok(Json(view))
}
