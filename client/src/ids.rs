//! Ids computed offline: the UUIDv5 derivations the service applies to external
//! identities (API.md, "Idempotency"), so an ingress service knows an entity's id before
//! (or without) asking — to address a conversation it has not heard back about, or to
//! check that a redelivery lands on the same id.
//!
//! ```
//! use pm_client::ids;
//!
//! let conversation = ids::conversation_id("github", "org/repo#42");
//! let message = ids::message_id(conversation, "github-comment-991");
//! let actor = ids::actor_id("github:alice");
//! assert_eq!(conversation, ids::conversation_id("github", "org/repo#42"));
//! assert_eq!(conversation.get_version_num(), 5);
//! assert_ne!(message, actor);
//! ```
//!
//! Server-made ids (without an external identity) are UUIDv7 and cannot be derived.
//! The derivations are the service's own code (`pm_domain::ids`), re-exported, so the
//! client and the service cannot drift apart.

pub use pm_domain::ids::{actor_id, conversation_id, message_id, NAMESPACE};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivations_are_the_documented_uuidv5s() {
        let ns = NAMESPACE;
        assert_eq!(
            conversation_id("github", "org/repo#42"),
            uuid::Uuid::new_v5(&ns, b"github\norg/repo#42")
        );
        let c = conversation_id("s", "e");
        assert_eq!(
            message_id(c, "m-1"),
            uuid::Uuid::new_v5(&ns, format!("{c}\nm-1").as_bytes())
        );
        assert_eq!(actor_id("gh:alice"), uuid::Uuid::new_v5(&ns, b"gh:alice"));
    }

    /// The example of docs/API.md ("Derived ids"), whose Python twin prints these values.
    #[test]
    fn the_documented_example_values() {
        let ns: uuid::Uuid = "5e1f0c1d-6a9b-4c2e-9f3a-7b8d0e4c1a27"
            .parse()
            .expect("uuid");
        assert_eq!(NAMESPACE, ns);
        let conversation = conversation_id("github", "org/repo#42");
        assert_eq!(
            conversation.to_string(),
            "b70ae6f8-3935-5d4d-bfbb-3b939cc44fb2"
        );
        assert_eq!(
            message_id(conversation, "github-comment-990").to_string(),
            "b7d6e61c-d35c-5c3f-b381-4269ae668bbb"
        );
        assert_eq!(
            actor_id("github:alice").to_string(),
            "e7a97c72-f478-514e-9770-c4b7b895db30"
        );
    }
}
