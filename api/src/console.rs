//! The operator console (`/console`, issue 19): a page of HTML, CSS and ES modules
//! embedded in the binary (nothing fetched at build or run time), which reads and steers
//! the service through the same HTTP API and event stream as every other client —
//! authenticated by a session cookie instead of a bearer token ([`session`]).
//!
//! - `GET /console`: the page; `GET /console/assets/{name}`: its scripts and styles.
//! - `POST /console/session` `{"token"}`: signs in (admin, or analyst for reading only);
//!   `GET /console/session`: who is signed in and the CSRF token writes must carry;
//!   `DELETE /console/session`: signs out.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Extension;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::auth::Role;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::state::AppState;

pub mod session;

/// The page.
const INDEX: &str = include_str!("../console/index.html");

/// The page's files: name, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("../console/app.js")),
    ("api.js", JS, include_str!("../console/api.js")),
    ("views.js", JS, include_str!("../console/views.js")),
    ("dom.js", JS, include_str!("../console/dom.js")),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../console/style.css"),
    ),
];

const JS: &str = "text/javascript; charset=utf-8";

/// Only this origin's scripts, styles and connections; never framed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The console's routes (outside the API table: they are not part of `/v1`).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console", get(index))
        .route("/console/", get(index))
        .route("/console/assets/{name}", get(asset))
        .route(
            "/console/session",
            get(current).post(sign_in).delete(sign_out),
        )
}

fn hardened(mut response: Response, cache: &'static str) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}

async fn index() -> Response {
    hardened(
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response(),
        "no-store",
    )
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => hardened(
            ([(header::CONTENT_TYPE, *content_type)], *body).into_response(),
            "no-cache",
        ),
        None => ApiError::not_found("no such console asset").into_response(),
    }
}

/// The body of `POST /console/session`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    /// An admin or analyst token.
    pub token: String,
}

fn answer(role: &str, expires: Option<i64>, csrf: &str) -> Json<serde_json::Value> {
    let expires_at = expires.and_then(|e| chrono::DateTime::from_timestamp(e, 0));
    Json(json!({"role": role, "expires_at": expires_at, "csrf": csrf}))
}

/// The `Set-Cookie` of a session: `Secure` unless the service listens on loopback (a
/// developer's plain `http://127.0.0.1`), and behind a proxy that says it served HTTPS.
fn set_cookie(state: &AppState, value: &str, max_age: i64, headers: &HeaderMap) -> String {
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        session::COOKIE,
        if https || state.console_secure_cookie {
            "; Secure"
        } else {
            ""
        }
    )
}

/// The session a console cookie stands for now: signed by a configured token, not
/// expired, not longer than `PM_CONSOLE_SESSION_SECS` allows, and not signed out on any
/// replica.
///
/// # Errors
/// `401 unauthorized` saying why; `503` when the sign-outs cannot be read.
pub async fn signed_in(
    state: &AppState,
    cookie: &str,
) -> Result<session::ConsoleSession, ApiError> {
    let unauthorized =
        |detail: String| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", detail);
    let longest = i64::try_from(state.console_session_secs).unwrap_or(i64::MAX);
    let now = chrono::Utc::now().timestamp();
    let signed_in = session::verify(state.auth.role_tokens(), cookie, now, longest)
        .map_err(|e| unauthorized(e.to_string()))?;
    if state.console_signouts.signed_out(&signed_in.id).await? {
        return Err(unauthorized(
            "the console session was signed out; sign in again".into(),
        ));
    }
    Ok(signed_in)
}

/// `POST /console/session`: a token for a cookie. JSON only, so a cross-site form cannot
/// sign a browser in with someone else's token.
async fn sign_in(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<SignIn>,
) -> Result<Response, ApiError> {
    if state.auth.is_open() {
        return Ok(answer("open", None, "").into_response());
    }
    let address = peer.map(|Extension(ConnectInfo(a))| a.ip());
    state.throttle.admit(address)?;
    let token = body.token.trim();
    let Some(role) = state.auth.role_tokens().role_of(token) else {
        // Cookies are keyed by the token itself, which the service knows only for
        // PM_AUTH_TOKENS: other principals use the API (and say so, not "unknown").
        return Err(match state.auth.authenticate(token).await {
            Ok(_) => ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the console signs in with the admin and analyst tokens of PM_AUTH_TOKENS; \
                 principals of the principals file or an identity provider use the API",
            ),
            Err(_) => {
                state.throttle.refused(address);
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "unknown token")
            }
        });
    };
    if !matches!(role, Role::Admin | Role::Analyst) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("the console signs in admin and analyst tokens, not {role}"),
        ));
    }
    let ttl = i64::try_from(state.console_session_secs).unwrap_or(i64::MAX);
    let expires = chrono::Utc::now().timestamp().saturating_add(ttl);
    let (cookie, signed_in) = session::issue(token, role, expires);
    let mut response = answer(role.as_str(), Some(expires), &signed_in.csrf).into_response();
    let set = set_cookie(&state, &cookie, ttl, &headers);
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&set).map_err(ApiError::internal)?,
    );
    Ok(hardened(response, "no-store"))
}

/// `GET /console/session`: who is signed in, and the CSRF token; `401` when nobody is.
async fn current(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    if state.auth.is_open() {
        return Ok(answer("open", None, "").into_response());
    }
    let cookie = session::from_headers(&headers)
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "not signed in"))?;
    let signed_in = signed_in(&state, cookie).await?;
    let response = answer(
        signed_in.role.as_str(),
        Some(signed_in.expires),
        &signed_in.csrf,
    );
    Ok(hardened(response.into_response(), "no-store"))
}

/// `DELETE /console/session`: ends the session on every replica (a copy of its cookie is
/// refused from now on) and clears the cookie. Without a valid session there is nothing
/// to end: the cookie is cleared all the same.
async fn sign_out(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    if let Some(cookie) = session::from_headers(&headers) {
        if let Ok(ended) = signed_in(&state, cookie).await {
            let now = chrono::Utc::now().timestamp();
            state
                .console_signouts
                .sign_out(&ended.id, ended.expires, now)
                .await?;
        }
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(clear) = HeaderValue::from_str(&set_cookie(&state, "", 0, &headers)) {
        response.headers_mut().insert(header::SET_COOKIE, clear);
    }
    Ok(response)
}
