//! Each event type's payload schema, taken from the type that writes it — a fact's struct
//! (whose `NAME` stands beside it) or a rune's variant of its machine's enum (whose serde
//! name is the rune's name) — with every schema they refer to. Nothing here is written by
//! hand, so the document cannot describe a payload the log does not hold.

use std::collections::BTreeMap;

use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::forgetting::{Forgotten, ACTOR_FORGOTTEN, CONVERSATION_FORGOTTEN};
use pm_domain::message::MessageAdded;
use pm_domain::saga::{AgentRune, PlanRune, SessionRune, ToolRune, TurnRune};
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use pm_domain::tool_policy::{ToolPolicyRemoved, ToolPolicySet};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

/// The tag naming a rune in its machine's enum (the payload the log stores drops it).
const RUNE_TAG: &str = "rune";

/// The schemas of the document's `components/schemas`, and which one each event type's
/// payload is.
#[derive(Debug, Default)]
pub struct Schemas {
    /// Every schema, by its component name (the Rust type's, as in `/openapi.json`).
    pub components: Map<String, Value>,
    /// Each event type's payload: a `$ref` into `components`.
    pub payloads: BTreeMap<String, Value>,
}

impl Schemas {
    /// The payloads of every fact and rune, and the schemas they need.
    pub fn of_the_log() -> Self {
        let mut schemas = Self::default();
        schemas.fact::<ActorRegistered>(ActorRegistered::NAME);
        schemas.fact::<ConversationStarted>(ConversationStarted::NAME);
        schemas.fact::<ConversationCheckpointCreated>(ConversationCheckpointCreated::NAME);
        schemas.fact::<MessageAdded>(MessageAdded::NAME);
        schemas.fact::<TaskCreated>(TaskCreated::NAME);
        schemas.fact::<TaskCheckpointCreated>(TaskCheckpointCreated::NAME);
        schemas.fact::<ToolPolicySet>(ToolPolicySet::NAME);
        schemas.fact::<ToolPolicyRemoved>(ToolPolicyRemoved::NAME);
        schemas.fact::<Forgotten>(ACTOR_FORGOTTEN);
        schemas.fact::<Forgotten>(CONVERSATION_FORGOTTEN);
        schemas.runes::<SessionRune>();
        schemas.runes::<AgentRune>();
        schemas.runes::<TurnRune>();
        schemas.runes::<PlanRune>();
        schemas.runes::<ToolRune>();
        super::forgettable::mark(&mut schemas.components, &schemas.payloads);
        schemas
    }

    /// Adds `T` and every schema it refers to; answers a `$ref` to it.
    pub fn add<T: ToSchema>(&mut self) -> Value {
        let mut all = Vec::new();
        T::schemas(&mut all);
        all.push((T::name().into_owned(), T::schema()));
        for (name, schema) in all {
            self.components
                .insert(name, serde_json::to_value(schema).unwrap_or_default());
        }
        reference(&T::name())
    }

    /// A fact: its struct is its payload.
    fn fact<T: ToSchema>(&mut self, name: &str) {
        let payload = self.add::<T>();
        self.payloads.insert(name.to_string(), payload);
    }

    /// A machine's runes: each variant of its enum (`allOf` of the payload's `$ref` and
    /// the `rune` tag naming it) is the payload of the rune it names. The enum itself is
    /// no payload, so it leaves the components again.
    fn runes<T: ToSchema>(&mut self) {
        self.add::<T>();
        let Some(enum_schema) = self.components.remove(T::name().as_ref()) else {
            return;
        };
        let variants = enum_schema["oneOf"].as_array().cloned().unwrap_or_default();
        for variant in variants {
            let parts = variant["allOf"].as_array().cloned().unwrap_or_default();
            let payload = parts.iter().find(|p| p.get("$ref").is_some());
            let rune = parts
                .iter()
                .find_map(|p| p["properties"][RUNE_TAG]["enum"][0].as_str());
            if let (Some(payload), Some(rune)) = (payload, rune) {
                self.payloads.insert(rune.to_string(), payload.clone());
            }
        }
    }
}

/// A `$ref` to the component schema `name`.
pub fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_type_of_the_catalogue_has_a_payload_and_no_other() {
        let schemas = Schemas::of_the_log();
        let mut named: Vec<&str> = schemas.payloads.keys().map(String::as_str).collect();
        let mut catalogue = pm_domain::catalogue::event_types();
        named.sort_unstable();
        catalogue.sort_unstable();
        assert_eq!(named, catalogue);
    }

    #[test]
    fn every_payload_refers_to_a_schema_of_the_document() {
        let schemas = Schemas::of_the_log();
        for (event_type, payload) in &schemas.payloads {
            let target = payload["$ref"].as_str().unwrap_or_default();
            let name = target.trim_start_matches("#/components/schemas/");
            assert!(
                schemas.components.contains_key(name),
                "{event_type}: {target}"
            );
        }
    }

    #[test]
    fn a_runes_payload_is_its_variants_struct_without_the_tag() {
        let schemas = Schemas::of_the_log();
        let target = |rune: &str| schemas.payloads[rune]["$ref"].clone();
        assert_eq!(target("agent.spawning"), reference("AgentSpawning")["$ref"]);
        assert_eq!(target("saga.anomaly"), reference("SagaAnomaly")["$ref"]);
        assert!(!schemas.components.contains_key("AgentRune"));
    }
}
