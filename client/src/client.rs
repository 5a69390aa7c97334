//! [`Client`] and its [`ClientBuilder`]: where the service is, who calls, how long to wait,
//! how often to retry.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderValue;

use crate::http::Inner;
use crate::{Error, RetryPolicy};

/// The address the examples and [`Client::from_env`] use when `PM_URL` is not set.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// A client of one project-manager service: typed commands (with idempotency keys and
/// bounded retries), typed reads (with read-your-writes) and the event log.
///
/// Cheap to clone (an `Arc` inside); clones share one connection pool. Build one per
/// service and token, and share it.
///
/// ```
/// # fn main() -> Result<(), pm_client::Error> {
/// use std::time::Duration;
/// use pm_client::{Client, RetryPolicy};
///
/// let client = Client::builder("http://127.0.0.1:8080")
///     .token("ingress-token")
///     .timeout(Duration::from_secs(10))
///     .retry(RetryPolicy::default().max_attempts(5))
///     .build()?;
/// assert_eq!(client.base_url(), "http://127.0.0.1:8080");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.inner.base)
            .field("token", &self.inner.token.as_ref().map(|_| "…"))
            .field("timeout", &self.inner.timeout)
            .field("retry", &self.inner.retry)
            .finish()
    }
}

impl Client {
    /// A builder for a service at `base_url` (e.g. `http://127.0.0.1:8080`; a path prefix
    /// such as `https://gateway/pm` is kept).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            token: None,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            stream_idle_timeout: Duration::from_secs(45),
            retry: RetryPolicy::default(),
            idempotency_keys: true,
        }
    }

    /// A client with the defaults and no token.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a URL that is not `http(s)://…`.
    pub fn new(base_url: impl Into<String>) -> Result<Self, Error> {
        Self::builder(base_url).build()
    }

    /// A client for `PM_URL` (default [`DEFAULT_URL`]) with the bearer token `PM_TOKEN`
    /// (none when unset or empty).
    ///
    /// # Errors
    /// As [`ClientBuilder::build`].
    pub fn from_env() -> Result<Self, Error> {
        let url = std::env::var("PM_URL").unwrap_or_else(|_| DEFAULT_URL.to_string());
        let mut builder = Self::builder(url);
        if let Some(token) = std::env::var("PM_TOKEN").ok().filter(|t| !t.is_empty()) {
            builder = builder.token(token);
        }
        builder.build()
    }

    /// The service's base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.inner.base
    }
}

/// Configures a [`Client`]; see [`Client::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientBuilder {
    base: String,
    token: Option<String>,
    timeout: Duration,
    connect_timeout: Duration,
    stream_idle_timeout: Duration,
    retry: RetryPolicy,
    idempotency_keys: bool,
}

impl ClientBuilder {
    /// Sends `Authorization: Bearer <token>` (the token decides the role).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The limit of one attempt of a request, answer included (default 30 s; keep it above
    /// the 5 s a `min_position` read may wait). Event streams have no such limit.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The limit for opening a connection (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long an event stream may stay silent before the follower treats the connection
    /// as dead and reconnects (default 45 s; the service sends a keep-alive every 15 s).
    pub fn stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.stream_idle_timeout = timeout;
        self
    }

    /// Retries of failed calls (default [`RetryPolicy::default`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Whether commands without a key of their own
    /// ([`CommandRequest::idempotency_key`](crate::CommandRequest::idempotency_key)) get a
    /// generated one (default `true`). With `false` they carry none and are **never
    /// retried** — a retry could run them twice — which suits callers whose commands are
    /// idempotent by their derived ids (an ingress service keying actors, conversations and
    /// messages by external identities), and spares the service the key's bookkeeping.
    pub fn idempotency_keys(mut self, on: bool) -> Self {
        self.idempotency_keys = on;
        self
    }

    /// The client.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a URL that is not `http(s)://…` or a token that cannot
    /// be a header value; [`Error::Transport`] when the HTTP stack cannot start.
    pub fn build(self) -> Result<Client, Error> {
        let url = reqwest::Url::parse(&self.base)
            .map_err(|e| Error::InvalidInput(format!("base URL {:?}: {e}", self.base)))?;
        if !matches!(url.scheme(), "http" | "https") || url.query().is_some() {
            return Err(Error::InvalidInput(format!(
                "base URL {:?}: expected http(s)://host[:port][/prefix]",
                self.base
            )));
        }
        if url.scheme() == "https" && !cfg!(feature = "rustls-tls") {
            return Err(Error::InvalidInput(format!(
                "base URL {:?}: https needs pm-client's `rustls-tls` feature",
                self.base
            )));
        }
        let token = self
            .token
            .map(|t| {
                let mut value = HeaderValue::from_str(&format!("Bearer {t}"))
                    .map_err(|_| Error::InvalidInput("the token is not a header value".into()))?;
                value.set_sensitive(true);
                Ok::<_, Error>(value)
            })
            .transpose()?;
        let http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .user_agent(concat!("pm-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(Error::from_reqwest)?;
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                base: url.as_str().trim_end_matches('/').to_string(),
                token,
                timeout: self.timeout,
                stream_idle_timeout: self.stream_idle_timeout,
                retry: self.retry,
                idempotency_keys: self.idempotency_keys,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_checked_and_normalised() {
        let c = Client::new("http://127.0.0.1:8080/").expect("valid");
        assert_eq!(c.base_url(), "http://127.0.0.1:8080");
        let c = Client::new("http://gw.example/pm/").expect("valid");
        assert_eq!(c.base_url(), "http://gw.example/pm");
        for bad in ["127.0.0.1:8080", "ftp://x", "http://x/?a=b", ""] {
            assert!(
                matches!(Client::new(bad), Err(Error::InvalidInput(_))),
                "{bad:?}"
            );
        }
        let bad_token = Client::builder("http://x").token("a\nb").build();
        assert!(matches!(bad_token, Err(Error::InvalidInput(_))));
    }

    #[test]
    fn debug_hides_the_token() {
        let c = Client::builder("http://x")
            .token("secret")
            .build()
            .expect("valid");
        assert!(!format!("{c:?}").contains("secret"));
    }
}
