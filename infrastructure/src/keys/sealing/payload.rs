//! A payload's text taken apart into its top-level fields without building a
//! [`serde_json::Value`]: each field's JSON text stays a slice of the payload until it is
//! replaced, and the payload is written back from the slices. Sealing and opening change a
//! few fields of payloads that are otherwise read as text (the log's readers parse facts
//! straight from it), so a whole `Value` built and written for each was most of their
//! cost.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

/// A field's name as the text has it: borrowed, unless it was written with escapes.
#[derive(Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct Name<'t>(#[serde(borrow)] Cow<'t, str>);

/// An object payload's fields, ordered by name (as `serde_json` writes an object), each
/// as its JSON text.
#[derive(Debug)]
pub struct Fields<'t>(Vec<(Name<'t>, Cow<'t, str>)>);

impl<'t> Fields<'t> {
    /// The fields of `text`; `None` when it is JSON but not an object (nothing in it is
    /// personal).
    ///
    /// # Errors
    /// The parser's, when `text` is not JSON.
    pub fn parse(text: &'t str) -> Result<Option<Self>, serde_json::Error> {
        if !text.trim_start().starts_with('{') {
            serde_json::from_str::<IgnoredAny>(text)?;
            return Ok(None);
        }
        let fields: BTreeMap<Name<'t>, &'t RawValue> = serde_json::from_str(text)?;
        Ok(Some(Self(
            fields
                .into_iter()
                .map(|(name, value)| (name, Cow::Borrowed(value.get())))
                .collect(),
        )))
    }

    /// The JSON text of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.0 == name)
            .map(|(_, value)| value.as_ref())
    }

    /// Field `name` set to the JSON text `value`.
    pub fn set(&mut self, name: &'static str, value: Cow<'t, str>) {
        match self.0.binary_search_by(|(n, _)| n.0.as_ref().cmp(name)) {
            Ok(at) => self.0[at].1 = value,
            Err(at) => self.0.insert(at, (Name(Cow::Borrowed(name)), value)),
        }
    }

    /// Field `name` removed; answers whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.0.len();
        self.0.retain(|(n, _)| n.0 != name);
        self.0.len() < before
    }

    /// The payload's JSON text.
    pub fn text(&self) -> String {
        let size = self
            .0
            .iter()
            .map(|(name, value)| name.0.len() + value.len() + 4)
            .sum::<usize>();
        let mut text = String::with_capacity(size + 2);
        text.push('{');
        for (at, (name, value)) in self.0.iter().enumerate() {
            if at > 0 {
                text.push(',');
            }
            push_name(&mut text, &name.0);
            text.push(':');
            text.push_str(value);
        }
        text.push('}');
        text
    }
}

/// `name` as a JSON string. A name borrowed from the text had no escapes and so needs
/// none; one that had them is escaped again.
fn push_name(text: &mut String, name: &str) {
    if name
        .chars()
        .any(|c| c == '"' || c == '\\' || c.is_control())
    {
        text.push_str(&serde_json::Value::from(name).to_string());
    } else {
        text.push('"');
        text.push_str(name);
        text.push('"');
    }
}

/// The sealed form of a field: `{"keys": ["actor:<id>", …], "sealed": "<base64>"}`.
#[derive(Debug, Deserialize)]
pub struct SealedForm<'t> {
    /// The sealed bytes, base64.
    #[serde(borrow)]
    pub sealed: Cow<'t, str>,
    /// The keys' names, the innermost layer's first.
    #[serde(borrow)]
    pub keys: Vec<Cow<'t, str>>,
}

/// What tells a sealed field from any other value: an object with a `sealed` member.
#[derive(Deserialize)]
struct Probe<'t> {
    #[serde(borrow)]
    sealed: Option<&'t RawValue>,
}

/// Whether the field text `value` is sealed.
pub fn is_sealed(value: &str) -> bool {
    value.starts_with('{')
        && serde_json::from_str::<Probe<'_>>(value).is_ok_and(|p| p.sealed.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_payload_then_its_fields_are_its_texts_and_it_is_written_back_the_same() {
        let text = r#" { "b" : [1, 2], "a": {"x": null}, "c\"d": "é" } "#;
        let fields = Fields::parse(text).expect("JSON").expect("an object");
        assert_eq!(fields.get("a"), Some(r#"{"x": null}"#));
        assert_eq!(fields.get("b"), Some("[1, 2]"));
        assert_eq!(fields.get("c\"d"), Some(r#""é""#));
        let back: serde_json::Value = serde_json::from_str(&fields.text()).expect("JSON");
        assert_eq!(
            back,
            serde_json::from_str::<serde_json::Value>(text).expect("JSON")
        );
    }

    #[test]
    fn given_fields_set_and_removed_then_the_text_has_them_in_order() {
        let mut fields = Fields::parse(r#"{"b":1,"d":2}"#)
            .expect("JSON")
            .expect("an object");
        fields.set("c", "true".into());
        fields.set("b", "null".into());
        fields.set("a", r#""x""#.into());
        assert!(fields.remove("d"));
        assert!(!fields.remove("d"));
        assert_eq!(fields.text(), r#"{"a":"x","b":null,"c":true}"#);
    }

    #[test]
    fn given_json_that_is_not_an_object_then_no_fields_and_not_json_an_error() {
        assert!(Fields::parse(" [1] ").expect("JSON").is_none());
        assert!(Fields::parse("null").expect("JSON").is_none());
        assert!(Fields::parse("{").is_err());
        assert!(Fields::parse("[1").is_err());
    }

    #[test]
    fn given_values_then_only_an_object_with_a_sealed_member_is_sealed() {
        assert!(is_sealed(r#"{"keys":[],"sealed":"AA=="}"#));
        assert!(!is_sealed(r#"{"path":"/x"}"#));
        assert!(!is_sealed(r#""{\"sealed\":1}""#));
        assert!(!is_sealed("null"));
    }
}
