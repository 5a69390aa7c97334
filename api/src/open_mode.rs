//! Open mode's guard against the browser (TRUST.md "The boundary"): a service with no
//! principals trusts whoever reaches it, so it listens on loopback only — but a web page
//! the developer visits can still reach loopback, by a cross-site request or by a DNS name
//! rebound to 127.0.0.1. So, with no principals: a request whose `Host` is not a loopback
//! name or address, or a write whose `Origin` is not a loopback origin, is `403 forbidden`.
//! (Every body must be `application/json` in every mode — `extract.rs` — so no page can
//! post a "simple" request either.)

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// The middleware: passes everything when principals are configured.
pub async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if !state.auth.is_open() {
        return next.run(req).await;
    }
    if let Err(refused) = check(req.method(), req.headers()) {
        return refused.into_response();
    }
    next.run(req).await
}

/// Whether an open-mode request may pass.
///
/// # Errors
/// `403 forbidden` saying which header is refused.
pub fn check(method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
    let forbidden = |detail: String| ApiError::new(StatusCode::FORBIDDEN, "forbidden", detail);
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !is_loopback_host(host) {
        crate::metrics::refused(crate::metrics::refusal::OPEN_MODE_HOST);
        return Err(forbidden(format!(
            "this service runs open (no principals) and answers only requests to a loopback \
             host, not {:?}",
            crate::error::clip(host)
        )));
    }
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !safe && !is_loopback_origin(origin) {
            crate::metrics::refused(crate::metrics::refusal::OPEN_MODE_ORIGIN);
            return Err(forbidden(format!(
                "this service runs open (no principals) and takes writes only from loopback \
                 origins, not {:?}",
                crate::error::clip(origin)
            )));
        }
    }
    Ok(())
}

/// `localhost`, a name under `.localhost`, or a loopback address, with or without a port.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]:8080`
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
            _ => host,
        },
    };
    let name = name.to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `http(s)://` and a loopback host.
fn is_loopback_origin(origin: &str) -> bool {
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|rest| !rest.contains('/') && is_loopback_host(rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).expect("header"));
        if let Some(o) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(o).expect("header"));
        }
        h
    }

    #[test]
    fn given_loopback_hosts_when_checked_then_they_pass() {
        for host in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8080",
            "app.localhost:3000",
            "127.9.9.9",
        ] {
            assert!(check(&Method::GET, &headers(host, None)).is_ok(), "{host}");
        }
    }

    #[test]
    fn given_other_hosts_when_checked_then_refused_whatever_the_method() {
        for host in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "10.0.0.1:8080",
            "",
            "localhost.evil.example",
        ] {
            let refused = check(&Method::GET, &headers(host, None));
            assert_eq!(
                refused.map_err(|e| e.code).err(),
                Some("forbidden"),
                "{host}"
            );
        }
    }

    #[test]
    fn given_a_write_when_its_origin_is_not_loopback_then_refused_and_reads_pass() {
        let evil = headers("127.0.0.1:8080", Some("https://evil.example"));
        assert!(check(&Method::POST, &evil).is_err());
        assert!(check(&Method::DELETE, &evil).is_err());
        assert!(
            check(&Method::GET, &evil).is_ok(),
            "a read shows nothing to a cross-site page"
        );
        let null = headers("127.0.0.1:8080", Some("null"));
        assert!(
            check(&Method::POST, &null).is_err(),
            "a sandboxed page's origin"
        );
        for origin in [
            "http://127.0.0.1:8080",
            "http://localhost:3000",
            "https://[::1]",
        ] {
            assert!(
                check(&Method::POST, &headers("127.0.0.1:8080", Some(origin))).is_ok(),
                "{origin}"
            );
        }
        assert!(
            check(&Method::POST, &headers("127.0.0.1:8080", None)).is_ok(),
            "not a browser"
        );
    }
}
