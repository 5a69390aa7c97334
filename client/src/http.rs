//! One HTTP exchange with retries: a [`Call`] is sent until it succeeds, fails for good,
//! or the [`RetryPolicy`] gives up; error answers become [`Error`]s.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::error::Problem;
use crate::retry::{jitter, parse_retry_after};
use crate::{Error, RetryPolicy};

/// What a [`Client`](crate::Client) shares between its clones.
pub(crate) struct Inner {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) token: Option<HeaderValue>,
    pub(crate) timeout: Duration,
    pub(crate) stream_idle_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) idempotency_keys: bool,
}

/// A request, sent identically on every attempt.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: Vec<(&'static str, String)>,
    pub(crate) body: Option<Vec<u8>>,
    pub(crate) headers: HeaderMap,
    /// Which failures may be retried.
    pub(crate) retries: Retries,
    /// The limit of one attempt instead of the client's (a long-poll waits longer).
    pub(crate) timeout: Option<Duration>,
}

/// Which failures of a [`Call`] the [`RetryPolicy`] may retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retries {
    /// Every retryable failure ([`crate::is_retryable`]): the call is safe to repeat.
    Retryable,
    /// Only a failure to connect, when the request surely never reached the service: a
    /// repeat of a call that did reach it would run it twice (a usage report adds up).
    Unsent,
    /// None (a command without an idempotency key).
    Never,
}

impl Retries {
    /// Whether `error` may be retried under this rule (the policy decides the rest).
    fn allow(self, error: &Error) -> bool {
        match self {
            Self::Retryable => true,
            Self::Unsent => matches!(
                error,
                Error::Transport {
                    kind: crate::TransportKind::Connect,
                    ..
                }
            ),
            Self::Never => false,
        }
    }
}

impl Call {
    /// A `GET` of `path` with query parameters.
    pub(crate) fn get(path: String, query: Vec<(&'static str, String)>) -> Self {
        Self {
            method: Method::GET,
            path,
            query,
            body: None,
            headers: HeaderMap::new(),
            retries: Retries::Retryable,
            timeout: None,
        }
    }

    /// A `DELETE` of `path` (safe to repeat: a second one finds nothing).
    pub(crate) fn delete(path: String) -> Self {
        Self {
            method: Method::DELETE,
            ..Self::get(path, Vec::new())
        }
    }

    /// A `PUT` of a JSON body to `path` (safe to repeat: the same state again).
    pub(crate) fn put(path: String, body: Vec<u8>) -> Self {
        Self {
            method: Method::PUT,
            ..Self::post(path, Some(body))
        }
    }

    /// A `POST` of a JSON body to `path`.
    pub(crate) fn post(path: String, body: Option<Vec<u8>>) -> Self {
        Self {
            method: Method::POST,
            path,
            query: Vec::new(),
            body,
            headers: HeaderMap::new(),
            retries: Retries::Retryable,
            timeout: None,
        }
    }
}

/// A successful answer, buffered.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    /// The body as `T`.
    pub(crate) fn json<T: DeserializeOwned>(&self, what: &str) -> Result<T, Error> {
        serde_json::from_slice(&self.body).map_err(|e| Error::decode(what, e))
    }

    /// A header as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `X-Event-Position` of a write's answer, if it has one.
    pub(crate) fn position(&self) -> Result<Option<crate::Position>, Error> {
        self.header("x-event-position")
            .map(crate::Position::new)
            .transpose()
            .map_err(|e| Error::decode("X-Event-Position", e))
    }
}

impl Inner {
    /// A request builder for `call` with the token, without body or timeout.
    pub(crate) fn request(&self, call: &Call) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .request(call.method.clone(), format!("{}{}", self.base, call.path))
            .headers(call.headers.clone());
        if !call.query.is_empty() {
            req = req.query(&call.query);
        }
        if let Some(token) = &self.token {
            req = req.header(AUTHORIZATION, token.clone());
        }
        req
    }

    /// Sends `call` under the retry policy.
    pub(crate) async fn send(&self, call: &Call) -> Result<Answer, Error> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let error = match self.attempt(call).await {
                Ok(answer) => return Ok(answer),
                Err(e) => e,
            };
            if !call.retries.allow(&error) {
                return Err(error);
            }
            match self.retry.decide(attempts, &error, jitter()) {
                Some(delay) => {
                    tracing::debug!(%error, attempts, ?delay, path = %call.path, "retrying");
                    tokio::time::sleep(delay).await;
                }
                None => return Err(error),
            }
        }
    }

    /// One attempt: a success, or the error it ended in.
    async fn attempt(&self, call: &Call) -> Result<Answer, Error> {
        let mut req = self
            .request(call)
            .timeout(call.timeout.unwrap_or(self.timeout))
            .header(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(body) = &call.body {
            req = req
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.clone());
        }
        let response = req.send().await.map_err(Error::from_reqwest)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(Error::from_reqwest)?
            .to_vec();
        let answer = Answer {
            status,
            headers,
            body,
        };
        if (200..300).contains(&status) {
            Ok(answer)
        } else {
            Err(error_answer(&answer))
        }
    }
}

/// An error answer as an [`Error`]: its problem, or the status and the start of the body.
pub(crate) fn error_answer(answer: &Answer) -> Error {
    let retry_after = answer
        .header("retry-after")
        .and_then(|v| parse_retry_after(v, SystemTime::now()));
    match serde_json::from_slice::<Problem>(&answer.body) {
        Ok(mut problem) => {
            problem.retry_after = retry_after;
            Error::Problem(problem)
        }
        Err(_) => {
            let text = String::from_utf8_lossy(&answer.body);
            Error::Status {
                status: answer.status,
                body: text.chars().take(200).collect(),
                retry_after,
            }
        }
    }
}

/// A header value from text the caller gave.
pub(crate) fn header_value(name: &str, raw: &str) -> Result<HeaderValue, Error> {
    HeaderValue::from_str(raw)
        .map_err(|_| Error::InvalidInput(format!("{name} {raw:?} is not a header value")))
}

/// A header name known to be valid.
pub(crate) fn name(raw: &'static str) -> HeaderName {
    HeaderName::from_static(raw)
}

/// Percent-encodes one path segment (names of processors and projections, tool call ids).
pub(crate) fn segment(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str, retry_after: Option<&str>) -> Answer {
        let mut headers = HeaderMap::new();
        if let Some(v) = retry_after {
            headers.insert("retry-after", HeaderValue::from_str(v).expect("value"));
        }
        Answer {
            status,
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn problem_answers_keep_their_code_and_retry_after() {
        let e = error_answer(&answer(
            503,
            r#"{"type":"t","title":"Service Unavailable","status":503,"detail":"d","code":"service_unavailable"}"#,
            Some("2"),
        ));
        assert_eq!(e.code(), Some("service_unavailable"));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
        assert!(e.is_retryable());
    }

    #[test]
    fn other_error_bodies_keep_status_and_text() {
        let e = error_answer(&answer(502, "<html>bad gateway</html>", None));
        assert!(
            matches!(&e, Error::Status { status: 502, body, .. } if body.contains("bad gateway"))
        );
        assert_eq!(e.code(), None);
        assert!(e.is_retryable());
        let long = error_answer(&answer(500, &"x".repeat(1000), None));
        assert!(matches!(long, Error::Status { body, .. } if body.len() == 200));
    }

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("read_model"), "read_model");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
