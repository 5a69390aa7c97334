//! Payloads sealed and opened with a [`KeyStore`]'s keys: the writer seals a payload's
//! personal fields before it is stored, every reader opens them after it is read
//! ([`sealing`] says how, [`pm_domain::personal`] which fields).

use std::collections::HashMap;

use pm_domain::personal::personal_fields;
use serde_json::Value;
use uuid::Uuid;

use super::sealing::{self, Fields, Opened, Place, SealError, Unreadable};
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
        let Some((mut fields, owners)) = to_seal(place, text)? else {
            return Ok(false);
        };
        let mut keys = HashMap::new();
        for (scope, id) in owners {
            let key = self.key_made(scope, id).await?;
            keys.insert((scope, id), key);
        }
        let sealed = seal_with(place, &mut fields, &keys)?;
        *text = sealed;
        Ok(true)
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
        let Some((mut fields, owners)) = to_seal(place, text)? else {
            return Ok(false);
        };
        if owners.iter().any(|o| *o != (fresh.scope, fresh.id)) {
            return Ok(false);
        }
        let keys = HashMap::from([((fresh.scope, fresh.id), Some(fresh.key.clone()))]);
        let sealed = seal_with(place, &mut fields, &keys)?;
        *text = sealed;
        Ok(true)
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
        let Some((mut fields, owners)) = to_seal(place, text)? else {
            return Ok(false);
        };
        let mut keys = HashMap::new();
        for (scope, id) in owners {
            let key = self.key_in(tx, scope, id).await?;
            keys.insert((scope, id), key);
        }
        let sealed = seal_with(place, &mut fields, &keys)?;
        *text = sealed;
        Ok(true)
    }

    /// The payload `text` (the event at `place`) with its sealed fields opened, when it has
    /// any (`None`: read it as it is): what cannot be read is as `unreadable` says. A field
    /// that does not open with its keys (moved to another event, altered) is logged, never
    /// an error.
    ///
    /// # Errors
    /// [`OpenError`]: the keys could not be read, or the text is not JSON.
    pub async fn open_text(
        &self,
        place: &Place<'_>,
        text: &str,
        unreadable: Unreadable,
    ) -> Result<Option<String>, OpenError> {
        let Some(mut fields) = Fields::parse(text)? else {
            return Ok(None);
        };
        let (_, changed) = self.open_fields(place, &mut fields, unreadable).await?;
        Ok(changed.then(|| fields.text()))
    }

    /// [`KeyStore::open_text`] on a parsed payload (an aggregate's event).
    ///
    /// # Errors
    /// [`OpenError`]: the keys could not be read.
    pub async fn open_payload(
        &self,
        place: &Place<'_>,
        payload: &mut Value,
        unreadable: Unreadable,
    ) -> Result<Opened, OpenError> {
        let text = payload.to_string();
        let Some(mut fields) = Fields::parse(&text)? else {
            return Ok(Opened::default());
        };
        let (opened, changed) = self.open_fields(place, &mut fields, unreadable).await?;
        if changed {
            *payload = serde_json::from_str(&fields.text())?;
        }
        Ok(opened)
    }

    async fn open_fields(
        &self,
        place: &Place<'_>,
        fields: &mut Fields<'_>,
        unreadable: Unreadable,
    ) -> Result<(Opened, bool), KeyError> {
        let needed = sealing::keys_to_open(place.event_type, fields);
        let mut keys: HashMap<(Scope, Uuid), Option<Key>> = HashMap::with_capacity(needed.len());
        for (scope, id) in needed {
            // Never made is read as destroyed: nothing can open it.
            keys.insert((scope, id), self.key(scope, id).await?.flatten());
        }
        let (opened, changed) = sealing::open_fields(
            place,
            fields,
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
        Ok((opened, changed))
    }
}

/// Why a payload could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The keys could not be read (the store is away, a key row is damaged).
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The stored payload is not JSON.
    #[error("a stored payload is not JSON: {0}")]
    Payload(#[from] serde_json::Error),
}

/// A payload's fields, and the keys sealing it takes.
type ToSeal<'t> = (Fields<'t>, Vec<(Scope, Uuid)>);

/// The payload `text`'s fields and the keys sealing it takes, when it has a personal text
/// in the clear.
fn to_seal<'t>(place: &Place<'_>, text: &'t str) -> Result<Option<ToSeal<'t>>, SealError> {
    if personal_fields(place.event_type).is_empty() {
        return Ok(None);
    }
    let not_json =
        |e: serde_json::Error| SealError::Payload(place.event_type.into(), e.to_string());
    let Some(fields) = Fields::parse(text).map_err(not_json)? else {
        return Ok(None);
    };
    let owners = sealing::keys_to_seal(place, &fields)?;
    Ok((!owners.is_empty()).then_some((fields, owners)))
}

/// The payload's text, its fields sealed with `keys`.
fn seal_with(
    place: &Place<'_>,
    fields: &mut Fields<'_>,
    keys: &HashMap<(Scope, Uuid), Option<Key>>,
) -> Result<String, SealError> {
    sealing::seal_fields(place, fields, |scope, id| {
        keys.get(&(scope, id))
            .cloned()
            .ok_or("a key not fetched before sealing")
    })?;
    Ok(fields.text())
}
