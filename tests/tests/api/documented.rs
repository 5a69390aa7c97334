//! Checks of real answers against `/openapi.json`: the answer's status must be documented
//! for its operation, and its body must fit the schema documented for that status and
//! content type.

use pm_tests::Response;
use serde_json::Value;

/// The documented response of `method path` for `status`; panics when undocumented.
pub fn documented<'d>(doc: &'d Value, method: &str, path: &str, status: u16) -> &'d Value {
    let operation = &doc["paths"][path][method];
    assert!(operation.is_object(), "{method} {path} is not documented");
    let response = &operation["responses"][status.to_string()];
    assert!(
        response.is_object(),
        "{method} {path} answered {status}, which its operation does not document (documented: {:?})",
        operation["responses"]
            .as_object()
            .map(|r| r.keys().collect::<Vec<_>>())
    );
    response
}

/// Validates `answer` against `schema`, resolved within `doc`'s components.
fn validate(doc: &Value, schema: &Value, answer: &Value, what: &str) {
    let mut root = schema.clone();
    root["components"] = doc["components"].clone();
    let validator = jsonschema::validator_for(&root)
        .unwrap_or_else(|e| panic!("schema of {what} does not compile: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(answer)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} answered outside its documented schema: {errors:?}\nanswer: {answer}"
    );
}

/// Validates `answer` against the documented JSON schema of `method path` for `status`
/// (`application/json`, else `application/problem+json`).
pub fn assert_documented(doc: &Value, method: &str, path: &str, status: u16, answer: &Value) {
    let content = &documented(doc, method, path, status)["content"];
    let schema = content
        .get("application/json")
        .or_else(|| content.get("application/problem+json"))
        .map(|c| &c["schema"])
        .unwrap_or_else(|| panic!("{method} {path} documents no {status} JSON answer"));
    validate(doc, schema, answer, &format!("{method} {path} {status}"));
}

/// Asserts a real answer of `method path` is documented: its status, and — when it has a
/// JSON body and the status documents content — its content type and body.
pub fn assert_answer(doc: &Value, method: &str, path: &str, r: &Response) {
    let response = documented(doc, method, path, r.status);
    let Some(content) = response.get("content").and_then(Value::as_object) else {
        return;
    };
    let media = r
        .header("content-type")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let what = format!("{method} {path} {}", r.status);
    let schema = &content.get(&media).unwrap_or_else(|| {
        panic!(
            "{what} answered {media:?}, documented only {:?}: {}",
            content.keys().collect::<Vec<_>>(),
            r.text
        )
    })["schema"];
    if media.ends_with("json") {
        validate(doc, schema, &r.json, &what);
    }
}
