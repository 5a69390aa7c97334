//! The bearer security scheme, and each operation's security and allowed roles: an
//! `x-roles` array (machine-readable) and a sentence in its description, both from the
//! route table's [`Access`].

use serde_json::{json, Map, Value};

use crate::routes::access::Access;

/// The name of the security scheme in `components.securitySchemes`.
pub const SCHEME: &str = "bearer";

/// Adds the bearer scheme to the document's components.
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
                "description": "A token configured for one role (`PM_AUTH_TOKENS=role:token,…`). \
                    Roles: admin, ingress, llm, analyst; each operation's `x-roles` lists those \
                    it allows. Without a token (or with an unknown one) a protected operation \
                    answers 401, with a role it does not allow 403. A service with no tokens \
                    configured runs open (loopback only) and needs none."
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
        json!([{ SCHEME: [] }])
    };
    op.insert("security".into(), security);
    op.insert("x-roles".into(), json!(roles));
    let description = match op.get("description").and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() => format!("{}\n\n{sentence}", d.trim_end()),
        _ => sentence,
    };
    op.insert("description".into(), description.into());
}
