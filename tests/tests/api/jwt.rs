//! JWT bearer tokens of an identity provider (TRUST.md "Principals" 3): the tests are the
//! provider — they make Ed25519 keys, serve the key set over HTTP and sign tokens — and
//! the service verifies them: valid, expired (and within the leeway), wrong issuer or
//! audience, no `exp`, `alg: none`, no `pm_roles`, a key rotated in.

use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use ed25519_dalek::SigningKey;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use pm_tests::{on_both_backends, TestDb, TestService};
use serde_json::{json, Value};

use crate::support::{assert_problem, config, events};

const ISSUER: &str = "https://idp.test";
const AUDIENCE: &str = "project-manager";

/// A signing key of the provider, with its `kid`.
struct Key {
    kid: String,
    signing: SigningKey,
}

impl Key {
    fn new(kid: &str) -> Self {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).expect("random");
        Self {
            kid: kid.into(),
            signing: SigningKey::from_bytes(&seed),
        }
    }

    /// The public half as a JWK.
    fn jwk(&self) -> Value {
        json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": self.kid,
               "x": URL_SAFE_NO_PAD.encode(self.signing.verifying_key().as_bytes())})
    }

    fn sign(&self, claims: &Value) -> String {
        let der = self.signing.to_pkcs8_der().expect("pkcs8");
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_der(der.as_bytes()))
            .expect("signed")
    }
}

/// The provider's key set, served at `http://127.0.0.1:<port>/jwks.json`.
struct Provider {
    url: String,
    keys: Arc<Mutex<Value>>,
}

impl Provider {
    async fn serve(keys: &[&Key]) -> Self {
        let set = Arc::new(Mutex::new(Value::Null));
        let served = set.clone();
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let set = served.lock().map(|s| s.clone()).unwrap_or(Value::Null);
                async move { axum::Json(set) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bound");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        let provider = Self {
            url: format!("http://{addr}/jwks.json"),
            keys: set,
        };
        provider.rotate(keys);
        provider
    }

    fn rotate(&self, keys: &[&Key]) {
        let set = json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()});
        *self.keys.lock().expect("lock") = set;
    }
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Claims of a valid token of `sub`, changed by `edit`.
fn claims(sub: &str, edit: impl FnOnce(&mut Value)) -> Value {
    let mut c = json!({"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 300,
                       "pm_roles": ["ingress"], "pm_organizations": ["acme"]});
    edit(&mut c);
    c
}

async fn me(svc: &TestService, token: &str) -> pm_tests::Response {
    svc.get(Some(token), "/v1/me").await
}

fn assert_invalid_token(r: &pm_tests::Response, why: &str) {
    assert_problem(r, 401, "unauthorized");
    assert_eq!(
        r.header("www-authenticate"),
        Some("Bearer error=\"invalid_token\""),
        "{why}: {}",
        r.text
    );
}

async fn tokens_of_the_identity_provider(db: TestDb) {
    let (first, second) = (Key::new("k1"), Key::new("k2"));
    let provider = Provider::serve(&[&first]).await;
    let mut c = config(&db);
    // The admin reads the log back (`events` signs in as it).
    c.auth_tokens = format!("admin:{}", pm_tests::ADMIN);
    c.jwt_jwks_url = Some(provider.url.clone());
    c.jwt_issuer = Some(ISSUER.into());
    c.jwt_audience = Some(AUDIENCE.into());
    let svc = TestService::start_with(c).await;

    let alice = first.sign(&claims("alice@acme", |_| {}));
    let r = me(&svc, &alice).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json,
        json!({"principal": "alice@acme", "roles": ["ingress"], "organizations": ["acme"],
               "actors": null, "source": "jwt"})
    );
    let made = svc
        .post(
            Some(&alice),
            "/v1/actors",
            &json!({"kind": "human", "display_name": "Alice"}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let by_alice = events(&svc, "principal=alice@acme").await;
    assert_eq!(by_alice.len(), 1);
    assert_eq!(by_alice[0]["data"]["id"], made.id().as_str());

    // Within the 60 s leeway an expired token still passes; beyond it, not.
    let late = first.sign(&claims("alice@acme", |c| c["exp"] = json!(now() - 30)));
    assert_eq!(me(&svc, &late).await.status, 200);
    let expired = first.sign(&claims("alice@acme", |c| c["exp"] = json!(now() - 120)));
    assert_invalid_token(&me(&svc, &expired).await, "expired");
    let no_exp = first.sign(&claims("alice@acme", |c| {
        c.as_object_mut().map(|o| o.remove("exp"));
    }));
    assert_invalid_token(&me(&svc, &no_exp).await, "no exp");
    let issuer = first.sign(&claims("alice@acme", |c| {
        c["iss"] = json!("https://evil.test")
    }));
    assert_invalid_token(&me(&svc, &issuer).await, "wrong issuer");
    let audience = first.sign(&claims("alice@acme", |c| {
        c["aud"] = json!("another-service")
    }));
    assert_invalid_token(&me(&svc, &audience).await, "wrong audience");
    let system = first.sign(&claims("system", |_| {}));
    assert_invalid_token(&me(&svc, &system).await, "the service's own name");

    // `alg: none`: the claims of a valid token, unsigned.
    let header =
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT", "kid": "k1"}).to_string());
    let body = URL_SAFE_NO_PAD.encode(claims("mallory", |_| {}).to_string());
    assert_invalid_token(&me(&svc, &format!("{header}.{body}.")).await, "alg none");
    // Signed by another key under k1's name.
    let forged = Key {
        kid: "k1".into(),
        signing: second.signing.clone(),
    }
    .sign(&claims("mallory", |_| {}));
    assert_invalid_token(&me(&svc, &forged).await, "bad signature");

    // Known to the provider, but no principal of this service.
    let no_roles = first.sign(&claims("bob", |c| {
        c.as_object_mut().map(|o| o.remove("pm_roles"));
    }));
    assert_problem(&me(&svc, &no_roles).await, 403, "forbidden");

    // The provider rotates k1 out and k2 in: a token of k2 makes the service fetch the set
    // again; k1's tokens are refused from then on.
    provider.rotate(&[&second]);
    let rotated = second.sign(&claims("alice@acme", |_| {}));
    let r = me(&svc, &rotated).await;
    assert_eq!(r.status, 200, "after rotation: {}", r.text);
    let old = first.sign(&claims("carol@acme", |_| {}));
    assert_invalid_token(&me(&svc, &old).await, "a key rotated out");
    svc.stop().await;
}

on_both_backends!(tokens_of_the_identity_provider);
