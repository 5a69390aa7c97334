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
    /// The key store could not give it.
    #[error(transparent)]
    Store(#[from] super::KeyError),
    /// The payload is not JSON.
    #[error("the payload of {0} is not JSON: {1}")]
    Payload(String, String),
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

/// Every key sealing `payload` (an event at `place`) takes, each once: what the writer
/// fetches (or makes) before [`seal`].
///
/// # Errors
/// [`SealError::NoOwner`]: the payload must not be stored.
pub fn keys_to_seal(place: &Place<'_>, payload: &Value) -> Result<Vec<(Scope, Uuid)>, SealError> {
    let mut keys = Vec::new();
    let Value::Object(fields) = payload else {
        return Ok(keys);
    };
    for personal in personal_fields(place.event_type) {
        if fields
            .get(personal.field)
            .is_none_or(|v| v.is_null() || is_sealed(v))
        {
            continue;
        }
        for k in personal.keys {
            let owner = owner(place, fields, *k, personal.field)?;
            if !keys.contains(&owner) {
                keys.push(owner);
            }
        }
    }
    Ok(keys)
}

/// Every key opening `payload` (of `event_type`) takes, each once: what a reader fetches
/// before [`open`]. Empty for a payload with nothing sealed.
pub fn keys_to_open(event_type: &str, payload: &Value) -> Vec<(Scope, Uuid)> {
    let mut keys = Vec::new();
    let Value::Object(fields) = payload else {
        return keys;
    };
    for personal in personal_fields(event_type) {
        let names = fields
            .get(personal.field)
            .filter(|v| is_sealed(v))
            .and_then(|v| v.get(KEYS))
            .and_then(Value::as_array);
        for owner in names
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().and_then(parse_owner))
        {
            if !keys.contains(&owner) {
                keys.push(owner);
            }
        }
    }
    keys
}

/// Whether the stored text of a payload of `event_type` may hold a sealed field: the
/// readers' test before they parse it.
pub fn may_be_sealed(event_type: &str, text: &str) -> bool {
    !personal_fields(event_type).is_empty() && text.contains("\"sealed\"")
}

/// Seals the personal fields of `payload` (an event at `place`) under the keys `key` gives
/// (`None`: destroyed — the party was forgotten, so the field is stored as `null` and the
/// payload marked forgotten: a forgotten party's texts are never written again).
///
/// # Errors
/// [`SealError`]: the payload must not be stored.
pub fn seal<E: std::fmt::Display>(
    place: &Place<'_>,
    payload: &mut Value,
    mut key: impl FnMut(Scope, Uuid) -> Result<Option<Key>, E>,
) -> Result<(), SealError> {
    let Value::Object(fields) = payload else {
        return Ok(());
    };
    let mut forgotten = false;
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
        let mut keys = Vec::with_capacity(owners.len());
        for (scope, id) in &owners {
            match key(*scope, *id).map_err(|e| SealError::Key(e.to_string()))? {
                Some(k) => keys.push(k),
                None => break,
            }
        }
        if keys.len() < owners.len() {
            forgotten = true;
            fields.insert(personal.field.into(), Value::Null);
            continue;
        }
        let mut bytes = value.to_string().into_bytes();
        for (layer, k) in keys.iter().enumerate() {
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
    if forgotten {
        fields.insert(FORGOTTEN.into(), Value::Bool(true));
    }
    Ok(())
}

/// What a reader makes of a text it cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// `null`, the payload marked `"forgotten": true` when a key was destroyed: what every
    /// reader of the log shows.
    Null,
    /// [`STAND_IN`], and no mark: what a state is folded from (an aggregate, a saga, a
    /// lookup), whose types hold a text where the history had one.
    StandIn,
}

pub use pm_domain::personal::STAND_IN;

/// Opens the sealed fields of `payload` (an event at `place`) with the keys `key` has
/// (`None`: destroyed). A field that cannot be opened reads as `unreadable` says; see
/// [`Opened`].
pub fn open(
    place: &Place<'_>,
    payload: &mut Value,
    mut key: impl FnMut(Scope, Uuid) -> Option<Key>,
    unreadable: Unreadable,
) -> Opened {
    let mut opened = Opened::default();
    let Value::Object(fields) = payload else {
        return opened;
    };
    // Written after forgetting: its fields were stored as `null`.
    let written_forgotten = fields.get(FORGOTTEN) == Some(&Value::Bool(true));
    let stand_in = || match unreadable {
        Unreadable::Null => Value::Null,
        Unreadable::StandIn => Value::String(STAND_IN.into()),
    };
    for personal in personal_fields(place.event_type) {
        let Some(value) = fields.get_mut(personal.field) else {
            continue;
        };
        if value.is_null() && written_forgotten {
            *value = stand_in();
            continue;
        }
        if !is_sealed(value) {
            continue;
        }
        *value = match open_field(place, personal.field, value, &mut key) {
            Ok(plain) => plain,
            Err(Unopened::Forgotten) => {
                opened.forgotten += 1;
                stand_in()
            }
            Err(Unopened::Refused) => {
                opened.refused += 1;
                stand_in()
            }
        };
    }
    match unreadable {
        Unreadable::Null if opened.forgotten > 0 => {
            fields.insert(FORGOTTEN.into(), Value::Bool(true));
        }
        Unreadable::Null => {}
        Unreadable::StandIn => {
            fields.remove(FORGOTTEN);
        }
    }
    opened
}

/// `payload` (of `event_type`) with every sealed field replaced by [`STAND_IN`] and no
/// mark, without opening anything: for a reader that needs only the history's shape (ids,
/// kinds) of a fact.
pub fn shape_only(event_type: &str, payload: &mut Value) {
    open(
        &Place {
            event_type,
            aggregate_type: "",
            aggregate_id: "",
            sequence: 0,
            conversation_id: None,
        },
        payload,
        |_, _| None,
        Unreadable::StandIn,
    );
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
