//! JWT bearer tokens of an identity provider (TRUST.md "Principals", 3): the provider signs,
//! the service only checks, with the provider's public keys (a JWKS from a URL or a file).
//!
//! Only RS256, ES256 and EdDSA are accepted, and a key is used only for the one algorithm
//! its type allows: the token's header is written by whoever presents it, so it may choose
//! among these three but never make a public key act as an HMAC secret (`HS256`) or skip
//! the signature (`none`). Headers that point elsewhere for keys (`jku`, `jwk`, `x5u`,
//! `x5c`) are ignored for the same reason: keys come only from the configured set.
//!
//! Keys are cached. A token signed by a key the cache does not have (the provider rotated
//! its keys) makes the set be fetched again, at most once per 30 s: anyone can make up a
//! `kid`, and without the limit every such token would be a request to the provider.

use pm_infrastructure::error_chain as chain;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

/// Clock skew between the provider and the service that is still forgiven (TRUST.md).
const LEEWAY_SECONDS: u64 = 60;
/// The least time between two fetches of the set.
const REFRESH_INTERVAL: Duration = Duration::from_secs(30);
/// A provider that does not answer must not hold the requests waiting on it for long.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// A key set is a few kilobytes; anything much larger is not one, and is not read into memory.
const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// The algorithms TRUST.md allows.
const ACCEPTED: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// Where the identity provider's public keys are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// Fetched over HTTP(S) (`PM_JWT_JWKS_URL`): the provider's `jwks_uri`.
    Url(String),
    /// Read from a file (`PM_JWT_JWKS_FILE`): for providers the service cannot reach, or
    /// keys an operator distributes.
    File(PathBuf),
}

/// What the service expects of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    /// The provider's keys.
    pub jwks: JwksSource,
    /// The `iss` a token must carry: tokens of other issuers are not for this service, even
    /// when signed by a key of the set.
    pub issuer: String,
    /// The `aud` a token must carry: tokens the provider issued for other services must
    /// not be replayed here.
    pub audience: String,
}

/// What a verified token says (claims as TRUST.md names them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtClaims {
    /// `sub`: the principal's name.
    pub sub: String,
    /// `pm_roles`: `None` when the token has none — someone the provider knows but who is
    /// not a principal of this service (`403`, not `401`).
    pub roles: Option<Vec<String>>,
    /// `pm_organizations`: empty when the token has none.
    pub organizations: Vec<String>,
    /// `pm_actors`: the actors the principal may speak as, when the provider limits them.
    pub actors: Option<Vec<String>>,
}

/// Why a token is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// The token is malformed, expired, badly signed, for another issuer or audience, of a
    /// refused algorithm, or signed by a key the provider does not have
    /// (`401`, `error="invalid_token"`).
    #[error("{0}")]
    Invalid(String),
    /// The provider's keys cannot be fetched and no cached key fits: the token may well be
    /// good, so this is the service's trouble, not the caller's.
    #[error("{0}")]
    Unavailable(String),
}

/// Checks identity-provider tokens against the provider's keys.
pub struct JwtVerifier {
    source: Source,
    issuer: String,
    audience: String,
    /// Swapped whole on a refresh, so a verification never sees half a set and never waits
    /// for a fetch it does not need.
    keys: RwLock<Arc<KeySet>>,
    /// Held for the length of a refresh: concurrent tokens with an unknown `kid` wait for
    /// the one fetch under way instead of each starting their own.
    refresh: tokio::sync::Mutex<RefreshState>,
    refresh_interval: Duration,
}

impl fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("source", &self.source)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("keys", &self.current().keys.len())
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// Reads a JWKS file at once (error names what is wrong); a URL is fetched at once too,
    /// but a failure at start is only logged (tracing::warn) — keys are fetched again on
    /// demand — so that the service starts while its provider is briefly away.
    ///
    /// # Errors
    /// An empty issuer or audience, a URL that is not an `http(s)` URL, or a file that
    /// cannot be read, is not a key set, or has no key usable for RS256, ES256 or EdDSA.
    pub async fn new(settings: JwtSettings) -> Result<Self, String> {
        if settings.issuer.trim().is_empty() {
            return Err("the JWT issuer is empty".to_owned());
        }
        if settings.audience.trim().is_empty() {
            return Err("the JWT audience is empty".to_owned());
        }
        let source = match settings.jwks {
            JwksSource::File(path) => Source::File(path),
            JwksSource::Url(url) => {
                let parsed = reqwest::Url::parse(&url)
                    .map_err(|e| format!("the JWKS URL {url:?} is not a URL: {e}"))?;
                match parsed.scheme() {
                    "https" => {}
                    "http" if is_loopback(&parsed) => {}
                    "http" => tracing::warn!(
                        url = %parsed,
                        "the JWKS URL is plain HTTP: whoever sits on the path can swap the keys"
                    ),
                    other => {
                        return Err(format!(
                            "the JWKS URL {url:?} is {other}:, not http: or https:"
                        ))
                    }
                }
                let client = reqwest::Client::builder()
                    .timeout(FETCH_TIMEOUT)
                    .build()
                    .map_err(|e| format!("the HTTP client for the JWKS URL: {}", chain(&e)))?;
                Source::Url {
                    url: parsed,
                    client,
                }
            }
        };
        let verifier = Self {
            source,
            issuer: settings.issuer,
            audience: settings.audience,
            keys: RwLock::new(Arc::new(KeySet::default())),
            refresh: tokio::sync::Mutex::new(RefreshState::default()),
            refresh_interval: REFRESH_INTERVAL,
        };
        match verifier.load().await {
            Ok(set) => {
                verifier.store(Arc::new(set));
            }
            Err(e) => match &verifier.source {
                Source::File(_) => return Err(e),
                Source::Url { .. } => {
                    tracing::warn!("{e}; the keys will be fetched when a token needs them");
                }
            },
        }
        Ok(verifier)
    }

    /// Lets tests rotate keys more often than a real provider may make the service fetch.
    #[cfg(test)]
    fn with_refresh_interval(mut self, interval: Duration) -> Self {
        self.refresh_interval = interval;
        self
    }

    /// The claims of `token` if the provider signed it for this service and it has not
    /// expired.
    ///
    /// # Errors
    /// [`JwtError::Invalid`] for a token that is not accepted; [`JwtError::Unavailable`]
    /// when the keys the token needs cannot be fetched.
    pub async fn verify(&self, token: &str) -> Result<JwtClaims, JwtError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| JwtError::Invalid(format!("the token's header: {e}")))?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(JwtError::Invalid(format!(
                "the token's algorithm {:?} is not accepted (RS256, ES256, EdDSA)",
                header.alg
            )));
        }
        // RFC 7515 4.1.11: extensions a recipient does not understand must make it refuse.
        if header.crit.is_some() {
            return Err(JwtError::Invalid(
                "the token's header has critical extensions (crit) the service does not know"
                    .to_owned(),
            ));
        }
        let kid = header.kid.as_deref();
        let seen = self.current();
        let set = match seen.pick(kid, header.alg) {
            Pick::Key(key) => return self.decode(token, key),
            Pick::Refused(why) => return Err(JwtError::Invalid(why)),
            Pick::Missing => self.refresh_after_miss(&seen).await?,
        };
        match set.pick(kid, header.alg) {
            Pick::Key(key) => self.decode(token, key),
            Pick::Refused(why) => Err(JwtError::Invalid(why)),
            Pick::Missing => Err(JwtError::Invalid(match kid {
                Some(kid) => format!("the identity provider has no key {kid:?}"),
                None => "the identity provider's key set has no key".to_owned(),
            })),
        }
    }

    /// Whether a bearer credential looks like a JWT (three base64url segments separated by
    /// dots) — so that opaque tokens are not sent to the verifier.
    ///
    /// The signature may be empty, so that an unsigned token (`alg: none`) is answered as
    /// the bad JWT it is.
    pub fn looks_like_jwt(token: &str) -> bool {
        let base64url = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        let mut parts = token.split('.');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(header), Some(payload), Some(signature), None) => {
                !header.is_empty()
                    && !payload.is_empty()
                    && base64url(header)
                    && base64url(payload)
                    && base64url(signature)
            }
            _ => false,
        }
    }

    fn current(&self) -> Arc<KeySet> {
        // A panic elsewhere cannot have left a half-swapped Arc behind.
        self.keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn store(&self, set: Arc<KeySet>) {
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = set;
    }

    /// The set after a token found no key in `seen`: fetched again unless another request
    /// did so while this one waited, or the last attempt is too recent.
    async fn refresh_after_miss(&self, seen: &Arc<KeySet>) -> Result<Arc<KeySet>, JwtError> {
        let mut state = self.refresh.lock().await;
        let current = self.current();
        if !Arc::ptr_eq(&current, seen) {
            return Ok(current);
        }
        if let Some(at) = state.last_attempt {
            if at.elapsed() < self.refresh_interval {
                return match &state.last_error {
                    Some(error) => Err(JwtError::Unavailable(error.clone())),
                    None => Ok(current),
                };
            }
        }
        state.last_attempt = Some(Instant::now());
        match self.load().await {
            Ok(set) => {
                tracing::info!(
                    keys = set.keys.len(),
                    "the identity provider's keys were read again"
                );
                let set = Arc::new(set);
                self.store(set.clone());
                state.last_error = None;
                Ok(set)
            }
            Err(error) => {
                tracing::warn!("{error}; the cached keys stay");
                state.last_error = Some(error.clone());
                Err(JwtError::Unavailable(error))
            }
        }
    }

    async fn load(&self) -> Result<KeySet, String> {
        match &self.source {
            Source::File(path) => {
                let bytes = tokio::fs::read(path)
                    .await
                    .map_err(|e| format!("the JWKS file {}: {e}", path.display()))?;
                if bytes.len() > MAX_JWKS_BYTES {
                    return Err(format!(
                        "the JWKS file {} is larger than {MAX_JWKS_BYTES} bytes",
                        path.display()
                    ));
                }
                KeySet::parse(&bytes).map_err(|e| format!("the JWKS file {}: {e}", path.display()))
            }
            Source::Url { url, client } => {
                let bytes = fetch(client, url)
                    .await
                    .map_err(|e| format!("the JWKS URL {url}: {e}"))?;
                KeySet::parse(&bytes).map_err(|e| format!("the JWKS URL {url}: {e}"))
            }
        }
    }

    fn decode(&self, token: &str, key: &VerifyingKey) -> Result<JwtClaims, JwtError> {
        let mut validation = Validation::new(key.alg);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        // jsonwebtoken checks iss and aud only when present unless they are required.
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        let data = jsonwebtoken::decode::<TokenClaims>(token, &key.key, &validation)
            .map_err(|e| JwtError::Invalid(describe(&e)))?;
        let claims = data.claims;
        Ok(JwtClaims {
            sub: claims.sub,
            roles: claims.pm_roles,
            organizations: claims.pm_organizations.unwrap_or_default(),
            actors: claims.pm_actors,
        })
    }
}

enum Source {
    File(PathBuf),
    Url {
        url: reqwest::Url,
        client: reqwest::Client,
    },
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "File({})", path.display()),
            Self::Url { url, .. } => write!(f, "Url({url})"),
        }
    }
}

#[derive(Default)]
struct RefreshState {
    last_attempt: Option<Instant>,
    /// Why the last attempt failed: tokens refused by the rate limit meanwhile are told the
    /// keys are unavailable, not that the token is bad.
    last_error: Option<String>,
}

/// The claims the service reads; the registered ones are checked by jsonwebtoken.
#[derive(Deserialize)]
struct TokenClaims {
    sub: String,
    pm_roles: Option<Vec<String>>,
    pm_organizations: Option<Vec<String>>,
    pm_actors: Option<Vec<String>>,
}

/// A key of the set with the one algorithm it may verify.
struct VerifyingKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// The usable keys of a set: keys the service cannot use are left out, so that they count
/// neither as candidates for a token nor towards "more than one key".
#[derive(Default)]
struct KeySet {
    keys: Vec<VerifyingKey>,
}

enum Pick<'a> {
    Key(&'a VerifyingKey),
    /// A key was found but may not verify this token: fetching again would not help.
    Refused(String),
    /// No key fits: the set may be out of date.
    Missing,
}

impl KeySet {
    fn parse(bytes: &[u8]) -> Result<Self, String> {
        let set: JwkSet =
            serde_json::from_slice(bytes).map_err(|e| format!("not a JSON Web Key Set: {e}"))?;
        let keys: Vec<VerifyingKey> = set
            .keys
            .iter()
            .filter_map(|jwk| match usable(jwk) {
                Ok(key) => Some(key),
                Err(why) => {
                    tracing::debug!(kid = ?jwk.common.key_id, "a JWKS key is left out: {why}");
                    None
                }
            })
            .collect();
        if keys.is_empty() {
            return Err(format!(
                "none of its {} keys is usable for RS256, ES256 or EdDSA",
                set.keys.len()
            ));
        }
        Ok(Self { keys })
    }

    fn pick(&self, kid: Option<&str>, alg: Algorithm) -> Pick<'_> {
        match kid {
            Some(kid) => {
                let mut named = self
                    .keys
                    .iter()
                    .filter(|key| key.kid.as_deref() == Some(kid))
                    .peekable();
                if named.peek().is_none() {
                    return Pick::Missing;
                }
                match named.find(|key| key.alg == alg) {
                    Some(key) => Pick::Key(key),
                    None => Pick::Refused(format!("the key {kid:?} is not for {alg:?}")),
                }
            }
            None => match self.keys.as_slice() {
                [] => Pick::Missing,
                [only] if only.alg == alg => Pick::Key(only),
                [only] => Pick::Refused(format!(
                    "the token is {alg:?}, the identity provider's key is for {:?}",
                    only.alg
                )),
                several => Pick::Refused(format!(
                    "the token names no key (kid) and the identity provider has {}",
                    several.len()
                )),
            },
        }
    }
}

/// The key of `jwk` and its algorithm, or why the service cannot use it.
fn usable(jwk: &Jwk) -> Result<VerifyingKey, String> {
    if let Some(use_) = &jwk.common.public_key_use {
        if *use_ != PublicKeyUse::Signature {
            return Err("not a signature key (use)".to_owned());
        }
    }
    if let Some(operations) = &jwk.common.key_operations {
        if !operations.contains(&KeyOperations::Verify) {
            return Err("not for verifying (key_ops)".to_owned());
        }
    }
    // The key's type decides its algorithm: an RSA key never verifies ES256, and no key
    // of the set is ever an HMAC secret.
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return Err("not an RSA, P-256 or Ed25519 public key".to_owned()),
    };
    if let Some(stated) = jwk.common.key_algorithm {
        if stated != KeyAlgorithm::from(alg) {
            return Err(format!("its alg {stated} is not {alg:?}"));
        }
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("not a valid key: {e}"))?;
    Ok(VerifyingKey {
        kid: jwk.common.key_id.clone(),
        alg,
        key,
    })
}

async fn fetch(client: &reqwest::Client, url: &reqwest::Url) -> Result<Vec<u8>, String> {
    let mut response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| chain(&e))?;
    if !response.status().is_success() {
        return Err(format!("answered {}", response.status()));
    }
    let too_large = || format!("the key set is larger than {MAX_JWKS_BYTES} bytes");
    if response
        .content_length()
        .is_some_and(|length| length > MAX_JWKS_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| chain(&e))? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Plain HTTP to the same machine is how tests and sidecars serve keys; nobody sits on
/// that path.
fn is_loopback(url: &reqwest::Url) -> bool {
    url.host_str()
        .is_some_and(crate::open_mode::is_loopback_host)
}

/// jsonwebtoken names its errors by their variant; the caller reads a sentence.
fn describe(error: &jsonwebtoken::errors::Error) -> String {
    match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidIssuer => "the token is of another issuer".to_owned(),
        ErrorKind::InvalidAudience => "the token is for another audience".to_owned(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim} claim"),
        ErrorKind::InvalidClaimFormat(claim) => format!("the token's {claim} claim is malformed"),
        ErrorKind::Json(e) => format!("the token's claims: {e}"),
        _ => format!("the token is not valid: {error}"),
    }
}

#[cfg(test)]
mod tests;
