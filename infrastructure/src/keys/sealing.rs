//! The personal fields of a payload ([`pm_domain::personal`]) sealed under their keys, and
//! opened again: the one transformation the log's writer applies before a payload is
//! stored, and its readers after it is read.
//!
//! A sealed field holds `{"sealed": "<base64>", "keys": ["actor:<id>", "conversation:<id>"]}`:
//! the field's JSON text sealed under each key in turn (the first innermost), each layer
//! bound to the event (aggregate type, id and sequence) and the field — a sealed value
//! copied onto another event or field does not open. `null` and absent fields stay as they
//! are. Opening a field whose key was destroyed gives `null` and marks the payload
//! `"forgotten": true`; one that does not open (moved, altered) gives `null` and is counted,
//! never an error.

use base64::Engine;
use pm_domain::personal::{personal_fields, KeyOf};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{CipherError, Key, Scope};

/// The event a payload belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// Its type: which fields are personal.
    pub event_type: &'a str,
    /// Its aggregate's type, id and its sequence in that stream: what a sealed field is
    /// bound to.
    pub aggregate_type: &'a str,
    /// The aggregate id (an actor's id for an actor's facts).
    pub aggregate_id: &'a str,
    /// The sequence.
    pub sequence: i64,
    /// The conversation it belongs to.
    pub conversation_id: Option<Uuid>,
}

/// Why a payload could not be sealed (nothing is stored then).
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// A key the spec names cannot be found from the event.
    #[error("{event_type}.{field}: no {what} to seal it under")]
    NoOwner {
        /// The event type.
        event_type: String,
        /// The field.
        field: &'static str,
        /// Which owner was missing.
        what: &'static str,
    },
    /// The key could not be had.
    #[error("{0}")]
    Key(String),
    /// Nothing could be sealed.
    #[error(transparent)]
    Cipher(#[from] CipherError),
}

/// What opening a payload found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Opened {
    /// Fields whose key was destroyed: read as `null`, the payload marked forgotten.
    pub forgotten: usize,
    /// Fields that did not open with their keys (moved or altered): read as `null`.
    pub refused: usize,
}

const SEALED: &str = "sealed";
const KEYS: &str = "keys";
/// The mark of a payload some of whose texts were forgotten.
pub const FORGOTTEN: &str = "forgotten";

/// Seals the personal fields of `payload` (an event at `place`) under the keys `key` gives.
///
/// # Errors
/// [`SealError`]: the payload must not be stored.
pub fn seal<E: std::fmt::Display>(
    place: &Place<'_>,
    payload: &mut Value,
    mut key: impl FnMut(Scope, Uuid) -> Result<Key, E>,
) -> Result<(), SealError> {
    let Value::Object(fields) = payload else {
        return Ok(());
    };
    for personal in personal_fields(place.event_type) {
        let Some(value) = fields.get(personal.field) else {
            continue;
        };
        if value.is_null() || is_sealed(value) {
            continue;
        }
        let owners = personal
            .keys
            .iter()
            .map(|k| owner(place, fields, *k, personal.field))
            .collect::<Result<Vec<_>, _>>()?;
        let mut bytes = value.to_string().into_bytes();
        for (layer, (scope, id)) in owners.iter().enumerate() {
            let k = key(*scope, *id).map_err(|e| SealError::Key(e.to_string()))?;
            bytes = k.seal(&aad(place, personal.field, layer), &bytes)?;
        }
        let names = owners
            .iter()
            .map(|(scope, id)| Value::String(format!("{}:{id}", scope.as_str())))
            .collect();
        let mut sealed = Map::new();
        sealed.insert(
            SEALED.into(),
            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        );
        sealed.insert(KEYS.into(), Value::Array(names));
        fields.insert(personal.field.into(), Value::Object(sealed));
    }
    Ok(())
}

/// Opens the sealed fields of `payload` (an event at `place`) with the keys `key` has
/// (`None`: destroyed). A field that cannot be opened reads `null`; see [`Opened`].
pub fn open(
    place: &Place<'_>,
    payload: &mut Value,
    mut key: impl FnMut(Scope, Uuid) -> Option<Key>,
) -> Opened {
    let mut opened = Opened::default();
    let Value::Object(fields) = payload else {
        return opened;
    };
    for personal in personal_fields(place.event_type) {
        let Some(value) = fields.get_mut(personal.field) else {
            continue;
        };
        if !is_sealed(value) {
            continue;
        }
        *value = match open_field(place, personal.field, value, &mut key) {
            Ok(plain) => plain,
            Err(Unopened::Forgotten) => {
                opened.forgotten += 1;
                Value::Null
            }
            Err(Unopened::Refused) => {
                opened.refused += 1;
                Value::Null
            }
        };
    }
    if opened.forgotten > 0 {
        fields.insert(FORGOTTEN.into(), Value::Bool(true));
    }
    opened
}

enum Unopened {
    Forgotten,
    Refused,
}

fn open_field(
    place: &Place<'_>,
    field: &str,
    sealed: &Value,
    key: &mut impl FnMut(Scope, Uuid) -> Option<Key>,
) -> Result<Value, Unopened> {
    let bytes = sealed
        .get(SEALED)
        .and_then(Value::as_str)
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .ok_or(Unopened::Refused)?;
    let owners = sealed
        .get(KEYS)
        .and_then(Value::as_array)
        .ok_or(Unopened::Refused)?
        .iter()
        .map(|name| name.as_str().and_then(parse_owner).ok_or(Unopened::Refused))
        .collect::<Result<Vec<_>, _>>()?;
    // Every key first: one destroyed is forgetting, whatever the others say.
    let keys = owners
        .iter()
        .map(|(scope, id)| key(*scope, *id).ok_or(Unopened::Forgotten))
        .collect::<Result<Vec<_>, _>>()?;
    let mut bytes = bytes;
    for (layer, k) in keys.iter().enumerate().rev() {
        bytes = k
            .open(&aad(place, field, layer), &bytes)
            .ok_or(Unopened::Refused)?;
    }
    serde_json::from_slice(&bytes).map_err(|_| Unopened::Refused)
}

fn is_sealed(value: &Value) -> bool {
    value.as_object().is_some_and(|o| o.contains_key(SEALED))
}

fn parse_owner(name: &str) -> Option<(Scope, Uuid)> {
    let (scope, id) = name.split_once(':')?;
    Some((Scope::parse(scope)?, id.parse().ok()?))
}

/// The key of `k` for a field of the event at `place`.
fn owner(
    place: &Place<'_>,
    fields: &Map<String, Value>,
    k: KeyOf,
    field: &'static str,
) -> Result<(Scope, Uuid), SealError> {
    let missing = |what| SealError::NoOwner {
        event_type: place.event_type.to_string(),
        field,
        what,
    };
    match k {
        KeyOf::TheActor => place
            .aggregate_id
            .parse()
            .map(|id| (Scope::Actor, id))
            .map_err(|_| missing("actor")),
        KeyOf::ActorNamedBy(name) => fields
            .get(name)
            .and_then(Value::as_str)
            .and_then(|id| id.parse().ok())
            .map(|id| (Scope::Actor, id))
            .ok_or_else(|| missing("actor")),
        KeyOf::Conversation => place
            .conversation_id
            .map(|id| (Scope::Conversation, id))
            .ok_or_else(|| missing("conversation")),
    }
}

/// What one layer of a sealed field is bound to.
fn aad(place: &Place<'_>, field: &str, layer: usize) -> Vec<u8> {
    format!(
        "{}\n{}\n{}\n{field}\n{layer}",
        place.aggregate_type, place.aggregate_id, place.sequence
    )
    .into_bytes()
}

#[cfg(test)]
mod tests;
