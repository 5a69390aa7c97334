//! The one place a bearer credential becomes a [`Principal`]: role tokens and the
//! principals file by their tokens' SHA-256, JWTs by the identity provider's keys.
//!
//! Tokens are never compared as text: the presented token is hashed and its digest looked
//! up, so how long a lookup takes says something only about a digest, which gives nothing
//! away about any token (SHA-256 is preimage resistant).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use super::jwt::{JwtClaims, JwtError, JwtVerifier};
use super::principal::{parse_actors, parse_roles, Principal, Scope, Source};
use super::{digest, file, Digest, Role, Tokens};

/// Why a credential signs nobody in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// No principal has this token.
    #[error("unknown token")]
    UnknownToken,
    /// A JWT that is expired, badly signed, for another issuer or audience, or whose
    /// claims name no acceptable principal (`WWW-Authenticate: Bearer error="invalid_token"`).
    #[error("{0}")]
    InvalidToken(String),
    /// A valid JWT without `pm_roles`: someone the provider knows, but not a principal of
    /// this service.
    #[error("the token carries no pm_roles")]
    NoRoles,
    /// The identity provider's keys cannot be fetched and no cached key fits.
    #[error("{0}")]
    Unavailable(String),
}

/// Every principal the service knows.
pub struct Authenticator {
    role_tokens: Tokens,
    /// One principal per role, shared by its tokens and the console's sessions.
    by_role: HashMap<Role, Arc<Principal>>,
    role_principals: HashMap<Digest, Arc<Principal>>,
    file: Option<PathBuf>,
    /// Role tokens and the file's principals together, swapped whole on a reload.
    by_digest: RwLock<Arc<HashMap<Digest, Arc<Principal>>>>,
    jwt: Option<JwtVerifier>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("role_tokens", &self.role_tokens)
            .field("file", &self.file)
            .field("jwt", &self.jwt.is_some())
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// The principals of `role_tokens`, of the principals file at `file` (read now), and of
    /// the identity provider behind `jwt`.
    ///
    /// # Errors
    /// The principals file's error, naming the bad entry.
    pub fn new(
        role_tokens: Tokens,
        file: Option<PathBuf>,
        jwt: Option<JwtVerifier>,
    ) -> Result<Self, String> {
        let by_role: HashMap<_, _> = Role::ALL
            .into_iter()
            .map(|role| (role, Arc::new(Principal::of_role(role))))
            .collect();
        let role_principals: HashMap<Digest, Arc<Principal>> = role_tokens
            .digests()
            .filter_map(|(digest, role)| Some((*digest, by_role.get(&role)?.clone())))
            .collect();
        let this = Self {
            role_tokens,
            by_role,
            role_principals,
            file,
            by_digest: RwLock::new(Arc::default()),
            jwt,
        };
        this.reload()?;
        Ok(this)
    }

    /// Whether no principal is configured (open mode: loopback only, everyone is `open`).
    pub fn is_open(&self) -> bool {
        self.role_tokens.is_empty() && self.file.is_none() && self.jwt.is_none()
    }

    /// The role tokens (the console's cookies are keyed by them).
    pub fn role_tokens(&self) -> &Tokens {
        &self.role_tokens
    }

    /// The principal of `role`'s tokens (a console session signed in with one is it).
    pub fn of_role(&self, role: Role) -> Arc<Principal> {
        self.by_role
            .get(&role)
            .cloned()
            .unwrap_or_else(|| Arc::new(Principal::of_role(role)))
    }

    /// Reads the principals file again (on `SIGHUP`); returns how many tokens are known.
    /// A bad file changes nothing: the principals stay as they were.
    ///
    /// # Errors
    /// The file's error, naming the bad entry.
    pub fn reload(&self) -> Result<usize, String> {
        let mut all = self.role_principals.clone();
        if let Some(path) = &self.file {
            for (digest, principal) in file::load(path)? {
                if all.insert(digest, principal).is_some() {
                    return Err(format!(
                        "{}: a token of the file is also a token of PM_AUTH_TOKENS",
                        path.display()
                    ));
                }
            }
        }
        let count = all.len();
        match self.by_digest.write() {
            Ok(mut current) => *current = Arc::new(all),
            // A panic while swapping an Arc leaves nothing half-written.
            Err(poisoned) => *poisoned.into_inner() = Arc::new(all),
        }
        Ok(count)
    }

    /// The principal of a bearer credential.
    ///
    /// # Errors
    /// [`AuthFailure`].
    pub async fn authenticate(&self, credential: &str) -> Result<Arc<Principal>, AuthFailure> {
        let known = {
            let current = match self.by_digest.read() {
                Ok(current) => current.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            };
            current.get(&digest(credential)).cloned()
        };
        if let Some(principal) = known {
            return Ok(principal);
        }
        match &self.jwt {
            Some(verifier) if JwtVerifier::looks_like_jwt(credential) => {
                let claims = verifier.verify(credential).await.map_err(|e| match e {
                    JwtError::Unavailable(detail) => AuthFailure::Unavailable(detail),
                    other => AuthFailure::InvalidToken(other.to_string()),
                })?;
                principal_of(claims).map(Arc::new)
            }
            _ => Err(AuthFailure::UnknownToken),
        }
    }
}

/// The principal a verified JWT names.
fn principal_of(claims: JwtClaims) -> Result<Principal, AuthFailure> {
    let invalid = |e: String| AuthFailure::InvalidToken(format!("the token's claims: {e}"));
    let roles = claims.roles.ok_or(AuthFailure::NoRoles)?;
    let roles: BTreeSet<_> = parse_roles(&roles).map_err(invalid)?;
    if roles.is_empty() {
        return Err(AuthFailure::NoRoles);
    }
    Principal::new(
        &claims.sub,
        roles,
        Scope::parse(&claims.organizations).map_err(invalid)?,
        claims
            .actors
            .as_deref()
            .map(parse_actors)
            .transpose()
            .map_err(invalid)?,
        Source::Jwt,
    )
    .map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    fn claims(sub: &str, roles: Option<&[&str]>) -> JwtClaims {
        JwtClaims {
            sub: sub.into(),
            roles: roles.map(|r| r.iter().map(|s| s.to_string()).collect()),
            organizations: vec!["acme".into()],
            actors: None,
        }
    }

    #[test]
    fn given_jwt_claims_when_read_then_a_principal_of_the_provider() {
        let p = principal_of(claims("alice@acme", Some(&["ingress", "analyst"]))).expect("valid");
        assert_eq!(p.name(), "alice@acme");
        assert!(p.has(Role::Ingress) && p.has(Role::Analyst));
        assert_eq!(p.source(), Source::Jwt);
    }

    #[test]
    fn given_jwt_claims_without_pm_roles_when_read_then_no_roles() {
        assert_eq!(principal_of(claims("a", None)), Err(AuthFailure::NoRoles));
        assert_eq!(
            principal_of(claims("a", Some(&[]))),
            Err(AuthFailure::NoRoles)
        );
    }

    #[test]
    fn given_jwt_claims_naming_the_system_when_read_then_invalid() {
        let refused = principal_of(claims("system", Some(&["admin"])));
        assert!(matches!(refused, Err(AuthFailure::InvalidToken(_))));
        let refused = principal_of(claims("a", Some(&["root"])));
        assert!(matches!(refused, Err(AuthFailure::InvalidToken(_))));
    }

    #[tokio::test]
    async fn given_role_tokens_when_authenticated_then_each_is_its_roles_principal() {
        let auth = Authenticator::new(
            Tokens::parse("llm:llm-token-1,llm:llm-token-2").expect("valid"),
            None,
            None,
        )
        .expect("valid");
        let one = auth.authenticate("llm-token-1").await.expect("known");
        let two = auth.authenticate("llm-token-2").await.expect("known");
        assert_eq!(one.name(), "llm");
        assert!(Arc::ptr_eq(&one, &two));
        assert_eq!(
            auth.authenticate("llm-token-3").await,
            Err(AuthFailure::UnknownToken)
        );
        assert!(!auth.is_open());
        let none = Authenticator::new(Tokens::default(), None, None).expect("valid");
        assert!(none.is_open());
    }
}
