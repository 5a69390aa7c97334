//! Given/when/then tests of the JWT verifier, with keys made at test time.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use axum::extract::State;
use axum::http::StatusCode;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ed25519_dalek::pkcs8::EncodePrivateKey as _;
use jsonwebtoken::{EncodingKey, Header};
use p256::elliptic_curve::sec1::ToEncodedPoint as _;
use serde_json::{json, Value};

use super::*;

const ISSUER: &str = "https://id.example.com";
const AUDIENCE: &str = "project-manager";

struct TestKey {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
    jwk: Value,
}

fn random_32() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS gives random bytes");
    bytes
}

fn ed25519(kid: &str) -> TestKey {
    let signing = ed25519_dalek::SigningKey::from_bytes(&random_32());
    let der = signing.to_pkcs8_der().expect("encodes as PKCS#8");
    TestKey {
        kid: kid.to_owned(),
        alg: Algorithm::EdDSA,
        encoding: EncodingKey::from_ed_der(der.as_bytes()),
        jwk: json!({
            "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(signing.verifying_key().to_bytes()),
        }),
    }
}

fn es256(kid: &str) -> TestKey {
    let secret = loop {
        // Almost every 32 bytes are a P-256 scalar; the loop covers the rest.
        if let Ok(secret) = p256::SecretKey::from_slice(&random_32()) {
            break secret;
        }
    };
    let der = secret.to_pkcs8_der().expect("encodes as PKCS#8");
    let point = secret.public_key().to_encoded_point(false);
    let x = point.x().expect("an uncompressed point has x");
    let y = point.y().expect("an uncompressed point has y");
    TestKey {
        kid: kid.to_owned(),
        alg: Algorithm::ES256,
        encoding: EncodingKey::from_ec_der(der.as_bytes()),
        jwk: json!({
            "kty": "EC", "crv": "P-256", "alg": "ES256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y),
        }),
    }
}

fn jwks(keys: &[&TestKey]) -> Value {
    json!({ "keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>() })
}

fn now() -> i64 {
    i64::try_from(jsonwebtoken::get_current_timestamp()).expect("the time fits")
}

/// Claims of a good token for alice that expires `exp_in` seconds from now.
fn claims(exp_in: i64) -> Value {
    json!({
        "sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now() + exp_in,
        "pm_roles": ["analyst"], "pm_organizations": ["acme"], "pm_actors": ["human:alice"],
    })
}

fn alice() -> JwtClaims {
    JwtClaims {
        sub: "alice".to_owned(),
        roles: Some(vec!["analyst".to_owned()]),
        organizations: vec!["acme".to_owned()],
        actors: Some(vec!["human:alice".to_owned()]),
    }
}

fn sign(key: &TestKey, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &key.encoding).expect("signs")
}

fn sign_without_kid(key: &TestKey, claims: &Value) -> String {
    jsonwebtoken::encode(&Header::new(key.alg), claims, &key.encoding).expect("signs")
}

fn b64_json(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).expect("serializes"))
}

/// A JWKS file in the temporary directory, removed when dropped.
struct JwksFile(PathBuf);

impl JwksFile {
    fn new(set: &Value) -> Self {
        let path = std::env::temp_dir().join(format!("pm-jwks-{}.json", uuid::Uuid::new_v4()));
        let file = Self(path);
        file.write(set);
        file
    }

    fn write(&self, set: &Value) {
        std::fs::write(&self.0, serde_json::to_vec(set).expect("serializes"))
            .expect("writes the JWKS file");
    }

    fn write_raw(&self, text: &str) {
        std::fs::write(&self.0, text).expect("writes the JWKS file");
    }

    fn settings(&self) -> JwtSettings {
        JwtSettings {
            jwks: JwksSource::File(self.0.clone()),
            issuer: ISSUER.to_owned(),
            audience: AUDIENCE.to_owned(),
        }
    }

    async fn verifier(&self) -> JwtVerifier {
        JwtVerifier::new(self.settings())
            .await
            .expect("the file is a good key set")
    }
}

impl Drop for JwksFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A JWKS endpoint on 127.0.0.1 whose answer the test changes.
struct JwksServer {
    url: String,
    state: Arc<ServerState>,
    task: tokio::task::JoinHandle<()>,
}

struct ServerState {
    answer: Mutex<(StatusCode, String)>,
    hits: AtomicUsize,
}

async fn answer(State(state): State<Arc<ServerState>>) -> (StatusCode, String) {
    state.hits.fetch_add(1, Ordering::SeqCst);
    state
        .answer
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

impl JwksServer {
    async fn start(status: StatusCode, body: String) -> Self {
        let state = Arc::new(ServerState {
            answer: Mutex::new((status, body)),
            hits: AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .route("/jwks", axum::routing::get(answer))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds a port");
        let address = listener.local_addr().expect("has an address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{address}/jwks"),
            state,
            task,
        }
    }

    async fn serving(set: &Value) -> Self {
        Self::start(StatusCode::OK, set.to_string()).await
    }

    fn answer(&self, status: StatusCode, body: String) {
        *self
            .state
            .answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = (status, body);
    }

    fn serve(&self, set: &Value) {
        self.answer(StatusCode::OK, set.to_string());
    }

    fn hits(&self) -> usize {
        self.state.hits.load(Ordering::SeqCst)
    }

    fn settings(&self) -> JwtSettings {
        JwtSettings {
            jwks: JwksSource::Url(self.url.clone()),
            issuer: ISSUER.to_owned(),
            audience: AUDIENCE.to_owned(),
        }
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn assert_invalid(result: Result<JwtClaims, JwtError>) -> String {
    match result {
        Err(JwtError::Invalid(why)) => why,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

fn assert_unavailable(result: Result<JwtClaims, JwtError>) -> String {
    match result {
        Err(JwtError::Unavailable(why)) => why,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn given_a_valid_eddsa_token_when_verified_then_its_claims() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;

    let claims = verifier.verify(&sign(&key, &claims(300))).await;

    assert_eq!(claims, Ok(alice()));
}

#[tokio::test]
async fn given_a_valid_es256_token_when_verified_then_its_claims() {
    let (ed, ec) = (ed25519("ed"), es256("ec"));
    let file = JwksFile::new(&jwks(&[&ed, &ec]));
    let verifier = file.verifier().await;

    let claims = verifier.verify(&sign(&ec, &claims(300))).await;

    assert_eq!(claims, Ok(alice()));
}

#[tokio::test]
async fn given_a_token_with_an_audience_list_naming_the_service_when_verified_then_ok() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let mut claims = claims(300);
    claims["aud"] = json!(["another-service", AUDIENCE]);

    assert_eq!(verifier.verify(&sign(&key, &claims)).await, Ok(alice()));
}

#[tokio::test]
async fn given_no_pm_claims_when_verified_then_no_roles_no_organizations_no_actors() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let claims = json!({"sub": "bob", "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 300});

    let claims = verifier.verify(&sign(&key, &claims)).await;

    assert_eq!(
        claims,
        Ok(JwtClaims {
            sub: "bob".to_owned(),
            roles: None,
            organizations: Vec::new(),
            actors: None,
        })
    );
}

#[tokio::test]
async fn given_a_token_expired_beyond_the_leeway_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;

    let why = assert_invalid(verifier.verify(&sign(&key, &claims(-120))).await);

    assert!(why.contains("expired"), "{why}");
}

#[tokio::test]
async fn given_a_token_expired_within_the_leeway_when_verified_then_ok() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;

    let claims = verifier.verify(&sign(&key, &claims(-30))).await;

    assert_eq!(claims, Ok(alice()));
}

#[tokio::test]
async fn given_a_token_not_valid_yet_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let mut claims = claims(600);
    claims["nbf"] = json!(now() + 300);

    assert_invalid(verifier.verify(&sign(&key, &claims)).await);
}

#[tokio::test]
async fn given_another_issuer_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let mut claims = claims(300);
    claims["iss"] = json!("https://evil.example.com");

    let why = assert_invalid(verifier.verify(&sign(&key, &claims)).await);

    assert!(why.contains("issuer"), "{why}");
}

#[tokio::test]
async fn given_no_issuer_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let mut claims = claims(300);
    claims.as_object_mut().expect("an object").remove("iss");

    assert_invalid(verifier.verify(&sign(&key, &claims)).await);
}

#[tokio::test]
async fn given_another_audience_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let mut claims = claims(300);
    claims["aud"] = json!("another-service");

    let why = assert_invalid(verifier.verify(&sign(&key, &claims)).await);

    assert!(why.contains("audience"), "{why}");
}

#[tokio::test]
async fn given_no_audience_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let mut claims = claims(300);
    claims.as_object_mut().expect("an object").remove("aud");

    assert_invalid(verifier.verify(&sign(&key, &claims)).await);
}

#[tokio::test]
async fn given_no_exp_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let mut claims = claims(300);
    claims.as_object_mut().expect("an object").remove("exp");

    let why = assert_invalid(verifier.verify(&sign(&key, &claims)).await);

    assert!(why.contains("exp"), "{why}");
}

#[tokio::test]
async fn given_no_sub_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let mut claims = claims(300);
    claims.as_object_mut().expect("an object").remove("sub");

    assert_invalid(verifier.verify(&sign(&key, &claims)).await);
}

#[tokio::test]
async fn given_alg_none_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let token = format!(
        "{}.{}.",
        b64_json(&json!({"alg": "none", "typ": "JWT", "kid": "k1"})),
        b64_json(&claims(300))
    );
    assert!(JwtVerifier::looks_like_jwt(&token));

    assert_invalid(verifier.verify(&token).await);
}

#[tokio::test]
async fn given_an_hs256_token_keyed_with_the_public_key_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let public = URL_SAFE_NO_PAD
        .decode(key.jwk["x"].as_str().expect("x is a string"))
        .expect("x is base64url");
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".to_owned());
    let token = jsonwebtoken::encode(&header, &claims(300), &EncodingKey::from_secret(&public))
        .expect("signs");

    let why = assert_invalid(verifier.verify(&token).await);

    assert!(why.contains("HS256"), "{why}");
}

#[tokio::test]
async fn given_an_oct_key_in_the_set_when_an_hs256_token_names_it_then_invalid() {
    let key = ed25519("k1");
    let secret = b"a shared secret of thirty-two by";
    let mut set = jwks(&[&key]);
    set["keys"].as_array_mut().expect("keys is an array").push(
        json!({"kty": "oct", "kid": "shared", "alg": "HS256", "k": URL_SAFE_NO_PAD.encode(secret)}),
    );
    let file = JwksFile::new(&set);
    let verifier = file.verifier().await;
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("shared".to_owned());
    let token = jsonwebtoken::encode(&header, &claims(300), &EncodingKey::from_secret(secret))
        .expect("signs");

    assert_invalid(verifier.verify(&token).await);
}

#[tokio::test]
async fn given_a_token_whose_alg_is_not_its_keys_when_verified_then_invalid() {
    let (ed, ec) = (ed25519("k1"), es256("k1"));
    let file = JwksFile::new(&jwks(&[&ed]));
    let verifier = file.verifier().await;

    let why = assert_invalid(verifier.verify(&sign(&ec, &claims(300))).await);

    assert!(why.contains("not for ES256"), "{why}");
}

#[tokio::test]
async fn given_a_jwk_stating_another_alg_when_loaded_then_it_is_left_out() {
    let key = ed25519("k1");
    let mut stated_wrong = ed25519("k2");
    stated_wrong.jwk["alg"] = json!("ES256");
    let file = JwksFile::new(&jwks(&[&key, &stated_wrong]));
    let verifier = file.verifier().await;

    assert_invalid(verifier.verify(&sign(&stated_wrong, &claims(300))).await);
    // k2 being left out, k1 is the set's only key: a token without kid may use it.
    assert_eq!(
        verifier.verify(&sign_without_kid(&key, &claims(300))).await,
        Ok(alice())
    );
}

#[tokio::test]
async fn given_a_known_kid_but_another_signer_when_verified_then_invalid() {
    let key = ed25519("k1");
    let impostor = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;

    let why = assert_invalid(verifier.verify(&sign(&impostor, &claims(300))).await);

    assert!(why.contains("signature"), "{why}");
}

#[tokio::test]
async fn given_a_tampered_payload_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let token = sign(&key, &claims(300));
    let parts: Vec<&str> = token.split('.').collect();
    let mut admin = claims(300);
    admin["pm_roles"] = json!(["admin"]);
    let forged = format!("{}.{}.{}", parts[0], b64_json(&admin), parts[2]);

    assert_invalid(verifier.verify(&forged).await);
}

#[tokio::test]
async fn given_a_crit_header_when_verified_then_invalid() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    header.crit = Some(vec!["exp".to_owned()]);
    let token = jsonwebtoken::encode(&header, &claims(300), &key.encoding).expect("signs");

    assert_invalid(verifier.verify(&token).await);
}

#[tokio::test]
async fn given_one_key_and_no_kid_when_verified_then_that_key() {
    let key = ed25519("k1");
    let file = JwksFile::new(&jwks(&[&key]));
    let verifier = file.verifier().await;

    let claims = verifier.verify(&sign_without_kid(&key, &claims(300))).await;

    assert_eq!(claims, Ok(alice()));
}

#[tokio::test]
async fn given_several_keys_and_no_kid_when_verified_then_invalid() {
    let (k1, k2) = (ed25519("k1"), ed25519("k2"));
    let file = JwksFile::new(&jwks(&[&k1, &k2]));
    let verifier = file.verifier().await;

    let why = assert_invalid(verifier.verify(&sign_without_kid(&k1, &claims(300))).await);

    assert!(why.contains("kid"), "{why}");
}

#[tokio::test]
async fn given_a_rotated_jwks_file_when_an_unknown_kid_arrives_then_it_is_read_again() {
    let (old, new) = (ed25519("old"), ed25519("new"));
    let file = JwksFile::new(&jwks(&[&old]));
    let verifier = file.verifier().await;
    file.write(&jwks(&[&old, &new]));

    let claims = verifier.verify(&sign(&new, &claims(300))).await;

    assert_eq!(claims, Ok(alice()));
}

#[tokio::test]
async fn given_a_read_within_30_s_when_an_unknown_kid_arrives_then_invalid_unread() {
    let (old, new, newer) = (ed25519("old"), ed25519("new"), ed25519("newer"));
    let file = JwksFile::new(&jwks(&[&old]));
    let verifier = file.verifier().await;
    file.write(&jwks(&[&old, &new]));
    assert_eq!(
        verifier.verify(&sign(&new, &claims(300))).await,
        Ok(alice())
    );

    // The file now has `newer`, but the last read is less than 30 s ago: only a read
    // would find it, so a refusal shows there was none.
    file.write(&jwks(&[&old, &new, &newer]));
    let unknown = ed25519("unknown");
    assert_invalid(verifier.verify(&sign(&unknown, &claims(300))).await);
    assert_invalid(verifier.verify(&sign(&newer, &claims(300))).await);
    // The cached keys still verify.
    assert_eq!(
        verifier.verify(&sign(&old, &claims(300))).await,
        Ok(alice())
    );
}

#[tokio::test]
async fn given_no_rate_limit_when_keys_rotate_twice_then_both_are_read() {
    let (first, second, third) = (ed25519("1"), ed25519("2"), ed25519("3"));
    let file = JwksFile::new(&jwks(&[&first]));
    let verifier = file.verifier().await.with_refresh_interval(Duration::ZERO);

    file.write(&jwks(&[&second]));
    assert_eq!(
        verifier.verify(&sign(&second, &claims(300))).await,
        Ok(alice())
    );
    file.write(&jwks(&[&third]));
    assert_eq!(
        verifier.verify(&sign(&third, &claims(300))).await,
        Ok(alice())
    );
    // The first key left the set with the rotation.
    assert_invalid(verifier.verify(&sign(&first, &claims(300))).await);
}

#[tokio::test]
async fn given_a_broken_reread_when_an_unknown_kid_arrives_then_unavailable_old_keys_stay() {
    let (old, new) = (ed25519("old"), ed25519("new"));
    let file = JwksFile::new(&jwks(&[&old]));
    let verifier = file.verifier().await;
    file.write_raw("{ not json");

    assert_unavailable(verifier.verify(&sign(&new, &claims(300))).await);
    // Within 30 s of the failed read: still unavailable, without reading.
    file.write(&jwks(&[&old, &new]));
    assert_unavailable(verifier.verify(&sign(&new, &claims(300))).await);
    assert_eq!(
        verifier.verify(&sign(&old, &claims(300))).await,
        Ok(alice())
    );
}

#[tokio::test]
async fn given_a_jwks_url_whose_keys_rotate_when_an_unknown_kid_arrives_then_fetched_again() {
    let (old, new) = (ed25519("old"), es256("new"));
    let server = JwksServer::serving(&jwks(&[&old])).await;
    let verifier = JwtVerifier::new(server.settings()).await.expect("starts");
    assert_eq!(server.hits(), 1);
    assert_eq!(
        verifier.verify(&sign(&old, &claims(300))).await,
        Ok(alice())
    );
    assert_eq!(server.hits(), 1, "a known key needs no fetch");

    server.serve(&jwks(&[&new]));
    assert_eq!(
        verifier.verify(&sign(&new, &claims(300))).await,
        Ok(alice())
    );
    assert_eq!(server.hits(), 2);

    // Within 30 s: an unknown kid is refused without a fetch.
    let unknown = ed25519("unknown");
    assert_invalid(verifier.verify(&sign(&unknown, &claims(300))).await);
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn given_concurrent_tokens_with_unknown_kids_when_verified_then_one_fetch() {
    let key = ed25519("k1");
    let server = JwksServer::serving(&jwks(&[&key])).await;
    let verifier = Arc::new(JwtVerifier::new(server.settings()).await.expect("starts"));
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let verifier = verifier.clone();
            let token = sign(&ed25519(&format!("unknown-{i}")), &claims(300));
            tokio::spawn(async move { verifier.verify(&token).await })
        })
        .collect();

    for task in tasks {
        assert_invalid(task.await.expect("the task ends"));
    }

    assert_eq!(server.hits(), 2, "the start, then one refresh for all 16");
}

#[tokio::test]
async fn given_a_jwks_url_down_at_start_when_verified_then_unavailable_without_stampede() {
    let key = ed25519("k1");
    let server = JwksServer::start(StatusCode::SERVICE_UNAVAILABLE, String::new()).await;
    let verifier = JwtVerifier::new(server.settings())
        .await
        .expect("starts anyway");
    assert_eq!(server.hits(), 1);

    let why = assert_unavailable(verifier.verify(&sign(&key, &claims(300))).await);
    assert!(why.contains("503"), "{why}");
    assert_eq!(server.hits(), 2, "the first token fetches again");

    server.serve(&jwks(&[&key]));
    assert_unavailable(verifier.verify(&sign(&key, &claims(300))).await);
    assert_eq!(server.hits(), 2, "not again within 30 s");
}

#[tokio::test]
async fn given_a_jwks_url_back_after_an_outage_when_verified_then_ok() {
    let key = ed25519("k1");
    let server = JwksServer::start(StatusCode::SERVICE_UNAVAILABLE, String::new()).await;
    let verifier = JwtVerifier::new(server.settings())
        .await
        .expect("starts anyway")
        .with_refresh_interval(Duration::ZERO);
    assert_unavailable(verifier.verify(&sign(&key, &claims(300))).await);

    server.serve(&jwks(&[&key]));

    assert_eq!(
        verifier.verify(&sign(&key, &claims(300))).await,
        Ok(alice())
    );
}

#[tokio::test]
async fn given_a_jwks_larger_than_the_limit_when_fetched_then_unavailable() {
    let key = ed25519("k1");
    let server = JwksServer::start(StatusCode::OK, " ".repeat(MAX_JWKS_BYTES + 1)).await;
    let verifier = JwtVerifier::new(server.settings())
        .await
        .expect("starts anyway");

    let why = assert_unavailable(verifier.verify(&sign(&key, &claims(300))).await);

    assert!(why.contains("larger"), "{why}");
}

#[tokio::test]
async fn given_bad_settings_when_created_then_an_error_naming_the_problem() {
    let file = JwksFile::new(&json!({"keys": []}));
    let missing = JwtSettings {
        jwks: JwksSource::File(PathBuf::from("/nonexistent/pm-jwks.json")),
        ..file.settings()
    };
    let error = JwtVerifier::new(missing).await.expect_err("no such file");
    assert!(error.contains("/nonexistent/pm-jwks.json"), "{error}");

    let error = JwtVerifier::new(file.settings())
        .await
        .expect_err("no keys");
    assert!(error.contains("none of its 0 keys"), "{error}");

    file.write_raw("[1, 2");
    let error = JwtVerifier::new(file.settings())
        .await
        .expect_err("not JSON");
    assert!(error.contains("not a JSON Web Key Set"), "{error}");

    file.write(&json!({"keys": [{"kty": "oct", "k": "c2VjcmV0", "alg": "HS256"}]}));
    let error = JwtVerifier::new(file.settings())
        .await
        .expect_err("no usable key");
    assert!(error.contains("RS256, ES256 or EdDSA"), "{error}");

    file.write(&jwks(&[&ed25519("k1")]));
    let empty_issuer = JwtSettings {
        issuer: " ".to_owned(),
        ..file.settings()
    };
    let error = JwtVerifier::new(empty_issuer).await.expect_err("no issuer");
    assert!(error.contains("issuer"), "{error}");

    let not_a_url = JwtSettings {
        jwks: JwksSource::Url("id.example.com/jwks".to_owned()),
        ..file.settings()
    };
    let error = JwtVerifier::new(not_a_url).await.expect_err("not a URL");
    assert!(error.contains("not a URL"), "{error}");

    let ftp = JwtSettings {
        jwks: JwksSource::Url("ftp://id.example.com/jwks".to_owned()),
        ..file.settings()
    };
    let error = JwtVerifier::new(ftp).await.expect_err("not http");
    assert!(error.contains("ftp"), "{error}");
}

#[test]
fn given_credentials_when_checked_then_only_three_base64url_segments_look_like_jwts() {
    assert!(JwtVerifier::looks_like_jwt(
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhIn0.c2ln-_"
    ));
    assert!(JwtVerifier::looks_like_jwt(
        "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0."
    ));
    assert!(!JwtVerifier::looks_like_jwt("an-opaque-token"));
    assert!(!JwtVerifier::looks_like_jwt("a.b"));
    assert!(!JwtVerifier::looks_like_jwt("a.b.c.d"));
    assert!(!JwtVerifier::looks_like_jwt(".b.c"));
    assert!(!JwtVerifier::looks_like_jwt("a..c"));
    assert!(!JwtVerifier::looks_like_jwt("a.b=.c"));
    assert!(!JwtVerifier::looks_like_jwt("a.b+/.c"));
    assert!(!JwtVerifier::looks_like_jwt(""));
}

#[test]
fn given_the_verifier_when_shared_then_send_and_sync_and_its_future_is_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<JwtVerifier>();
    let verifier: Option<&JwtVerifier> = None;
    if let Some(verifier) = verifier {
        send(&verifier.verify("a.b.c"));
    }
}
