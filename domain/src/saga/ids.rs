//! Ids the sagas make, derived (UUIDv5 with [`crate::ids::NAMESPACE`]) from what caused
//! them, so replaying the log makes the same ids.

use uuid::Uuid;

use crate::ids::NAMESPACE;

fn v5(name: &str) -> Uuid {
    Uuid::new_v5(&NAMESPACE, name.as_bytes())
}

/// `v5("agent\n{conversation_id}\n{actor_id}")`, or `v5("agent\n{conversation_id}\nroot")`
/// for a root agent without an actor.
pub fn agent_id(conversation_id: Uuid, actor_id: Option<Uuid>) -> Uuid {
    match actor_id {
        Some(actor) => v5(&format!("agent\n{conversation_id}\n{actor}")),
        None => v5(&format!("agent\n{conversation_id}\nroot")),
    }
}

/// `v5("turn\n{agent_id}\n{cause}")`; build `cause` with [`TurnCause`].
pub fn turn_id(agent_id: Uuid, cause: &TurnCause) -> Uuid {
    v5(&format!("turn\n{agent_id}\n{}", cause.as_key()))
}

/// `v5("tool_call\n{turn_id}\n{call_id}")`: the instance of a worker's call, so a report
/// naming (turn, `call_id`) finds its stream without a lookup.
pub fn tool_call_id(turn_id: Uuid, call_id: &str) -> Uuid {
    v5(&format!("tool_call\n{turn_id}\n{call_id}"))
}

/// `v5("plan\n{conversation_id}")`.
pub fn plan_id(conversation_id: Uuid) -> Uuid {
    v5(&format!("plan\n{conversation_id}"))
}

/// What enqueued a turn: the part of its id that makes it unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnCause {
    /// `message:{message_id}` — a human message.
    Message(Uuid),
    /// `auto_decide:{conversation_id}:{wait_epoch}` — a session timeout.
    AutoDecide {
        /// The conversation.
        conversation_id: Uuid,
        /// The wait it ended.
        wait_epoch: i64,
    },
    /// `task:{task_id}` — `task.created`.
    Task(Uuid),
    /// `task_checkpoint:{task_checkpoint_id}` — a retry or a resumption.
    TaskCheckpoint(Uuid),
}

impl TurnCause {
    /// The cause as it enters the id.
    pub fn as_key(&self) -> String {
        match self {
            Self::Message(id) => format!("message:{id}"),
            Self::AutoDecide {
                conversation_id,
                wait_epoch,
            } => format!("auto_decide:{conversation_id}:{wait_epoch}"),
            Self::Task(id) => format!("task:{id}"),
            Self::TaskCheckpoint(id) => format!("task_checkpoint:{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_same_cause_when_derived_twice_then_same_version5_ids() {
        let c = Uuid::from_u128(1);
        let a = Uuid::from_u128(2);
        assert_eq!(agent_id(c, Some(a)), agent_id(c, Some(a)));
        assert_eq!(agent_id(c, Some(a)).get_version_num(), 5);
        assert_ne!(agent_id(c, Some(a)), agent_id(c, None));
        let agent = agent_id(c, None);
        let t = turn_id(agent, &TurnCause::Message(a));
        assert_eq!(t, turn_id(agent, &TurnCause::Message(a)));
        assert_ne!(t, turn_id(agent, &TurnCause::Task(a)));
        assert_ne!(t, turn_id(agent, &TurnCause::TaskCheckpoint(a)));
        assert_eq!(plan_id(c), plan_id(c));
        assert_ne!(plan_id(c), plan_id(a));
    }

    #[test]
    fn given_the_documented_names_when_derived_then_ids_match_them() {
        let c = Uuid::from_u128(1);
        let expected = Uuid::new_v5(&NAMESPACE, format!("agent\n{c}\nroot").as_bytes());
        assert_eq!(agent_id(c, None), expected);
        let key = TurnCause::AutoDecide {
            conversation_id: c,
            wait_epoch: 2,
        }
        .as_key();
        assert_eq!(key, format!("auto_decide:{c}:2"));
    }
}
