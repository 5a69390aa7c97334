//! Payloads sealed and opened with a [`KeyStore`]'s keys: the writer seals a payload's
//! personal fields before it is stored, every reader opens them after it is read
//! ([`sealing`] says how, [`pm_domain::personal`] which fields).

use std::collections::HashMap;

use pm_domain::personal::personal_fields;
use serde_json::Value;
use uuid::Uuid;

use super::sealing::{self, Opened, Place, SealError, Unreadable};
use super::{Key, KeyError, KeyStore, Scope};
use crate::db::Tx;

impl KeyStore {
    /// Seals the personal fields of the payload `text` (of the event at `place`), making
    /// the keys it needs; answers whether there was anything to seal — a payload without
    /// a personal text in the clear is left as it is, byte for byte.
    ///
    /// # Errors
    /// [`SealError`]: the payload must not be stored.
    pub async fn seal_text(&self, place: &Place<'_>, text: &mut String) -> Result<bool, SealError> {
        let Some((mut payload, owners)) = to_seal(place, text)? else {
            return Ok(false);
        };
        let mut keys = HashMap::new();
        for (scope, id) in owners {
            let key = self.key_made(scope, id).await?;
            keys.insert((scope, id), key);
        }
        seal_with(place, &mut payload, &keys, text)
    }

    /// Seals the payload `text` of a party's first fact with `fresh` alone; answers
    /// `false`, leaving `text` as it is, when it needs another key too (the caller seals it
    /// with [`KeyStore::seal_text`] then).
    ///
    /// # Errors
    /// [`SealError`]: the payload must not be stored.
    pub fn seal_text_fresh(
        &self,
        place: &Place<'_>,
        text: &mut String,
        fresh: &super::FreshKey,
    ) -> Result<bool, SealError> {
        let Some((mut payload, owners)) = to_seal(place, text)? else {
            return Ok(false);
        };
        if owners.iter().any(|o| *o != (fresh.scope, fresh.id)) {
            return Ok(false);
        }
        let keys = HashMap::from([((fresh.scope, fresh.id), Some(fresh.key.clone()))]);
        seal_with(place, &mut payload, &keys, text)
    }

    /// [`KeyStore::seal_text`] for a writer inside `tx`: keys it has to make are made in
    /// `tx` (on SQLite a second connection could not write while `tx` does).
    ///
    /// # Errors
    /// [`SealError`]: the payload must not be stored, and `tx` must roll back.
    pub async fn seal_text_in(
        &self,
        tx: &mut Tx,
        place: &Place<'_>,
        text: &mut String,
    ) -> Result<bool, SealError> {
        let Some((mut payload, owners)) = to_seal(place, text)? else {
            return Ok(false);
        };
        let mut keys = HashMap::new();
        for (scope, id) in owners {
            let key = self.key_in(tx, scope, id).await?;
            keys.insert((scope, id), key);
        }
        seal_with(place, &mut payload, &keys, text)
    }

    /// Opens the sealed fields of `payload` (the event at `place`): what cannot be read is
    /// as `unreadable` says. A field that does not open with its keys (moved to another
    /// event, altered) is logged, never an error.
    ///
    /// # Errors
    /// [`KeyError`]: the keys could not be read (the store is away, a key row is damaged).
    pub async fn open_payload(
        &self,
        place: &Place<'_>,
        payload: &mut Value,
        unreadable: Unreadable,
    ) -> Result<Opened, KeyError> {
        let needed = sealing::keys_to_open(place.event_type, payload);
        let mut keys: HashMap<(Scope, Uuid), Option<Key>> = HashMap::with_capacity(needed.len());
        for (scope, id) in needed {
            // Never made is read as destroyed: nothing can open it.
            keys.insert((scope, id), self.key(scope, id).await?.flatten());
        }
        let opened = sealing::open(
            place,
            payload,
            |scope, id| keys.get(&(scope, id)).cloned().flatten(),
            unreadable,
        );
        if opened.refused > 0 {
            tracing::warn!(
                aggregate_type = place.aggregate_type,
                aggregate_id = place.aggregate_id,
                sequence = place.sequence,
                fields = opened.refused,
                "sealed texts that do not open with their keys (moved or altered) read as null"
            );
            metrics::counter!("pm_sealed_refused_total").increment(opened.refused as u64);
        }
        Ok(opened)
    }
}

/// A payload parsed, and the keys sealing it takes.
type ToSeal = (Value, Vec<(Scope, Uuid)>);

/// The payload `text` parsed and the keys sealing it takes, when it has a personal text in
/// the clear.
fn to_seal(place: &Place<'_>, text: &str) -> Result<Option<ToSeal>, SealError> {
    if personal_fields(place.event_type).is_empty() {
        return Ok(None);
    }
    let payload: Value = serde_json::from_str(text)
        .map_err(|e| SealError::Payload(place.event_type.to_string(), e.to_string()))?;
    let owners = sealing::keys_to_seal(place, &payload)?;
    Ok((!owners.is_empty()).then_some((payload, owners)))
}

fn seal_with(
    place: &Place<'_>,
    payload: &mut Value,
    keys: &HashMap<(Scope, Uuid), Option<Key>>,
    text: &mut String,
) -> Result<bool, SealError> {
    sealing::seal(place, payload, |scope, id| {
        keys.get(&(scope, id))
            .cloned()
            .ok_or("a key not fetched before sealing")
    })?;
    *text = payload.to_string();
    Ok(true)
}
