//! Webhooks (DELIVERY.md "Webhooks"): facts and runes posted to subscribers' URLs, in log
//! order per subscription, at least once, signed as Standard Webhooks does, retried with
//! exponential backoff and then paused with the failing delivery visible.
//!
//! - [`signature`]: the `whsec_` secrets and the `webhook-signature` HMAC (the service
//!   signs with it, pm-client verifies with it: one implementation of the convention, in
//!   `pm_api_types::webhooks::signature`, with the subscriptions' views).
//! - [`policy`]: which URLs and addresses deliveries may go to (the SSRF guard).
//! - [`dispatch`]: the dispatcher — one delivery loop per active subscription, on the
//!   replica that owns the `webhooks` processor.
//!
//! The ports ([`WebhookStore`], [`Deliverer`]) keep the loop free of SQL and HTTP, so it
//! is tested against fakes.

use std::future::Future;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::log::{EventFilter, LogPosition};
use crate::scope::Scope;
use crate::AppError;

pub mod dispatch;
pub mod policy;
pub mod signature;

pub use pm_api_types::webhooks::{DeliveryFailure, WebhookState, WebhookView};

/// The processor name under which one replica at a time delivers webhooks (its stored
/// position is the slowest active subscription's, so its lag shows in
/// `GET /v1/admin/processors`).
pub const WEBHOOKS: &str = "webhooks";

/// A subscription as the dispatcher needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// Its id.
    pub id: Uuid,
    /// Where deliveries are posted.
    pub url: String,
    /// Its event-type filters.
    pub types: Vec<String>,
    /// Its registrant's organizations: only their events are delivered.
    pub scope: Scope,
    /// The signing secret (`whsec_…`).
    pub secret: String,
    /// Delivered (or skipped) up to here.
    pub position: LogPosition,
    /// Bumped by every resume: a delivery loop started before it may no longer write.
    pub generation: i64,
    /// The failing delivery's position and attempts so far (from `last_error`): a loop
    /// that starts again — after a restart or a takeover — goes on counting, so the
    /// retries run out even for a service that keeps restarting.
    pub failing: Option<(LogPosition, u32)>,
}

impl Subscription {
    /// The log filter of its types (`*` alone matches everything) within its scope.
    pub fn filter(&self) -> EventFilter {
        EventFilter {
            scope: self.scope.clone(),
            ..types_filter(&self.types)
        }
    }
}

/// The log filter of a subscription's `types`.
pub fn types_filter(types: &[String]) -> EventFilter {
    if types.iter().any(|t| t == "*") {
        return EventFilter::default();
    }
    EventFilter::default().with_types(&types.join(","))
}

/// What a new subscription is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWebhook {
    /// Its id.
    pub id: Uuid,
    /// The checked URL.
    pub url: String,
    /// The checked filters.
    pub types: Vec<String>,
    /// The registrant's organizations.
    pub scope: Scope,
    /// The secret (`whsec_…`).
    pub secret: String,
    /// Deliveries start after this position (the log's head when it was created).
    pub position: LogPosition,
    /// Now.
    pub at: DateTime<Utc>,
}

impl NewWebhook {
    /// The subscription as it is once stored, with its secret (the creating answer).
    pub fn view(&self) -> WebhookView {
        WebhookView {
            id: self.id,
            url: self.url.clone(),
            types: self.types.clone(),
            organizations: self.scope.names(),
            secret: Some(self.secret.clone()),
            state: WebhookState::Active,
            position: self.position.to_string(),
            last_error: None,
            created_at: self.at,
            updated_at: self.at,
        }
    }
}

/// Storage of subscriptions and their cursors.
///
/// Every write of the dispatcher names the subscription's `generation` and is refused
/// (`false`) when the subscription was resumed, paused or deleted meanwhile: a loop that
/// lost the race stops instead of overwriting the operator's decision.
///
/// # Errors
/// [`AppError::Unavailable`] when the store cannot be reached.
pub trait WebhookStore: Send + Sync + 'static {
    /// Stores a new, active subscription.
    fn create(&self, new: &NewWebhook) -> impl Future<Output = Result<(), AppError>> + Send;
    /// Every subscription, oldest first.
    fn list(&self) -> impl Future<Output = Result<Vec<WebhookView>, AppError>> + Send;
    /// One subscription.
    fn get(&self, id: Uuid) -> impl Future<Output = Result<Option<WebhookView>, AppError>> + Send;
    /// Deletes one; `false` when there was none.
    fn delete(&self, id: Uuid) -> impl Future<Output = Result<bool, AppError>> + Send;
    /// Makes one active again, clears its error and, with `from`, moves its cursor to
    /// just before `from`; bumps its generation. `None` when there is none.
    fn resume(
        &self,
        id: Uuid,
        from: Option<LogPosition>,
        at: DateTime<Utc>,
    ) -> impl Future<Output = Result<Option<WebhookView>, AppError>> + Send;
    /// The active subscriptions, for the dispatcher.
    fn active(&self) -> impl Future<Output = Result<Vec<Subscription>, AppError>> + Send;
    /// Moves the cursor of `(id, generation)` from `from` to `to` and clears its error.
    fn advance(
        &self,
        id: Uuid,
        generation: i64,
        from: LogPosition,
        to: LogPosition,
        at: DateTime<Utc>,
    ) -> impl Future<Output = Result<bool, AppError>> + Send;
    /// Records a failed attempt of `(id, generation)`; with `pause`, also pauses it.
    fn fail(
        &self,
        id: Uuid,
        generation: i64,
        failure: &DeliveryFailure,
        pause: bool,
    ) -> impl Future<Output = Result<bool, AppError>> + Send;
    /// Stores the webhooks processor's position (for its lag).
    fn report_position(
        &self,
        position: LogPosition,
    ) -> impl Future<Output = Result<(), AppError>> + Send;
}

/// One delivery: `POST url` with `body` and the Standard Webhooks headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Where.
    pub url: String,
    /// `webhook-id`: the event's CloudEvent id.
    pub id: String,
    /// `webhook-timestamp`: Unix seconds when it was signed.
    pub timestamp: i64,
    /// `webhook-signature`: `v1,<base64>`.
    pub signature: String,
    /// The event's CloudEvent JSON.
    pub body: Vec<u8>,
    /// `traceparent` and `tracestate`: the trace of what caused the event (issue 34).
    pub trace: Option<crate::trace::TraceContext>,
}

/// Why a delivery failed (it is retried).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DeliveryError {
    /// The receiver's status, when it answered with a non-2xx.
    pub status: Option<u16>,
    /// What went wrong.
    pub message: String,
}

/// Posts deliveries (HTTP, guarded by the [`policy`] at connect time).
pub trait Deliverer: Send + Sync + 'static {
    /// Posts `delivery`; `Ok` on a `2xx` answer.
    fn deliver(
        &self,
        delivery: &Delivery,
    ) -> impl Future<Output = Result<(), DeliveryError>> + Send;
}

/// Why a subscription's filters are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypesError {
    /// No filter at all.
    #[error("at least one event type or pattern is needed (\"*\" for every event)")]
    Empty,
    /// More than [`MAX_TYPES`].
    #[error("at most {MAX_TYPES} event types")]
    TooMany,
    /// A filter that is not a type name or `prefix.*`.
    #[error("{0:?} is not an event type, a \"prefix.*\" pattern or \"*\"")]
    Malformed(String),
}

/// The most filters one subscription may have.
pub const MAX_TYPES: usize = 64;

/// Checks `types`: 1–64 entries, each `*`, an event type (`turn.started`) or a prefix
/// pattern (`turn.*`, `project_manager.*`); letters, digits, `_`, `-` and `.`.
///
/// # Errors
/// [`TypesError`] naming the first bad entry.
pub fn check_types(types: &[String]) -> Result<(), TypesError> {
    if types.is_empty() {
        return Err(TypesError::Empty);
    }
    if types.len() > MAX_TYPES {
        return Err(TypesError::TooMany);
    }
    for t in types {
        if t == "*" {
            continue;
        }
        let name = t.strip_suffix(".*").unwrap_or(t);
        let ok = !name.is_empty()
            && name.len() <= 200
            && name.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            });
        if !ok {
            return Err(TypesError::Malformed(t.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(raw: &[&str]) -> Vec<String> {
        raw.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn given_exact_types_and_patterns_when_checked_then_they_pass() {
        assert_eq!(
            check_types(&types(&["turn.*", "project_manager.task.created", "*"])),
            Ok(())
        );
    }

    #[test]
    fn given_bad_filters_when_checked_then_each_is_named() {
        assert_eq!(check_types(&[]), Err(TypesError::Empty));
        for bad in [
            "",
            "turn.",
            ".turn",
            "turn.**",
            "turn *",
            "tu*rn",
            "turn.*.x*",
        ] {
            assert_eq!(
                check_types(&types(&[bad])),
                Err(TypesError::Malformed(bad.to_string())),
                "{bad}"
            );
        }
        assert_eq!(
            check_types(&vec!["turn.*".to_string(); MAX_TYPES + 1]),
            Err(TypesError::TooMany)
        );
    }

    #[test]
    fn given_a_registrants_organizations_when_filtering_then_only_theirs_are_delivered() {
        let subscription = Subscription {
            id: Uuid::nil(),
            url: "https://hooks.example.com/".into(),
            types: types(&["*"]),
            scope: Scope::only(["acme"]),
            secret: "whsec_x".into(),
            position: LogPosition::START,
            generation: 0,
            failing: None,
        };
        let of = |organization: Option<&str>, conversation: Option<Uuid>| crate::log::LoggedEvent {
            organization: organization.map(Into::into),
            conversation_id: conversation,
            ..crate::log::memory::event(1, "project_manager.message.added")
        };
        let filter = subscription.filter();
        assert!(filter.matches(&of(Some("acme"), Some(Uuid::nil()))));
        assert!(!filter.matches(&of(Some("globex"), Some(Uuid::nil()))));
        assert!(!filter.matches(&of(None, None)));
    }

    #[test]
    fn given_patterns_when_filtering_then_prefixes_and_exact_names_match() {
        let filter = types_filter(&types(&["turn.*", "project_manager.task.created"]));
        let passes = |f: &EventFilter, t: &str| f.matches(&crate::log::memory::event(1, t));
        assert!(passes(&filter, "turn.started"));
        assert!(passes(&filter, "project_manager.task.created"));
        assert!(!passes(&filter, "project_manager.task.updated"));
        assert!(!passes(&filter, "turnover.x"));
        let all = types_filter(&types(&["*", "turn.*"]));
        assert!(passes(&all, "session.opened"));
    }
}
