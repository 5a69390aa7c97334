//! Every event type the service writes to the log, named once: the `project_manager.*`
//! facts of the aggregates and the runes of the saga machines. Whoever describes the log to
//! the outside (the AsyncAPI document) is held to this list by the tests, so a new fact or
//! rune that is not described fails them.

use crate::actor::ActorRegistered;
use crate::checkpoint::ConversationCheckpointCreated;
use crate::conversation::ConversationStarted;
use crate::forgetting::{ACTOR_FORGOTTEN, CONVERSATION_FORGOTTEN};
use crate::message::MessageAdded;
use crate::saga::rune::SAGA_ANOMALY;
use crate::saga::{AgentRune, PlanRune, SessionRune, ToolRune, TurnRune};
use crate::task::{TaskCheckpointCreated, TaskCreated};
use crate::tool_policy::{ToolPolicyRemoved, ToolPolicySet};

/// Every fact the aggregates emit (each aggregate's `DomainEvent::event_type`).
pub const FACTS: &[&str] = &[
    ActorRegistered::NAME,
    ConversationStarted::NAME,
    ConversationCheckpointCreated::NAME,
    MessageAdded::NAME,
    TaskCreated::NAME,
    TaskCheckpointCreated::NAME,
    ToolPolicySet::NAME,
    ToolPolicyRemoved::NAME,
    ACTOR_FORGOTTEN,
    CONVERSATION_FORGOTTEN,
];

/// Every rune, machine by machine; `saga.anomaly`, which every machine writes, once and
/// last.
pub fn runes() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = [
        SessionRune::NAMES,
        AgentRune::NAMES,
        TurnRune::NAMES,
        PlanRune::NAMES,
        ToolRune::NAMES,
    ]
    .concat();
    all.retain(|name| *name != SAGA_ANOMALY);
    all.push(SAGA_ANOMALY);
    all
}

/// Every event type the log may hold: the facts, then the runes.
pub fn event_types() -> Vec<&'static str> {
    let mut all = FACTS.to_vec();
    all.extend(runes());
    all
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_event_type_is_named_once_facts_in_their_namespace_and_runes_outside_it() {
        let all = event_types();
        let unique: BTreeSet<&str> = all.iter().copied().collect();
        assert_eq!(unique.len(), all.len(), "a name twice: {all:?}");
        assert!(FACTS.iter().all(|f| f.starts_with("project_manager.")));
        assert!(runes().iter().all(|r| !r.starts_with("project_manager.")));
    }
}
