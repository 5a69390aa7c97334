//! Ids derived from external identities (UUIDv5), so a retried delivery lands on the same
//! id (API.md, Idempotency). Server-made ids are UUIDv7 and are minted by the caller.

use uuid::Uuid;

/// The UUIDv5 namespace of every derived project-manager id.
pub const NAMESPACE: Uuid = Uuid::from_u128(0x5e1f_0c1d_6a9b_4c2e_9f3a_7b8d_0e4c_1a27);

/// `UUIDv5(namespace, external_source + "\n" + external_id)`.
pub fn conversation_id(external_source: &str, external_id: &str) -> Uuid {
    Uuid::new_v5(
        &NAMESPACE,
        format!("{external_source}\n{external_id}").as_bytes(),
    )
}

/// `UUIDv5(namespace, conversation_id + "\n" + external_identity)`.
pub fn message_id(conversation_id: Uuid, external_identity: &str) -> Uuid {
    Uuid::new_v5(
        &NAMESPACE,
        format!("{conversation_id}\n{external_identity}").as_bytes(),
    )
}

/// `UUIDv5(namespace, external_identity)`.
pub fn actor_id(external_identity: &str) -> Uuid {
    Uuid::new_v5(&NAMESPACE, external_identity.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_same_external_identity_when_derived_twice_then_same_version5_id() {
        let a = conversation_id("github", "issue/1");
        assert_eq!(a, conversation_id("github", "issue/1"));
        assert_eq!(a.get_version_num(), 5);
        assert_ne!(a, conversation_id("github", "issue/2"));
    }

    #[test]
    fn given_same_identity_in_two_conversations_when_derived_then_ids_differ() {
        let c1 = Uuid::from_u128(1);
        let c2 = Uuid::from_u128(2);
        assert_ne!(message_id(c1, "m"), message_id(c2, "m"));
        assert_eq!(message_id(c1, "m"), message_id(c1, "m"));
        assert_eq!(actor_id("gh:alice"), actor_id("gh:alice"));
    }
}
