//! Webhooks: subscriptions (admin role) and, for receivers, checking a delivery's
//! Standard Webhooks signature in one call ([`verify_webhook`]).

use std::time::{SystemTime, UNIX_EPOCH};

use pm_api_types::webhooks::signature;
use reqwest::header::HeaderMap;
use serde::Serialize;
use uuid::Uuid;

use crate::http::{Call, Retries};
use crate::turns::json;
use crate::{Client, Error, Position};

pub use pm_api_types::webhooks::signature::VerifyError;
pub use pm_api_types::webhooks::{DeliveryFailure, WebhookState, WebhookView};

#[derive(Serialize)]
struct CreateBody<'a> {
    url: &'a str,
    types: &'a [&'a str],
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<&'a str>,
}

#[derive(Serialize)]
struct ResumeBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    from_position: Option<&'a str>,
}

#[derive(serde::Deserialize)]
struct WebhookList {
    items: Vec<WebhookView>,
}

impl Client {
    /// `POST /v1/webhooks` (admin): subscribes `url` to the events whose type matches
    /// `types` (exact types, `prefix.*` patterns, or `*`), signed with `secret`
    /// (`whsec_<base64>`; generated when `None`). The answer is the only one that carries
    /// the secret. Not retried once sent: a repeat would subscribe twice.
    ///
    /// # Errors
    /// `422 validation_failed` (URL, types, secret), `422 webhook_url_not_allowed` (the
    /// service's host policy), `403 forbidden`, and the [`Error`]s of any call.
    pub async fn create_webhook(
        &self,
        url: &str,
        types: &[&str],
        secret: Option<&str>,
    ) -> Result<WebhookView, Error> {
        let body = json(&CreateBody { url, types, secret })?;
        let mut call = Call::post("/v1/webhooks".into(), Some(body));
        call.retries = Retries::Unsent;
        self.inner.send(&call).await?.json("webhook")
    }

    /// `GET /v1/webhooks` (admin): every subscription, oldest first, without secrets.
    ///
    /// # Errors
    /// `403 forbidden`, and the [`Error`]s of any call.
    pub async fn webhooks(&self) -> Result<Vec<WebhookView>, Error> {
        let call = Call::get("/v1/webhooks".into(), Vec::new());
        let list: WebhookList = self.inner.send(&call).await?.json("webhooks")?;
        Ok(list.items)
    }

    /// `GET /v1/webhooks/{id}` (admin): its state, position and failing delivery.
    ///
    /// # Errors
    /// `404 webhook_not_found`, `403 forbidden`, and the [`Error`]s of any call.
    pub async fn webhook(&self, id: Uuid) -> Result<WebhookView, Error> {
        let call = Call::get(format!("/v1/webhooks/{id}"), Vec::new());
        self.inner.send(&call).await?.json("webhook")
    }

    /// `DELETE /v1/webhooks/{id}` (admin).
    ///
    /// # Errors
    /// `404 webhook_not_found` (also when a retry finds it already deleted), `403
    /// forbidden`, and the [`Error`]s of any call.
    pub async fn delete_webhook(&self, id: Uuid) -> Result<(), Error> {
        let call = Call::delete(format!("/v1/webhooks/{id}"));
        self.inner.send(&call).await.map(|_| ())
    }

    /// `POST /v1/webhooks/{id}/resume` (admin): active again, delivering from the event
    /// that failed, or from `from` (inclusive) when given.
    ///
    /// # Errors
    /// `404 webhook_not_found`, `422 validation_failed` for a position past the log's
    /// head, `403 forbidden`, and the [`Error`]s of any call.
    pub async fn resume_webhook(
        &self,
        id: Uuid,
        from: Option<&Position>,
    ) -> Result<WebhookView, Error> {
        let body = json(&ResumeBody {
            from_position: from.map(Position::as_str),
        })?;
        let call = Call::post(format!("/v1/webhooks/{id}/resume"), Some(body));
        self.inner.send(&call).await?.json("webhook")
    }
}

/// Checks a delivery the way Standard Webhooks says: the `webhook-signature` header
/// (any of its `v1,` entries) must be the HMAC-SHA256 of `webhook-id`,
/// `webhook-timestamp` and the raw `body` under `secret`, and the timestamp within five
/// minutes of this machine's clock. Pass the body exactly as received, before parsing.
///
/// ```
/// # fn receive(headers: &reqwest::header::HeaderMap, body: &[u8]) {
/// match pm_client::verify_webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", headers, body) {
///     Ok(()) => { /* parse the CloudEvent in `body`, deduplicate by its `id` */ }
///     Err(e) => { /* answer 401 and drop it */ let _ = e; }
/// }
/// # }
/// ```
///
/// # Errors
/// [`VerifyError`]: a missing header, a bad secret or timestamp, a stale timestamp, or
/// no matching signature.
pub fn verify_webhook(secret: &str, headers: &HeaderMap, body: &[u8]) -> Result<(), VerifyError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    verify_webhook_at(secret, headers, body, now)
}

/// [`verify_webhook`] against the given Unix time (seconds), for tests and replays.
///
/// # Errors
/// As [`verify_webhook`].
pub fn verify_webhook_at(
    secret: &str,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<(), VerifyError> {
    let header = |name: &'static str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or(VerifyError::MissingHeader(name))
    };
    signature::verify(
        secret,
        header("webhook-id")?,
        header("webhook-timestamp")?,
        header("webhook-signature")?,
        body,
        now,
    )
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn headers(id: &str, ts: i64, sig: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("webhook-id", HeaderValue::from_str(id).expect("value"));
        h.insert(
            "webhook-timestamp",
            HeaderValue::from_str(&ts.to_string()).expect("value"),
        );
        h.insert(
            "webhook-signature",
            HeaderValue::from_str(sig).expect("value"),
        );
        h
    }

    #[test]
    fn given_a_signed_delivery_when_verified_then_it_passes_and_a_missing_header_is_named() {
        let body = br#"{"test": 2432232314}"#;
        let sig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        let h = headers("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, sig);
        assert_eq!(verify_webhook_at(SECRET, &h, body, 1_614_265_331), Ok(()));
        assert_eq!(
            verify_webhook_at(SECRET, &h, b"{}", 1_614_265_331),
            Err(VerifyError::Mismatch)
        );
        assert!(matches!(
            verify_webhook(SECRET, &h, body),
            Err(VerifyError::Stale(_))
        ));
        let mut missing = h.clone();
        missing.remove("webhook-timestamp");
        assert_eq!(
            verify_webhook_at(SECRET, &missing, body, 1_614_265_331),
            Err(VerifyError::MissingHeader("webhook-timestamp"))
        );
    }
}
