//! A conversation's machines in memory, held in a [slot](crate::slots) per conversation:
//! decisions on one conversation are taken one at a time on this replica, and decisions on
//! different conversations never wait for each other.

use std::collections::HashMap;

use pm_domain::saga::{Instance, Sagas};
use uuid::Uuid;

use super::written::Written;
use super::{snapshot, StoredConversation};

/// One conversation's machines, the version of the conversation they reflect, and the
/// last sequence of each instance's stream.
pub(super) struct Machines {
    pub(super) sagas: Sagas,
    pub(super) streams: HashMap<Instance, i64>,
    pub(super) version: i64,
    /// How many runes the machines are folded from.
    pub(super) runes: u64,
    /// How many of them the conversation's last snapshot holds.
    pub(super) covered: u64,
    /// What its rows said when this replica last wrote them.
    pub(super) written: Written,
}

impl Machines {
    /// The machines of a conversation without runes.
    pub(super) fn empty() -> Self {
        Self {
            sagas: Sagas::default(),
            streams: HashMap::new(),
            version: 0,
            runes: 0,
            covered: 0,
            written: Written::default(),
        }
    }

    /// The machines folded from a stored conversation: its snapshot, if any, and the runes
    /// after it.
    ///
    /// # Errors
    /// The decoder's message when the snapshot does not read.
    pub(super) fn restore(stored: StoredConversation) -> Result<Self, String> {
        let (mut sagas, mut streams, covered) = match &stored.snapshot {
            Some(s) => {
                let d = snapshot::decode(&s.state)?;
                (d.sagas, d.streams, d.runes)
            }
            None => (Sagas::default(), HashMap::new(), 0),
        };
        let mut last = None;
        for r in &stored.runes {
            streams.insert(r.recorded.instance, r.sequence);
            last = last.max(r.cause);
        }
        sagas.apply_all(last, stored.runes.iter().map(|r| &r.recorded));
        Ok(Self {
            sagas,
            streams,
            version: stored.version,
            // `covered` comes from the database: never an overflow on a corrupt count.
            runes: covered.saturating_add(stored.runes.len() as u64),
            covered,
            written: Written::default(),
        })
    }
}

/// A conversation's held slot: `None` until the machines are loaded, and again after a
/// failed commit.
pub(super) type Held = crate::slots::Held<Option<Machines>>;

/// The slots of the conversations in memory.
pub(super) type Slots = crate::slots::Slots<Uuid, Option<Machines>>;
