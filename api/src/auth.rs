//! Who is asking (TRUST.md "Principals"): every request is a [`Principal`], from a role
//! token (`PM_AUTH_TOKENS`), the principals file (`PM_PRINCIPALS_FILE`, reloaded on
//! `SIGHUP`) or an identity provider's JWT (`PM_JWT_*`), or the console's cookie. With
//! none configured the service runs open (and only on loopback), and everyone is `open`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ConnectInfo;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use sha2::{Digest as _, Sha256};

use crate::error::ApiError;
use crate::state::AppState;

mod directory;
mod file;
pub mod jwt;
pub mod principal;
mod role;
mod throttle;
mod tokens;

pub use directory::{AuthFailure, Authenticator};
pub use principal::{Principal, Scope, Source};
pub use role::Role;
pub use throttle::Throttle;
pub use tokens::Tokens;

/// The SHA-256 of a token: how the service knows tokens without comparing them as text.
pub type Digest = [u8; 32];

/// The digest of `token`.
pub fn digest(token: &str) -> Digest {
    Sha256::digest(token.as_bytes()).into()
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub Arc<Principal>);

impl Caller {
    /// The principal.
    pub fn principal(&self) -> &Principal {
        &self.0
    }

    /// The organizations it may see: what every list, log read and claim of its requests
    /// is limited to.
    pub fn scope(&self) -> &pm_application::scope::Scope {
        self.0.organizations()
    }

    /// `403 forbidden` unless the caller has one of `allowed` (admin always may).
    ///
    /// # Errors
    /// [`ApiError`] 403.
    pub fn require(&self, allowed: &[Role]) -> Result<&Self, ApiError> {
        if self.0.has(Role::Admin) || allowed.iter().any(|r| self.0.has(*r)) {
            return Ok(self);
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("the role {} may not do this", self.0.role_label()),
        ))
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let address = peer(parts);
        state.throttle.admit(address)?;
        let caller = authenticate(parts, state).await;
        if let Err(e) = &caller {
            if counts_as_a_guess(parts, e) {
                state.throttle.refused(address);
            }
        }
        let caller = caller?;
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}

/// The address a request came from (the server puts it in every request's extensions).
pub fn peer(parts: &Parts) -> Option<std::net::IpAddr> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// Whether a refusal was a credential that was presented and failed (a guess), not a
/// request that brought none or a principal its roles do not allow.
fn counts_as_a_guess(parts: &Parts, e: &ApiError) -> bool {
    e.status == StatusCode::UNAUTHORIZED
        && (parts.headers.contains_key(header::AUTHORIZATION)
            || crate::console::session::from_headers(&parts.headers).is_some())
}

/// The open-mode caller, made once.
fn open_caller() -> Caller {
    static OPEN: std::sync::LazyLock<Arc<Principal>> =
        std::sync::LazyLock::new(|| Arc::new(Principal::open()));
    Caller(OPEN.clone())
}

async fn authenticate(parts: &Parts, state: &AppState) -> Result<Caller, ApiError> {
    let auth = &state.auth;
    if auth.is_open() {
        return Ok(open_caller());
    }
    let unauthorized =
        |detail: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", detail);
    let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
        return match crate::console::session::from_headers(&parts.headers) {
            Some(cookie) => console_caller(parts, state, cookie).await,
            None => Err(unauthorized("missing Authorization: Bearer <token>")),
        };
    };
    // The scheme name is case-insensitive (RFC 9110 §11.1).
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .ok_or_else(|| unauthorized("Authorization must be Bearer <token>"))?;
    auth.authenticate(token)
        .await
        .map(Caller)
        .map_err(|e| match e {
            AuthFailure::UnknownToken => unauthorized("unknown token"),
            AuthFailure::InvalidToken(detail) => ApiError::invalid_token(detail),
            AuthFailure::NoRoles => ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the token carries no pm_roles: it names no principal of this service",
            ),
            AuthFailure::Unavailable(cause) => ApiError::unavailable(cause),
        })
}

/// The caller of a console request (the browser, signed in with a cookie): the principal
/// of the role token it signed in with, once a write also shows the session's CSRF token.
async fn console_caller(parts: &Parts, state: &AppState, cookie: &str) -> Result<Caller, ApiError> {
    use crate::console::session::CSRF_HEADER;
    let session = crate::console::signed_in(state, cookie).await?;
    let safe = matches!(parts.method.as_str(), "GET" | "HEAD" | "OPTIONS");
    let shown = parts.headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    let matches = shown.is_some_and(|shown| session.csrf_matches(shown));
    if !safe && !matches {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "csrf_token_invalid",
            "a write with the console's session cookie needs its X-CSRF-Token header",
        ));
    }
    Ok(Caller(state.auth.of_role(session.role)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_roles_when_required_then_admin_and_open_may_do_everything_others_only_theirs() {
        let of = |role| Caller(Arc::new(Principal::of_role(role)));
        assert!(open_caller().require(&[Role::Llm]).is_ok());
        assert!(of(Role::Admin).require(&[Role::Llm]).is_ok());
        assert!(of(Role::Llm).require(&[Role::Llm]).is_ok());
        let analyst = of(Role::Analyst);
        let denied = analyst.require(&[Role::Llm]);
        assert_eq!(denied.map_err(|e| e.code).err(), Some("forbidden"));
    }
}
