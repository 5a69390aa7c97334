//! An event's JSON (payload or metadata) as the log holds it: the stored text, checked
//! when read and parsed into a [`Value`] only when something reads its fields.
//!
//! A process reads every event of the log once (the tail) and hands it to every processor
//! and stream; most of them are runes that no processor looks into (the read model and
//! the sagas take facts, which they parse straight from the text into their types), so
//! building a `Value` for each was the largest part of reading the log.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// Shared JSON text with its parsed value made at first use; cheap to clone.
#[derive(Clone)]
pub struct Json(Arc<Inner>);

struct Inner {
    text: Box<str>,
    value: OnceLock<Value>,
}

impl Json {
    /// Takes `text` after checking that it is one JSON value (without building it).
    ///
    /// # Errors
    /// The parser's error when it is not.
    pub fn from_text(text: String) -> Result<Self, serde_json::Error> {
        serde_json::from_str::<serde::de::IgnoredAny>(&text)?;
        Ok(Self(Arc::new(Inner {
            text: text.into_boxed_str(),
            value: OnceLock::new(),
        })))
    }

    /// The JSON text as stored.
    pub fn text(&self) -> &str {
        &self.0.text
    }

    /// The parsed value (parsed at the first call). The text was checked when taken, so
    /// it parses; were it not to, the value is `null`.
    pub fn value(&self) -> &Value {
        self.0
            .value
            .get_or_init(|| serde_json::from_str(&self.0.text).unwrap_or(Value::Null))
    }
}

impl Deref for Json {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl From<Value> for Json {
    fn from(value: Value) -> Self {
        Self(Arc::new(Inner {
            text: value.to_string().into_boxed_str(),
            value: OnceLock::from(value),
        }))
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_parsed_only_when_a_field_is_read() {
        let json = Json::from_text(r#"{"b": 1, "a": [true]}"#.to_string()).expect("JSON");
        assert!(json.0.value.get().is_none());
        assert_eq!(json.text(), r#"{"b": 1, "a": [true]}"#);
        assert_eq!(json["b"], 1);
        assert_eq!(*json, serde_json::json!({"a": [true], "b": 1}));
        // A clone shares the parse.
        assert!(json.clone().0.value.get().is_some());
    }

    #[test]
    fn a_text_that_is_not_one_json_value_is_refused() {
        for bad in ["", "{", "{} {}", "nul", "{\"a\": }"] {
            assert!(Json::from_text(bad.to_string()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_value_keeps_its_text_and_compares_by_value() {
        let json = Json::from(serde_json::json!({"n": 1}));
        assert_eq!(json.text(), r#"{"n":1}"#);
        assert_eq!(
            json,
            Json::from_text(r#"{ "n" : 1 }"#.to_string()).expect("JSON")
        );
    }
}
