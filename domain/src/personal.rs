//! Which texts of the log are personal data, and whose keys seal them (TRUST.md "Forgetting
//! a person", issue 33): stated once, here, for the log's writer and readers.
//!
//! A text is sealed under the key of every party that may ask for it to be forgotten: what
//! a person wrote under their actor's key *and* their conversation's, so that forgetting
//! either makes it unreadable; what identifies a person (an actor's name and external
//! identity) under the actor's key alone; the rest of a conversation's free text (titles,
//! summaries, instructions, what tools were given and gave back, errors a model or a tool
//! worded) under the conversation's key. Ids, states, kinds, times and names the service
//! itself chose stay in the clear: they are the history's shape, which forgetting keeps.

use crate::saga::rune::{
    AGENT_FAILED, PLAN_GOAL_RECEIVED, TOOL_APPROVED, TOOL_CALL, TOOL_DENIED, TOOL_PROGRESS,
    TOOL_RESULT, TURN_ERROR,
};

/// Whose key seals a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyOf {
    /// The actor the event is about (the event's aggregate is the actor).
    TheActor,
    /// The actor whose id the payload's field of this name holds (a message's author).
    ActorNamedBy(&'static str),
    /// The conversation the event belongs to.
    Conversation,
}

/// A field of a fact's or rune's payload that holds personal data: a string, or any JSON
/// (a tool's arguments and output), sealed whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersonalField {
    /// The payload's top-level field.
    pub field: &'static str,
    /// Every key it is sealed under (all of them are needed to read it).
    pub keys: &'static [KeyOf],
}

const ACTOR: &[KeyOf] = &[KeyOf::TheActor];
const AUTHOR_AND_CONVERSATION: &[KeyOf] = &[KeyOf::ActorNamedBy("actor_id"), KeyOf::Conversation];
const CONVERSATION: &[KeyOf] = &[KeyOf::Conversation];

const fn field(field: &'static str, keys: &'static [KeyOf]) -> PersonalField {
    PersonalField { field, keys }
}

/// The personal fields of every event type that has any (the others have none).
pub const PERSONAL: &[(&str, &[PersonalField])] = &[
    (
        crate::actor::ActorRegistered::NAME,
        &[
            field("display_name", ACTOR),
            field("external_identity", ACTOR),
        ],
    ),
    (
        crate::message::MessageAdded::NAME,
        &[
            field("content", AUTHOR_AND_CONVERSATION),
            field("external_identity", AUTHOR_AND_CONVERSATION),
        ],
    ),
    (
        crate::conversation::ConversationStarted::NAME,
        &[field("title", CONVERSATION)],
    ),
    (
        crate::checkpoint::ConversationCheckpointCreated::NAME,
        &[field("summary", CONVERSATION)],
    ),
    (
        crate::task::TaskCreated::NAME,
        &[field("instructions", CONVERSATION)],
    ),
    (TOOL_CALL, &[field("arguments", CONVERSATION)]),
    (TOOL_PROGRESS, &[field("chunk", CONVERSATION)]),
    (
        TOOL_RESULT,
        &[field("output", CONVERSATION), field("error", CONVERSATION)],
    ),
    (TOOL_APPROVED, &[field("comment", CONVERSATION)]),
    (TOOL_DENIED, &[field("comment", CONVERSATION)]),
    (TURN_ERROR, &[field("message", CONVERSATION)]),
    (AGENT_FAILED, &[field("error", CONVERSATION)]),
    (
        PLAN_GOAL_RECEIVED,
        &[field("goal_description", CONVERSATION)],
    ),
];

/// The text an unreadable personal field holds where a type needs one (a folded state, a
/// fact read by a projection): never shown — readers show `null` and `"forgotten": true`.
pub const STAND_IN: &str = "[forgotten]";

/// Puts [`STAND_IN`] in every personal field of `payload` (an event of `event_type`) that
/// reads `null` — one that could not be read — and drops the `forgotten` mark; answers
/// whether there was any.
pub fn stand_in_unreadable(event_type: &str, payload: &mut serde_json::Value) -> bool {
    let Some(fields) = payload.as_object_mut() else {
        return false;
    };
    let mut any = fields.remove("forgotten").is_some();
    for personal in personal_fields(event_type) {
        if let Some(value) = fields.get_mut(personal.field).filter(|v| v.is_null()) {
            *value = serde_json::Value::String(STAND_IN.into());
            any = true;
        }
    }
    any
}

/// The personal fields of events of `event_type` (none for most).
pub fn personal_fields(event_type: &str) -> &'static [PersonalField] {
    PERSONAL
        .iter()
        .find(|(name, _)| *name == event_type)
        .map_or(&[], |(_, fields)| *fields)
}

#[cfg(test)]
mod tests;
