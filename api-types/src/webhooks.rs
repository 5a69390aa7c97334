//! Webhook subscriptions as the admin API shows them (DELIVERY.md "Webhooks"), and
//! [`signature`]: the `whsec_` secrets and the `webhook-signature` HMAC (the service signs
//! with it, pm-client verifies with it: one implementation of the convention).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub mod signature;

/// Whether a subscription is being delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WebhookState {
    /// Deliveries run.
    Active,
    /// The retries of one delivery ran out; nothing is delivered until it is resumed.
    Paused,
}

impl WebhookState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
        }
    }

    /// The state of a stored name.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "active" => Some(Self::Active),
            "paused" => Some(Self::Paused),
            _ => None,
        }
    }
}

/// The delivery that failed last (kept while it is retried, and after it paused the
/// subscription, until a delivery succeeds or the subscription is resumed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryFailure {
    /// The event's log position (an opaque token, as everywhere).
    pub position: String,
    /// The event's CloudEvent id (the delivery's `webhook-id`).
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// Attempts made on this event so far.
    pub attempts: u32,
    /// The receiver's HTTP status, when it answered.
    pub status: Option<u16>,
    /// What went wrong.
    pub error: String,
    /// When the last attempt failed.
    pub at: DateTime<Utc>,
}

/// A subscription as the admin API shows it (the secret only in the answer that
/// created it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookView {
    /// Its id.
    pub id: Uuid,
    /// Where deliveries are posted.
    pub url: String,
    /// The event-type filters: exact types and `prefix.*` patterns (`*`: every event).
    pub types: Vec<String>,
    /// The organizations whose events it delivers: its registrant's (`["*"]`: every
    /// event, including those of no conversation). Absent from a service older than
    /// organizations: empty.
    #[serde(default)]
    pub organizations: Vec<String>,
    /// The signing secret (`whsec_<base64>`): in the creating answer only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// `active` or `paused`.
    pub state: WebhookState,
    /// Every event up to this log position has been delivered (or did not match); the
    /// next delivery is of a later one.
    pub position: String,
    /// The failing delivery, while it is retried and after it paused the subscription.
    pub last_error: Option<DeliveryFailure>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When its state, position or error last changed.
    pub updated_at: DateTime<Utc>,
}
