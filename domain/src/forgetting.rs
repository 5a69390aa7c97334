//! Forgetting a person or a conversation (TRUST.md "Forgetting a person"): the facts
//! `project_manager.actor.forgotten` and `project_manager.conversation.forgotten`, service
//! additions like `actor.registered`. The fact is the erasure's record in the log; the
//! erasure itself is the destruction of the party's key in the transaction that appends it
//! ([`forgets`] names whose), so the texts sealed under it can never be read again while
//! the ids and the shape of the history stay.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `project_manager.actor.forgotten`.
pub const ACTOR_FORGOTTEN: &str = "project_manager.actor.forgotten";
/// `project_manager.conversation.forgotten`.
pub const CONVERSATION_FORGOTTEN: &str = "project_manager.conversation.forgotten";

/// The payload of both facts: who or what was forgotten, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Forgotten {
    /// The actor's or conversation's id.
    pub id: Uuid,
    /// When it was forgotten (the first time: forgetting again changes nothing).
    #[serde(with = "crate::time")]
    pub forgotten_at: DateTime<Utc>,
}

/// Whose key a forgetting destroys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Party {
    /// An actor's: their name and identity, and what they wrote.
    Actor,
    /// A conversation's: every text of it.
    Conversation,
}

/// The party an event of `event_type` forgets (its aggregate id is the party's id);
/// `None` for every other event.
pub fn forgets(event_type: &str) -> Option<Party> {
    match event_type {
        ACTOR_FORGOTTEN => Some(Party::Actor),
        CONVERSATION_FORGOTTEN => Some(Party::Conversation),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_the_forgetting_facts_when_asked_whose_key_then_their_party_and_none_for_others() {
        assert_eq!(forgets(ACTOR_FORGOTTEN), Some(Party::Actor));
        assert_eq!(forgets(CONVERSATION_FORGOTTEN), Some(Party::Conversation));
        assert_eq!(forgets("project_manager.actor.registered"), None);
        assert_eq!(forgets("tool.call"), None);
    }

    #[test]
    fn given_a_forgetting_when_serialized_then_exactly_id_and_forgotten_at() {
        let fact = Forgotten {
            id: Uuid::nil(),
            forgotten_at: crate::time::truncate(
                DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z")
                    .expect("a time")
                    .with_timezone(&Utc),
            ),
        };
        let value = serde_json::to_value(&fact).expect("serializes");
        assert_eq!(
            value,
            serde_json::json!({
                "id": "00000000-0000-0000-0000-000000000000",
                "forgotten_at": "2026-11-28T10:00:00.000000Z"
            })
        );
        assert!(serde_json::from_value::<Forgotten>(serde_json::json!({
            "id": Uuid::nil(), "forgotten_at": "2026-11-28T10:00:00Z", "by": "x"
        }))
        .is_err());
    }
}
