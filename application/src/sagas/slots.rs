//! A conversation's machines in memory, held in a [slot](crate::slots) per conversation:
//! decisions on one conversation are taken one at a time on this replica, and decisions on
//! different conversations never wait for each other.

use std::collections::HashMap;

use pm_domain::saga::{Instance, Sagas};
use uuid::Uuid;

use super::StoredConversation;

/// One conversation's machines, the version of the conversation they reflect, and the
/// last sequence of each instance's stream.
pub(super) struct Machines {
    pub(super) sagas: Sagas,
    pub(super) streams: HashMap<Instance, i64>,
    pub(super) version: i64,
}

impl Machines {
    /// The machines folded from a stored conversation.
    pub(super) fn restore(stored: StoredConversation) -> Self {
        let mut streams = HashMap::new();
        let mut last = None;
        for r in &stored.runes {
            streams.insert(r.recorded.instance, r.sequence);
            last = last.max(r.cause);
        }
        Self {
            sagas: Sagas::restore(last, stored.runes.iter().map(|r| &r.recorded)),
            streams,
            version: stored.version,
        }
    }
}

/// A conversation's held slot: `None` until the machines are loaded, and again after a
/// failed commit.
pub(super) type Held = crate::slots::Held<Option<Machines>>;

/// The slots of the conversations in memory.
pub(super) type Slots = crate::slots::Slots<Uuid, Option<Machines>>;
