//! JSON Schema validation that never fetches anything: the published documents
//! (`/openapi.json`, `/asyncapi.json`) are checked against official schemas vendored in
//! `tests/data/`, and any reference outside them fails the test instead of downloading.

use jsonschema::{Draft, Retrieve, Uri, Validator};
use serde_json::Value;

/// A retriever that refuses: validation must not fetch anything.
struct Offline;

impl Retrieve for Offline {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("{uri} is not available offline").into())
    }
}

/// A `draft` validator of `schema`, its references resolved only within it (and the
/// meta-schemas bundled with the validator).
///
/// # Panics
/// When the schema does not compile offline; `what` names it.
pub fn validator(schema: &Value, draft: Draft, what: &str) -> Validator {
    jsonschema::options()
        .with_draft(draft)
        .with_retriever(Offline)
        .build(schema)
        .unwrap_or_else(|e| panic!("{what} does not compile offline: {e}"))
}

/// Every error of `instance` against `validator`, with where it is.
pub fn errors(validator: &Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}
