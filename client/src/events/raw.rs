//! [`RawJson`]: a JSON value the client passes on without knowing its shape.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::Error;

/// A JSON value kept as the service sent it: the data of events this client has no type
/// for yet, and parts of events whose type comes later (a session's state). Read it with
/// [`RawJson::parse`] into a type of your own, or take the text.
///
/// ```
/// use pm_client::RawJson;
///
/// let raw = RawJson::from_json(r#"{"turn_id":"t1"}"#).expect("JSON");
/// #[derive(serde::Deserialize)]
/// struct Turn { turn_id: String }
/// assert_eq!(raw.parse::<Turn>().expect("a turn").turn_id, "t1");
/// assert_eq!(raw.get(), r#"{"turn_id":"t1"}"#);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(pub(crate) Box<RawValue>);

impl RawJson {
    /// Wraps JSON text.
    ///
    /// # Errors
    /// [`Error::Decode`] when `json` is not one JSON value.
    pub fn from_json(json: impl Into<String>) -> Result<Self, Error> {
        RawValue::from_string(json.into())
            .map(Self)
            .map_err(|e| Error::decode("JSON", e))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Reads the value as `T`.
    ///
    /// # Errors
    /// [`Error::Decode`] when it does not match `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_str(self.get()).map_err(|e| Error::decode(std::any::type_name::<T>(), e))
    }
}

impl PartialEq for RawJson {
    /// Equal when the texts are equal (no normalisation).
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawJson {}

impl std::fmt::Display for RawJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_text_and_round_trips() {
        let raw = RawJson::from_json(r#"{"a": [1, 2]}"#).expect("JSON");
        assert_eq!(raw.get(), r#"{"a": [1, 2]}"#);
        assert_eq!(raw.to_string(), raw.get());
        let json = serde_json::to_string(&raw).expect("ser");
        let back: RawJson = serde_json::from_str(&json).expect("de");
        assert_eq!(back, raw);
        assert!(RawJson::from_json("{").is_err());
        assert!(raw.parse::<u32>().is_err());
    }
}
