//! `allOf` of object schemas (what `#[serde(flatten)]` becomes) merged into one object
//! schema, so a closed fact schema does not reject the fields a view adds to it.

use serde_json::{Map, Value};

/// Rewrites every `allOf` of object schemas (what `#[serde(flatten)]` becomes) into one
/// object schema with the union of their properties and required fields. A view that
/// flattens a fact adds fields to it, so the fact's `additionalProperties: false` must
/// apply to the whole view, not to the fact's part alone (which would reject the view's
/// own fields).
pub fn flatten_all_of(node: &mut Value, schemas: &Value) {
    match node {
        Value::Object(object) => {
            for child in object.values_mut() {
                flatten_all_of(child, schemas);
            }
            let Some(Value::Array(parts)) = object.get("allOf") else {
                return;
            };
            let mut resolved = Vec::with_capacity(parts.len());
            for part in parts {
                let mut part = resolve(part, schemas);
                flatten_all_of(&mut part, schemas);
                if part.get("properties").is_none() {
                    return;
                }
                resolved.push(part);
            }
            let mut properties = Map::new();
            let mut required: Vec<Value> = Vec::new();
            let mut closed = false;
            for part in resolved {
                if let Some(Value::Object(p)) = part.get("properties") {
                    properties.extend(p.clone());
                }
                if let Some(Value::Array(r)) = part.get("required") {
                    required.extend(
                        r.iter()
                            .filter(|f| !required.contains(f))
                            .cloned()
                            .collect::<Vec<_>>(),
                    );
                }
                closed |= part.get("additionalProperties") == Some(&Value::Bool(false));
            }
            object.remove("allOf");
            object.insert("type".into(), "object".into());
            object.insert("properties".into(), Value::Object(properties));
            object.insert("required".into(), Value::Array(required));
            if closed {
                object.insert("additionalProperties".into(), Value::Bool(false));
            }
        }
        Value::Array(items) => {
            for item in items {
                flatten_all_of(item, schemas);
            }
        }
        _ => {}
    }
}

/// A `$ref` to `#/components/schemas/<name>` resolved (other schemas as they are).
fn resolve(schema: &Value, schemas: &Value) -> Value {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .and_then(|name| schemas.get(name))
        .unwrap_or(schema)
        .clone()
}
