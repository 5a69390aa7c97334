//! What a payload holds once its party was forgotten (TRUST.md "Forgetting a person"): each
//! personal field ([`pm_domain::personal`], stated once) may be `null`, and the payload may
//! carry `"forgotten": true`. Applied to the payload schemas taken from the Rust types, whose
//! fields are texts: the log's readers show what the types cannot.

use std::collections::BTreeMap;

use pm_domain::personal::personal_fields;
use serde_json::{json, Map, Value};

/// The mark a payload some of whose texts were forgotten carries.
const FORGOTTEN: &str = "forgotten";

/// Makes the personal fields of every payload in `payloads` nullable in `components`, and
/// adds the `forgotten` mark to those payloads.
pub fn mark(components: &mut Map<String, Value>, payloads: &BTreeMap<String, Value>) {
    for (event_type, payload) in payloads {
        let fields = personal_fields(event_type);
        if fields.is_empty() {
            continue;
        }
        let name = payload["$ref"]
            .as_str()
            .unwrap_or_default()
            .trim_start_matches("#/components/schemas/");
        let Some(properties) = components
            .get_mut(name)
            .and_then(|schema| schema.get_mut("properties"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for personal in fields {
            if let Some(field) = properties.get_mut(personal.field) {
                let text = field.take();
                *field = json!({
                    "anyOf": [text, {"type": "null"}],
                    "description": "`null` once the party whose key sealed it is forgotten",
                });
            }
        }
        properties.insert(
            FORGOTTEN.into(),
            json!({
                "type": "boolean",
                "const": true,
                "description": "Present when some of the payload's texts were forgotten: they read `null`",
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::payloads::Schemas;

    #[test]
    fn given_the_logs_payloads_then_each_personal_field_may_be_null_and_the_mark_is_allowed() {
        let schemas = Schemas::of_the_log();
        let actor = &schemas.components["ActorRegistered"]["properties"];
        assert_eq!(actor["display_name"]["anyOf"][1]["type"], "null");
        assert_eq!(actor["forgotten"]["type"], "boolean");
        let call = &schemas.components["ToolCalled"]["properties"];
        assert_eq!(call["arguments"]["anyOf"][1]["type"], "null", "{call}");
        let policy = &schemas.components["ToolPolicySet"]["properties"];
        assert!(
            policy.get("forgotten").is_none(),
            "no personal field, no mark"
        );
    }
}
