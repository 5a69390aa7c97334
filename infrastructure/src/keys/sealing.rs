//! The personal fields of a payload ([`pm_domain::personal`]) sealed under their keys, and
//! opened again: the one transformation the log's writer applies before a payload is
//! stored, and its readers after it is read.
//!
//! A sealed field holds `{"keys": ["actor:<id>", "conversation:<id>"], "sealed": "<base64>"}`:
//! the field's JSON text sealed under each key in turn (the first innermost), each layer
//! bound to the event (aggregate type, id and sequence) and the field — a sealed value
//! copied onto another event or field does not open. `null` and absent fields stay as they
//! are. Opening a field whose key was destroyed gives `null` and marks the payload
//! `"forgotten": true`; one that does not open (moved, altered) gives `null` and is counted,
//! never an error.
//!
//! Both work on the payload's text ([`Fields`]): the fields that change are replaced, the
//! others written back as they were, and no `serde_json::Value` is built — the writer
//! seals, and the log's reader opens, every personal payload on the command path.

use std::borrow::Cow;
use std::fmt::Write;

use base64::Engine;
use pm_domain::personal::{personal_fields, KeyOf};
use serde::de::IgnoredAny;
use uuid::Uuid;

pub use payload::Fields;
use payload::{is_sealed, SealedForm};

use super::{CipherError, Key, Scope};

mod payload;

const NULL: &str = "null";
const TRUE: &str = "true";

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

/// The mark of a payload some of whose texts were forgotten.
pub const FORGOTTEN: &str = "forgotten";

/// Every key sealing the payload `fields` (an event at `place`) takes, each once: what the
/// writer fetches (or makes) before [`seal_fields`].
///
/// # Errors
/// [`SealError::NoOwner`]: the payload must not be stored.
pub fn keys_to_seal(
    place: &Place<'_>,
    fields: &Fields<'_>,
) -> Result<Vec<(Scope, Uuid)>, SealError> {
    let mut keys = Vec::new();
    for personal in personal_fields(place.event_type) {
        if fields
            .get(personal.field)
            .is_none_or(|v| v == NULL || is_sealed(v))
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

/// Every key opening the payload `fields` (of `event_type`) takes, each once: what a reader
/// fetches before [`open_fields`]. Empty for a payload with nothing sealed.
pub fn keys_to_open(event_type: &str, fields: &Fields<'_>) -> Vec<(Scope, Uuid)> {
    let mut keys = Vec::new();
    for personal in personal_fields(event_type) {
        let Some(form) = fields
            .get(personal.field)
            .filter(|v| is_sealed(v))
            .and_then(|v| serde_json::from_str::<SealedForm<'_>>(v).ok())
        else {
            continue;
        };
        for owner in form.keys.iter().filter_map(|n| parse_owner(n)) {
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

/// Seals the personal fields of the payload `fields` (an event at `place`) under the keys
/// `key` gives (`None`: destroyed — the party was forgotten, so the field is stored as
/// `null` and the payload marked forgotten: a forgotten party's texts are never written
/// again). Answers whether anything changed.
///
/// # Errors
/// [`SealError`]: the payload must not be stored.
pub fn seal_fields<E: std::fmt::Display>(
    place: &Place<'_>,
    fields: &mut Fields<'_>,
    mut key: impl FnMut(Scope, Uuid) -> Result<Option<Key>, E>,
) -> Result<bool, SealError> {
    let (mut changed, mut forgotten) = (false, false);
    for personal in personal_fields(place.event_type) {
        let Some(value) = fields.get(personal.field) else {
            continue;
        };
        if value == NULL || is_sealed(value) {
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
        changed = true;
        if keys.len() < owners.len() {
            forgotten = true;
            fields.set(personal.field, Cow::Borrowed(NULL));
            continue;
        }
        let mut aad = Aad::new(place, personal.field);
        let mut bytes = value.as_bytes().to_vec();
        for (layer, k) in keys.iter().enumerate() {
            bytes = k.seal(aad.layer(layer), &bytes)?;
        }
        let mut sealed = String::from(r#"{"keys":["#);
        for (at, (scope, id)) in owners.iter().enumerate() {
            let comma = if at > 0 { "," } else { "" };
            let _ = write!(sealed, r#"{comma}"{}:{id}""#, scope.as_str());
        }
        sealed.push_str(r#"],"sealed":""#);
        base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut sealed);
        sealed.push_str(r#""}"#);
        fields.set(personal.field, Cow::Owned(sealed));
    }
    if forgotten {
        fields.set(FORGOTTEN, Cow::Borrowed(TRUE));
    }
    Ok(changed)
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

/// Opens the sealed fields of the payload `fields` (an event at `place`) with the keys
/// `key` has (`None`: destroyed). A field that cannot be opened reads as `unreadable`
/// says; see [`Opened`]. Answers too whether anything changed.
pub fn open_fields(
    place: &Place<'_>,
    fields: &mut Fields<'_>,
    mut key: impl FnMut(Scope, Uuid) -> Option<Key>,
    unreadable: Unreadable,
) -> (Opened, bool) {
    let mut opened = Opened::default();
    let mut changed = false;
    // Written after forgetting: its fields were stored as `null`.
    let written_forgotten = fields.get(FORGOTTEN) == Some(TRUE);
    let stand_in = || match unreadable {
        Unreadable::Null => Cow::Borrowed(NULL),
        Unreadable::StandIn => Cow::Owned(serde_json::Value::from(STAND_IN).to_string()),
    };
    for personal in personal_fields(place.event_type) {
        let Some(value) = fields.get(personal.field) else {
            continue;
        };
        if value == NULL && written_forgotten {
            if unreadable == Unreadable::StandIn {
                fields.set(personal.field, stand_in());
                changed = true;
            }
            continue;
        }
        if !is_sealed(value) {
            continue;
        }
        let plain = match open_field(place, personal.field, value, &mut key) {
            Ok(plain) => Cow::Owned(plain),
            Err(Unopened::Forgotten) => {
                opened.forgotten += 1;
                stand_in()
            }
            Err(Unopened::Refused) => {
                opened.refused += 1;
                stand_in()
            }
        };
        fields.set(personal.field, plain);
        changed = true;
    }
    match unreadable {
        Unreadable::Null if opened.forgotten > 0 => {
            fields.set(FORGOTTEN, Cow::Borrowed(TRUE));
        }
        Unreadable::Null => {}
        Unreadable::StandIn => changed |= fields.remove(FORGOTTEN),
    }
    (opened, changed)
}

/// The payload `text` (of `event_type`) with every sealed field replaced by [`STAND_IN`]
/// and no mark, without opening anything: for a reader that needs only the history's shape
/// (ids, kinds) of a fact.
///
/// # Errors
/// The parser's, when `text` is not JSON.
pub fn shape_only<'t>(event_type: &str, text: &'t str) -> Result<Cow<'t, str>, serde_json::Error> {
    let Some(mut fields) = Fields::parse(text)? else {
        return Ok(Cow::Borrowed(text));
    };
    let place = Place {
        event_type,
        aggregate_type: "",
        aggregate_id: "",
        sequence: 0,
        conversation_id: None,
    };
    let (_, changed) = open_fields(&place, &mut fields, |_, _| None, Unreadable::StandIn);
    Ok(if changed {
        Cow::Owned(fields.text())
    } else {
        Cow::Borrowed(text)
    })
}

enum Unopened {
    Forgotten,
    Refused,
}

fn open_field(
    place: &Place<'_>,
    field: &str,
    sealed: &str,
    key: &mut impl FnMut(Scope, Uuid) -> Option<Key>,
) -> Result<String, Unopened> {
    let form: SealedForm<'_> = serde_json::from_str(sealed).map_err(|_| Unopened::Refused)?;
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(form.sealed.as_bytes())
        .map_err(|_| Unopened::Refused)?;
    let owners = form
        .keys
        .iter()
        .map(|name| parse_owner(name).ok_or(Unopened::Refused))
        .collect::<Result<Vec<_>, _>>()?;
    // Every key first: one destroyed is forgetting, whatever the others say.
    let keys = owners
        .iter()
        .map(|(scope, id)| key(*scope, *id).ok_or(Unopened::Forgotten))
        .collect::<Result<Vec<_>, _>>()?;
    let mut aad = Aad::new(place, field);
    for (layer, k) in keys.iter().enumerate().rev() {
        bytes = k
            .open_owned(aad.layer(layer), bytes)
            .ok_or(Unopened::Refused)?;
    }
    let plain = String::from_utf8(bytes).map_err(|_| Unopened::Refused)?;
    // Spliced into the payload's text as it is: it must be one JSON value.
    serde_json::from_str::<IgnoredAny>(&plain).map_err(|_| Unopened::Refused)?;
    Ok(plain)
}

fn parse_owner(name: &str) -> Option<(Scope, Uuid)> {
    let (scope, id) = name.split_once(':')?;
    Some((Scope::parse(scope)?, id.parse().ok()?))
}

/// The key of `k` for a field of the event at `place`.
fn owner(
    place: &Place<'_>,
    fields: &Fields<'_>,
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
            .and_then(|id| serde_json::from_str::<Uuid>(id).ok())
            .map(|id| (Scope::Actor, id))
            .ok_or_else(|| missing("actor")),
        KeyOf::Conversation => place
            .conversation_id
            .map(|id| (Scope::Conversation, id))
            .ok_or_else(|| missing("conversation")),
    }
}

/// What each layer of a sealed field is bound to: the event, the field, the layer.
struct Aad {
    text: String,
    prefix: usize,
}

impl Aad {
    fn new(place: &Place<'_>, field: &str) -> Self {
        let text = format!(
            "{}\n{}\n{}\n{field}\n",
            place.aggregate_type, place.aggregate_id, place.sequence
        );
        let prefix = text.len();
        Self { text, prefix }
    }

    fn layer(&mut self, layer: usize) -> &[u8] {
        self.text.truncate(self.prefix);
        let _ = write!(self.text, "{layer}");
        self.text.as_bytes()
    }
}

#[cfg(test)]
mod tests;
