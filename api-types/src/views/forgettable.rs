//! An entity whose personal texts may have been forgotten (TRUST.md "Forgetting a
//! person"), and the one rule every answer shows it by: a forgotten entity's personal
//! fields — those `pm_domain::personal::PERSONAL` names for the facts it shows — read
//! `null`, and it carries `"forgotten": true`; an entity not forgotten is serialized
//! exactly as before, without the key. Inside the service the unreadable texts hold
//! [`STAND_IN`] (the typed views need a text there); this wrapper is what keeps it from
//! ever being shown.

use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::message::MessageAdded;
use pm_domain::personal::{personal_fields, STAND_IN};
use pm_domain::task::TaskCreated;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ConversationView, TaskDetail, TaskView};

/// The mark a forgotten entity carries.
pub const FORGOTTEN: &str = "forgotten";

/// An entity as the read model shows it: its texts, or — forgotten — `null` in them.
#[derive(Debug, Clone, PartialEq)]
pub struct Forgettable<T> {
    /// The entity; a forgotten one holds [`STAND_IN`] in its unreadable texts.
    pub entity: T,
    /// Whether its personal texts were forgotten.
    pub forgotten: bool,
}

impl<T> Forgettable<T> {
    /// `entity`, forgotten or not.
    pub fn new(entity: T, forgotten: bool) -> Self {
        Self { entity, forgotten }
    }

    /// The same mark on what `f` makes of the entity.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Forgettable<U> {
        Forgettable {
            entity: f(self.entity),
            forgotten: self.forgotten,
        }
    }
}

/// Which facts' personal fields an entity's JSON shows.
pub trait Personal {
    /// Facts whose personal fields are fields of the entity's own object.
    const FACTS: &'static [&'static str];
    /// Objects in it that show a fact's personal fields: (field, fact).
    const NESTED: &'static [(&'static str, &'static str)] = &[];
}

impl Personal for ActorRegistered {
    const FACTS: &'static [&'static str] = &[ActorRegistered::NAME];
}

impl Personal for MessageAdded {
    const FACTS: &'static [&'static str] = &[MessageAdded::NAME];
}

impl Personal for ConversationCheckpointCreated {
    const FACTS: &'static [&'static str] = &[ConversationCheckpointCreated::NAME];
}

impl Personal for ConversationView {
    const FACTS: &'static [&'static str] = &[ConversationStarted::NAME];
    const NESTED: &'static [(&'static str, &'static str)] =
        &[("latest_checkpoint", ConversationCheckpointCreated::NAME)];
}

impl Personal for TaskView {
    const FACTS: &'static [&'static str] = &[TaskCreated::NAME];
}

impl Personal for TaskDetail {
    const FACTS: &'static [&'static str] = &[TaskCreated::NAME];
}

/// Applies `f` to every personal field of a `T`'s JSON object (`nested` objects that are
/// `null` have none), present or not.
fn each_field<T: Personal>(object: &mut Map<String, Value>, mut f: impl FnMut(&mut Value)) {
    let mut visit = |object: &mut Map<String, Value>, fact: &str| {
        for personal in personal_fields(fact) {
            f(object.entry(personal.field).or_insert(Value::Null));
        }
    };
    for fact in T::FACTS {
        visit(object, fact);
    }
    for (field, fact) in T::NESTED {
        if let Some(nested) = object.get_mut(*field).and_then(Value::as_object_mut) {
            visit(nested, fact);
        }
    }
}

impl<T: Serialize + Personal> Serialize for Forgettable<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.forgotten {
            return self.entity.serialize(s);
        }
        let mut value = serde_json::to_value(&self.entity).map_err(serde::ser::Error::custom)?;
        if let Some(object) = value.as_object_mut() {
            each_field::<T>(object, |v| *v = Value::Null);
            object.insert(FORGOTTEN.into(), Value::Bool(true));
        }
        value.serialize(s)
    }
}

/// Reads what [`Serialize`] wrote: a forgotten entity's `null` texts become [`STAND_IN`]
/// where its type needs a text.
impl<'de, T: DeserializeOwned + Personal> Deserialize<'de> for Forgettable<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut value = Value::deserialize(d)?;
        let forgotten = value
            .as_object_mut()
            .and_then(|o| o.remove(FORGOTTEN))
            .is_some_and(|v| v == Value::Bool(true));
        if forgotten {
            if let Ok(entity) = T::deserialize(&value) {
                return Ok(Self::new(entity, true));
            }
            if let Some(object) = value.as_object_mut() {
                each_field::<T>(object, |v| {
                    if v.is_null() {
                        *v = Value::String(STAND_IN.into());
                    }
                });
            }
        }
        T::deserialize(value)
            .map(|entity| Self::new(entity, forgotten))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
