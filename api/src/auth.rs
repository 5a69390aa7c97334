//! Bearer tokens per role (`PM_AUTH_TOKENS=role:token,…`) and what each role may do.
//! With no tokens configured the service runs open (and only on loopback).

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};

use crate::error::ApiError;
use crate::state::AppState;

/// A caller's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Ingress services: register actors, start conversations, add messages.
    Ingress,
    /// The LLM service: messages, checkpoints, tasks, task checkpoints.
    Llm,
    /// Analysts: every GET and the event stream.
    Analyst,
    /// Operators: everything.
    Admin,
}

impl Role {
    /// The role's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Llm => "llm",
            Self::Analyst => "analyst",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ingress" => Ok(Self::Ingress),
            "llm" => Ok(Self::Llm),
            "analyst" => Ok(Self::Analyst),
            "admin" => Ok(Self::Admin),
            other => Err(format!(
                "unknown role {other:?} (roles: ingress, llm, analyst, admin)"
            )),
        }
    }
}

/// The configured tokens.
#[derive(Clone, Default)]
pub struct Tokens(HashMap<String, Role>);

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tokens({} configured)", self.0.len())
    }
}

impl Tokens {
    /// Parses `role:token,role:token,…` (empty = none).
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut tokens = HashMap::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (role, token) = entry
                .split_once(':')
                .ok_or_else(|| "entries must look like role:token".to_string())?;
            let role: Role = role.trim().parse()?;
            let token = token.trim();
            if token.len() < 8 {
                return Err(format!("the {role} token is shorter than 8 characters"));
            }
            if tokens.insert(token.to_string(), role).is_some() {
                return Err(format!(
                    "a token is configured twice (second time for {role})"
                ));
            }
        }
        Ok(Self(tokens))
    }

    /// Whether no token is configured (open mode).
    pub fn is_open(&self) -> bool {
        self.0.is_empty()
    }

    /// The role of `token`, if it is configured.
    pub fn role_of(&self, token: &str) -> Option<Role> {
        self.0.get(token).copied()
    }

    /// Every configured token with its role.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Role)> {
        self.0.iter().map(|(token, role)| (token.as_str(), *role))
    }
}

/// The authenticated caller: a role, or `None` in open mode (no tokens configured).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller(pub Option<Role>);

impl Caller {
    /// The role recorded in facts' metadata.
    pub fn role_name(self) -> &'static str {
        self.0.map_or("open", Role::as_str)
    }

    /// `403 forbidden` unless the caller has one of `allowed` (admin always may).
    ///
    /// # Errors
    /// [`ApiError`] 403.
    pub fn require(self, allowed: &[Role]) -> Result<Self, ApiError> {
        match self.0 {
            None | Some(Role::Admin) => Ok(self),
            Some(role) if allowed.contains(&role) => Ok(self),
            Some(role) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("the {role} role may not do this"),
            )),
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(*caller);
        }
        let caller = authenticate(parts, &state.tokens)?;
        parts.extensions.insert(caller);
        Ok(caller)
    }
}

fn authenticate(parts: &Parts, tokens: &Tokens) -> Result<Caller, ApiError> {
    if tokens.is_open() {
        return Ok(Caller(None));
    }
    let unauthorized =
        |detail: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", detail);
    let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
        return match crate::console::session::from_headers(&parts.headers) {
            Some(cookie) => console_caller(parts, tokens, cookie),
            None => Err(unauthorized("missing Authorization: Bearer <token>")),
        };
    };
    // The scheme name is case-insensitive (RFC 9110 §11.1).
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token)
        .ok_or_else(|| unauthorized("Authorization must be Bearer <token>"))?;
    tokens
        .role_of(token.trim())
        .map(|role| Caller(Some(role)))
        .ok_or_else(|| unauthorized("unknown token"))
}

/// The caller of a console request (the browser, signed in with a cookie): its role, once
/// a write also shows the session's CSRF token.
fn console_caller(parts: &Parts, tokens: &Tokens, cookie: &str) -> Result<Caller, ApiError> {
    use crate::console::session::{verify, CSRF_HEADER};
    let now = chrono::Utc::now().timestamp();
    let session = verify(tokens, cookie, now)
        .map_err(|e| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", e.to_string()))?;
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
    Ok(Caller(Some(session.role)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_roles_and_reject_bad_entries() {
        let t = Tokens::parse("ingress:aaaaaaaa, llm:bbbbbbbb").expect("valid");
        assert_eq!(t.role_of("aaaaaaaa"), Some(Role::Ingress));
        assert_eq!(t.role_of("bbbbbbbb"), Some(Role::Llm));
        assert!(Tokens::parse("").expect("empty").is_open());
        assert!(Tokens::parse("boss:aaaaaaaa").is_err());
        assert!(Tokens::parse("ingress").is_err());
        assert!(Tokens::parse("ingress:short").is_err());
        assert!(Tokens::parse("ingress:aaaaaaaa,llm:aaaaaaaa").is_err());
    }

    #[test]
    fn admin_and_open_mode_may_do_everything_others_only_theirs() {
        assert!(Caller(None).require(&[Role::Llm]).is_ok());
        assert!(Caller(Some(Role::Admin)).require(&[Role::Llm]).is_ok());
        assert!(Caller(Some(Role::Llm)).require(&[Role::Llm]).is_ok());
        let denied = Caller(Some(Role::Analyst)).require(&[Role::Llm]);
        assert_eq!(denied.map_err(|e| e.code), Err("forbidden"));
    }
}
