//! [`Slots`]: one lock per conversation over its machines in memory, in a bounded cache.
//!
//! A writer holds a conversation's slot from loading its machines to committing what it
//! decided, so decisions on one conversation are taken one at a time on this replica, and
//! decisions on different conversations never wait for each other. The cache drops the
//! least recently used slots when full — never one that is held, never all at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::convert::Infallible;
use std::sync::Arc;

use pm_domain::saga::{Instance, Sagas};
use quick_cache::sync::Cache;
use quick_cache::{DefaultHashBuilder, Lifecycle, UnitWeighter};
use tokio::sync::{Mutex, OwnedMutexGuard};
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

type Slot = Arc<Mutex<Option<Machines>>>;

/// A held slot: `None` until the machines are loaded, and again after a failed commit.
pub(super) type Held = OwnedMutexGuard<Option<Machines>>;

/// Keeps held slots: a slot that someone holds (or waits for) has another reference.
#[derive(Debug, Clone, Copy, Default)]
struct PinHeld;

impl Lifecycle<Uuid, Slot> for PinHeld {
    type RequestState = ();

    fn is_pinned(&self, _: &Uuid, slot: &Slot) -> bool {
        Arc::strong_count(slot) > 1
    }

    fn on_evict(&self, _: &mut Self::RequestState, _: Uuid, _: Slot) {}
}

/// The slots of the conversations in memory.
pub(super) struct Slots {
    cache: Cache<Uuid, Slot, UnitWeighter, DefaultHashBuilder, PinHeld>,
}

impl Slots {
    /// Slots for at most `conversations` conversations (held ones may exceed it).
    pub(super) fn new(conversations: usize) -> Self {
        Self {
            cache: Cache::with(
                conversations,
                conversations as u64,
                UnitWeighter,
                DefaultHashBuilder::default(),
                PinHeld,
            ),
        }
    }

    /// Holds the slots of `conversations`, taken in id order so that two writers holding
    /// several never wait on each other.
    pub(super) async fn hold(&self, conversations: &BTreeSet<Uuid>) -> BTreeMap<Uuid, Held> {
        let mut held = BTreeMap::new();
        for conversation in conversations {
            let slot = self
                .cache
                .get_or_insert_with(conversation, || Ok::<_, Infallible>(Slot::default()))
                .unwrap_or_else(|never| match never {});
            held.insert(*conversation, slot.lock_owned().await);
        }
        held
    }

    /// How many conversations are in memory.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.cache.len()
    }
}
