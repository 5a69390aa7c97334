//! The two bearer security schemes (a token, an identity provider's JWT), and each operation's security and allowed roles: an
//! `x-roles` array (machine-readable) and a sentence in its description, both from the
//! route table's [`Access`].

use serde_json::{json, Map, Value};

use crate::routes::access::Access;

/// The name of the opaque token's security scheme in `components.securitySchemes`.
pub const SCHEME: &str = "bearer";

/// The name of the identity provider's JWT's security scheme.
pub const JWT_SCHEME: &str = "jwt";

/// Adds the bearer schemes to the document's components.
pub fn add_scheme(doc: &mut Value) {
    let Some(components) = doc.get_mut("components").and_then(Value::as_object_mut) else {
        return;
    };
    components.insert(
        "securitySchemes".into(),
        json!({
            SCHEME: {
                "type": "http",
                "scheme": "bearer",
                "description": "A token of a principal (TRUST.md): one configured for a role \
                    (`PM_AUTH_TOKENS=role:token,…`, a principal named after the role) or one of \
                    the principals file (`PM_PRINCIPALS_FILE`, known by its SHA-256). Roles: \
                    admin, ingress, llm, analyst; each operation's `x-roles` lists those it \
                    allows. Without a token (or with an unknown one) a protected operation \
                    answers 401, with a role it does not allow 403. A service with no \
                    principals configured runs open (loopback only) and needs none. \
                    `GET /v1/me` says who a token is."
            },
            JWT_SCHEME: {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
                "description": "A JWT of the identity provider (`PM_JWT_JWKS_URL` or \
                    `PM_JWT_JWKS_FILE`, `PM_JWT_ISSUER`, `PM_JWT_AUDIENCE`): RS256, ES256 or \
                    EdDSA, `exp` required (60 s leeway). `sub` is the principal's name, \
                    `pm_roles` its roles (none: 403), `pm_organizations` its organizations, \
                    `pm_actors` its actors. An invalid one answers 401 with \
                    `WWW-Authenticate: Bearer error=\"invalid_token\"`."
            }
        }),
    );
}

/// Sets `op`'s security requirement, `x-roles` and the sentence naming its roles.
pub fn annotate(op: &mut Map<String, Value>, access: Access) {
    let roles: Vec<&str> = access.roles().into_iter().map(|r| r.as_str()).collect();
    let sentence = if roles.is_empty() {
        "Open: no token needed.".to_string()
    } else {
        format!("Roles: {}.", roles.join(", "))
    };
    let security = if roles.is_empty() {
        json!([])
    } else {
        json!([{ SCHEME: [] }, { JWT_SCHEME: [] }])
    };
    op.insert("security".into(), security);
    op.insert("x-roles".into(), json!(roles));
    let description = match op.get("description").and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() => format!("{}\n\n{sentence}", d.trim_end()),
        _ => sentence,
    };
    op.insert("description".into(), description.into());
}
