//! Delivering webhooks over HTTP with reqwest, where the [`HostPolicy`] allows.
//!
//! Names are resolved by this module's resolver, which keeps only the addresses the policy
//! allows (so a name that resolves — or later rebinds — to a private address is refused
//! at connect time); address literals, which reqwest does not resolve, are checked
//! before each request; redirects are not followed (a `3xx` is a failure, so a receiver
//! cannot bounce a delivery to an address the policy forbids).

use crate::error_chain as chain;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pm_application::webhooks::policy::{HostPolicy, Target, UrlError};
use pm_application::webhooks::{Deliverer, Delivery, DeliveryError};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The deliverer.
#[derive(Debug, Clone)]
pub struct HttpDeliverer {
    client: reqwest::Client,
    policy: Arc<HostPolicy>,
}

/// The HTTP client could not be built (no TLS backend).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the webhook HTTP client: {0}")]
pub struct ClientError(#[from] reqwest::Error);

impl HttpDeliverer {
    /// A deliverer bounded by `policy`, giving each request `timeout`.
    ///
    /// # Errors
    /// [`ClientError`] when reqwest cannot build its client.
    pub fn new(policy: HostPolicy, timeout: Duration) -> Result<Self, ClientError> {
        let policy = Arc::new(policy);
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(PolicyResolver {
                policy: policy.clone(),
            }))
            .redirect(reqwest::redirect::Policy::none())
            // No proxy from the environment: a proxy resolves and connects to the target
            // itself, where the policy's resolver never sees the address.
            .no_proxy()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .user_agent(concat!(
                "project-manager-webhooks/",
                env!("CARGO_PKG_VERSION")
            ))
            .build()?;
        Ok(Self { client, policy })
    }
}

/// Checks a URL being registered: its form and host by `policy`, and — for a name the
/// policy does not list — every address it resolves to now (deliveries check again at
/// every connection, see [`HttpDeliverer`]).
///
/// # Errors
/// [`UrlError`]; [`UrlError::Unresolvable`] for a name that does not resolve.
pub async fn check_registration(policy: &HostPolicy, url: &str) -> Result<(), UrlError> {
    let Target::Name(host, port) = policy.check_url(url)? else {
        return Ok(());
    };
    let addresses = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| UrlError::Unresolvable(format!("url: {host} does not resolve ({e})")))?;
    for address in addresses {
        if !policy.allows_ip(address.ip()) {
            return Err(UrlError::NotAllowed(format!(
                "url: {host} resolves to {}, which is not allowed ({})",
                address.ip(),
                policy.describe()
            )));
        }
    }
    Ok(())
}

/// Resolves with the system resolver, keeping only allowed addresses.
struct PolicyResolver {
    policy: Arc<HostPolicy>,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let listed = policy.allows_name(&host);
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| listed || policy.allows_ip(a.ip()))
                .collect();
            if allowed.is_empty() {
                let error: Box<dyn std::error::Error + Send + Sync> = format!(
                    "{host} resolves to no allowed address ({:?}; {})",
                    found.iter().map(SocketAddr::ip).collect::<Vec<_>>(),
                    policy.describe()
                )
                .into();
                return Err(error);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

impl Deliverer for HttpDeliverer {
    async fn deliver(&self, delivery: &Delivery) -> Result<(), DeliveryError> {
        // Checked again at every delivery: the policy may have changed since registration.
        if let Err(e) = self.policy.check_url(&delivery.url) {
            return Err(DeliveryError {
                status: None,
                message: e.to_string(),
            });
        }
        let mut request = self
            .client
            .post(&delivery.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &delivery.id)
            .header("webhook-timestamp", delivery.timestamp.to_string())
            .header("webhook-signature", &delivery.signature);
        if let Some(trace) = &delivery.trace {
            request = request.header("traceparent", &trace.traceparent);
            if let Some(state) = &trace.tracestate {
                request = request.header("tracestate", state);
            }
        }
        let response = request
            .body(delivery.body.clone())
            .send()
            .await
            .map_err(|e| DeliveryError {
                status: None,
                message: chain(&e),
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        // A little of the receiver's answer helps an operator see why.
        let body = response.text().await.unwrap_or_default();
        let excerpt: String = body.chars().take(200).collect();
        Err(DeliveryError {
            status: Some(status.as_u16()),
            message: if excerpt.is_empty() {
                format!("the receiver answered {status}")
            } else {
                format!("the receiver answered {status}: {excerpt}")
            },
        })
    }
}
