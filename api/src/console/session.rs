//! Console sessions: a token exchanged for a signed cookie, so no token sits in a URL, a
//! script or the browser's storage.
//!
//! The cookie is signed — `v2.<role>.<expires>.<kid>.<id>.<mac>`, the MAC an HMAC-SHA256
//! keyed by a hash of the token it was signed in with, `kid` naming that token by another
//! hash, `id` the session's own random name — so every replica with the same
//! `PM_AUTH_TOKENS` accepts it without a session table, and removing the token from the
//! configuration ends every session made with it. Signing out records the session's `id`
//! in the database (`console_signouts`), which every replica consults: a cookie copied
//! before the sign-out is refused everywhere from then on. No session outlives
//! `PM_CONSOLE_SESSION_SECS`: its expiry is signed, and one further away than the setting
//! now allows (it was lowered) is refused as expired. Writes made with the cookie also
//! carry `X-CSRF-Token`, a second MAC the page reads from `GET /console/session` (a
//! cross-site page can neither read it nor, with `SameSite=Strict`, send the cookie).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::auth::{Role, Tokens};

/// The cookie's name.
pub const COOKIE: &str = "pm_console";

/// The header a cookie-authenticated write carries.
pub const CSRF_HEADER: &str = "x-csrf-token";

type HmacSha256 = Hmac<Sha256>;

/// A signed-in console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    /// The role of the token it was made with (admin or analyst).
    pub role: Role,
    /// Unix seconds when it ends.
    pub expires: i64,
    /// What writes must send in [`CSRF_HEADER`].
    pub csrf: String,
    /// The session's own name: what a sign-out records.
    pub id: String,
}

/// Why a cookie does not sign anyone in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// Not a cookie this service made, or its token is no longer configured.
    #[error("the console session is not valid; sign in again")]
    Invalid,
    /// Past its expiry.
    #[error("the console session expired; sign in again")]
    Expired,
}

fn key(token: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"pm-console-session\0")
        .chain_update(token.as_bytes())
        .finalize()
        .into()
}

fn kid(token: &str) -> String {
    let digest = Sha256::new()
        .chain_update(b"pm-console-kid\0")
        .chain_update(token.as_bytes())
        .finalize();
    URL_SAFE_NO_PAD.encode(&digest[..9])
}

fn mac(key: &[u8; 32], message: &str) -> HmacSha256 {
    // HMAC takes keys of every length.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts 32-byte keys"),
    };
    mac.update(message.as_bytes());
    mac
}

fn csrf(key: &[u8; 32], signature: &str) -> String {
    let tag = mac(key, &format!("csrf.{signature}"))
        .finalize()
        .into_bytes();
    URL_SAFE_NO_PAD.encode(tag)
}

/// The cookie value of a new session for `token` (of `role`) that ends at `expires`.
pub fn issue(token: &str, role: Role, expires: i64) -> (String, ConsoleSession) {
    let key = key(token);
    let id = uuid::Uuid::new_v4().simple().to_string();
    let payload = format!("v2.{role}.{expires}.{}.{id}", kid(token));
    let signature = URL_SAFE_NO_PAD.encode(mac(&key, &payload).finalize().into_bytes());
    let session = ConsoleSession {
        role,
        expires,
        csrf: csrf(&key, &signature),
        id,
    };
    (format!("{payload}.{signature}"), session)
}

/// The session a cookie value stands for at `now` (Unix seconds), when sessions last at
/// most `longest` seconds (`PM_CONSOLE_SESSION_SECS`). Whether it was signed out is the
/// database's to say.
///
/// # Errors
/// [`SessionError`].
pub fn verify(
    tokens: &Tokens,
    value: &str,
    now: i64,
    longest: i64,
) -> Result<ConsoleSession, SessionError> {
    let mut parts = value.split('.');
    let (Some("v2"), Some(role), Some(expires), Some(kid_part), Some(id), Some(signature), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(SessionError::Invalid);
    };
    let role: Role = role.parse().map_err(|_| SessionError::Invalid)?;
    let expires: i64 = expires.parse().map_err(|_| SessionError::Invalid)?;
    let tag = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| SessionError::Invalid)?;
    let payload = format!("v2.{role}.{expires}.{kid_part}.{id}");
    let token = tokens
        .iter()
        .find(|(token, token_role)| *token_role == role && kid(token) == kid_part)
        .map(|(token, _)| token)
        .ok_or(SessionError::Invalid)?;
    let key = key(token);
    // `verify_slice` compares in constant time.
    mac(&key, &payload)
        .verify_slice(&tag)
        .map_err(|_| SessionError::Invalid)?;
    if expires <= now || expires > now.saturating_add(longest) {
        return Err(SessionError::Expired);
    }
    Ok(ConsoleSession {
        role,
        expires,
        csrf: csrf(&key, signature),
        id: id.to_string(),
    })
}

impl ConsoleSession {
    /// Whether `shown` is this session's CSRF token (compared in constant time: a timing
    /// answer must not spell the token out).
    pub fn csrf_matches(&self, shown: &str) -> bool {
        shown.len() == self.csrf.len()
            && shown
                .bytes()
                .zip(self.csrf.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'h>(header: &'h str, name: &str) -> Option<&'h str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The console's cookie among a request's `Cookie` headers.
pub fn from_headers(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|h| cookie(h, COOKIE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        Tokens::parse("admin:admin-token-1,analyst:analyst-token-1,llm:llm-token-1")
            .expect("tokens")
    }

    #[test]
    fn given_an_issued_cookie_when_verified_then_it_names_its_role_until_it_expires() {
        let (cookie, issued) = issue("admin-token-1", Role::Admin, 1_000);
        let session = verify(&tokens(), &cookie, 999, 3_600).expect("valid");
        assert_eq!(session, issued);
        assert_eq!(session.role, Role::Admin);
        assert_eq!(
            verify(&tokens(), &cookie, 1_000, 3_600),
            Err(SessionError::Expired)
        );
        assert!(
            !cookie.contains("admin-token-1"),
            "the token is not in the cookie"
        );
    }

    #[test]
    fn given_a_tampered_or_orphaned_cookie_when_verified_then_it_is_invalid() {
        let (cookie, _) = issue("analyst-token-1", Role::Analyst, 1_000);
        let promoted = cookie.replacen("analyst", "admin", 1);
        assert_eq!(
            verify(&tokens(), &promoted, 0, 3_600),
            Err(SessionError::Invalid)
        );
        let extended = cookie.replacen("1000", "9999", 1);
        assert_eq!(
            verify(&tokens(), &extended, 0, 3_600),
            Err(SessionError::Invalid)
        );
        let rotated = Tokens::parse("analyst:analyst-token-2").expect("tokens");
        assert_eq!(
            verify(&rotated, &cookie, 0, 3_600),
            Err(SessionError::Invalid)
        );
        let renamed = {
            let mut parts: Vec<&str> = cookie.split('.').collect();
            parts[4] = "0123456789abcdef0123456789abcdef";
            parts.join(".")
        };
        assert_eq!(
            verify(&tokens(), &renamed, 0, 3_600),
            Err(SessionError::Invalid)
        );
        for junk in [
            "",
            "v1",
            "v1.admin.1.x.y.z",
            "v2.admin.1000.abc.def",
            "v2.admin.1000.a.b.c.d",
        ] {
            assert_eq!(
                verify(&tokens(), junk, 0, 3_600),
                Err(SessionError::Invalid),
                "{junk}"
            );
        }
    }

    #[test]
    fn given_a_lowered_session_length_when_an_older_cookie_is_verified_then_it_expired() {
        let (cookie, _) = issue("admin-token-1", Role::Admin, 10_000);
        assert!(verify(&tokens(), &cookie, 1_000, 9_000).is_ok());
        assert_eq!(
            verify(&tokens(), &cookie, 1_000, 600),
            Err(SessionError::Expired),
            "a session never outlives PM_CONSOLE_SESSION_SECS, even one issued under a longer one"
        );
    }

    #[test]
    fn given_two_sessions_when_compared_then_their_csrf_tokens_differ() {
        let (_, a) = issue("admin-token-1", Role::Admin, 1_000);
        let (_, b) = issue("admin-token-1", Role::Admin, 1_000);
        assert_ne!(a.csrf, b.csrf);
        assert_ne!(a.id, b.id);
        assert!(a.csrf_matches(&a.csrf.clone()));
        assert!(!a.csrf_matches(&b.csrf) && !a.csrf_matches(""));
        assert_eq!(cookie("a=1; pm_console=v1.x; b=2", COOKIE), Some("v1.x"));
        assert_eq!(cookie("a=1", COOKIE), None);
    }
}
