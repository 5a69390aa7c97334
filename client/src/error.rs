//! [`Error`]: everything a call can fail with, and the service's problem details.

use std::time::Duration;

use serde::Deserialize;

/// A boxed error cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a call failed.
///
/// The service's refusals are [`Error::Problem`], with the stable machine
/// [`code`](Error::code) of docs/API.md (compare with the constants in
/// [`codes`](crate::codes)). Whether the client retried before giving up follows
/// [`Error::is_retryable`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The service answered an RFC 9457 problem (`application/problem+json`).
    #[error("{0}")]
    Problem(Problem),
    /// An error status whose body is not a problem (e.g. from a proxy in between).
    #[error("HTTP {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the body, for people.
        body: String,
        /// The `Retry-After` the answer carried.
        retry_after: Option<Duration>,
    },
    /// No answer: the connection failed, broke, or the request timed out.
    #[error("{kind} error: {source}")]
    Transport {
        /// Connect, timeout or other.
        kind: TransportKind,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// An answer that is not what the endpoint promises (a body that does not parse).
    #[error("unexpected answer ({what}): {reason}")]
    Decode {
        /// What was being read.
        what: String,
        /// The parser's message.
        reason: String,
    },
    /// The call cannot be made as given (a bad base URL, an invalid idempotency key, an
    /// empty text); nothing was sent.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Kinds of [`Error::Transport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportKind {
    /// The connection could not be made.
    Connect,
    /// The request (or a read of an event stream) timed out.
    Timeout,
    /// The connection broke, or another I/O failure.
    Other,
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Connect => "connect",
            Self::Timeout => "timeout",
            Self::Other => "transport",
        })
    }
}

/// An RFC 9457 problem answer of the service.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Problem {
    /// The HTTP status.
    pub status: u16,
    /// The stable machine code (snake_case), e.g. `conversation_not_found`.
    pub code: String,
    /// A short summary of the problem type.
    #[serde(default)]
    pub title: String,
    /// What went wrong in this request (names the field or parameter when one is bad).
    #[serde(default)]
    pub detail: String,
    /// A URI naming the problem type.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The answer's `Retry-After` header, if any.
    #[serde(skip)]
    pub retry_after: Option<Duration>,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.detail)
    }
}

impl Error {
    /// The problem's machine code (`None` unless the service answered a problem).
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Problem(p) => Some(&p.code),
            _ => None,
        }
    }

    /// The problem, when the service answered one.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Self::Problem(p) => Some(p),
            _ => None,
        }
    }

    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Problem(p) => Some(p.status),
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// `404`: the path names nothing (or nothing yet: reads trail writes, see
    /// [`Client::after`](crate::Client::after)).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// `409`: the command conflicts with what exists.
    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// `401` or `403`: the token is missing, unknown, or its role may not do this.
    pub fn is_auth(&self) -> bool {
        matches!(self.status(), Some(401 | 403))
    }

    /// Whether the client retries this failure (see [`RetryPolicy`](crate::RetryPolicy)):
    /// `502`, `503`, `504` and transport failures; never a `4xx`, never a `500`.
    pub fn is_retryable(&self) -> bool {
        crate::retry::is_retryable(self)
    }

    /// The `Retry-After` of an error answer.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Problem(p) => p.retry_after,
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A [`Error::Decode`].
    pub(crate) fn decode(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Self::Decode {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// Classifies a reqwest failure.
    pub(crate) fn from_reqwest(e: reqwest::Error) -> Self {
        if e.is_builder() {
            return Self::InvalidInput(e.to_string());
        }
        let kind = if e.is_timeout() {
            TransportKind::Timeout
        } else if e.is_connect() {
            TransportKind::Connect
        } else {
            TransportKind::Other
        };
        Self::Transport {
            kind,
            source: Box::new(e),
        }
    }
}

impl From<pm_domain::text::TextError> for Error {
    fn from(e: pm_domain::text::TextError) -> Self {
        Self::InvalidInput(format!("text {e}"))
    }
}

impl From<crate::position::InvalidPosition> for Error {
    fn from(e: crate::position::InvalidPosition) -> Self {
        Self::InvalidInput(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(status: u16, code: &str) -> Error {
        Error::Problem(Problem {
            status,
            code: code.into(),
            title: String::new(),
            detail: "d".into(),
            kind: String::new(),
            retry_after: None,
        })
    }

    #[test]
    fn helpers_read_the_problem() {
        let e = problem(404, crate::codes::TASK_NOT_FOUND);
        assert_eq!(e.code(), Some("task_not_found"));
        assert_eq!(e.status(), Some(404));
        assert!(e.is_not_found() && !e.is_conflict() && !e.is_auth());
        assert!(problem(409, "already_exists").is_conflict());
        assert!(problem(403, "forbidden").is_auth());
        let other = Error::InvalidInput("x".into());
        assert_eq!((other.code(), other.status()), (None, None));
    }

    #[test]
    fn problem_bodies_parse_with_or_without_optional_members() {
        let full = r#"{"type":"https://x/p","title":"Not Found","status":404,"detail":"d","code":"conversation_not_found"}"#;
        let p: Problem = serde_json::from_str(full).expect("parses");
        assert_eq!((p.status, p.code.as_str()), (404, "conversation_not_found"));
        assert_eq!(p.kind, "https://x/p");
        let bare: Problem =
            serde_json::from_str(r#"{"status":503,"code":"projection_lagging"}"#).expect("parses");
        assert_eq!(bare.detail, "");
        assert_eq!(
            problem(422, "validation_failed").to_string(),
            "422 validation_failed: d"
        );
    }
}
