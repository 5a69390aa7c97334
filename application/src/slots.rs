//! [`Slots`]: one async lock per key over a value kept in memory, in a bounded cache — the
//! aggregates of the command path and the conversations of the sagas are held this way.
//!
//! A writer holds a key's slot from loading its value to committing what it decided, so
//! decisions on one key are taken one at a time on this replica while different keys never
//! wait for each other. When full, the cache drops its least recently used slots (quick_cache's
//! CLOCK-based approximation of LRU) — never one that is held or waited for, never all at
//! once.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::hash::Hash;
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::{DefaultHashBuilder, Lifecycle, UnitWeighter};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// A held slot.
pub type Held<T> = OwnedMutexGuard<T>;

/// Keeps held slots: a slot that someone holds (or waits for) has another reference.
#[derive(Debug, Clone, Copy, Default)]
struct PinHeld;

impl<K, T> Lifecycle<K, Arc<Mutex<T>>> for PinHeld {
    type RequestState = ();

    fn is_pinned(&self, _: &K, slot: &Arc<Mutex<T>>) -> bool {
        Arc::strong_count(slot) > 1
    }

    fn on_evict(&self, _: &mut Self::RequestState, _: K, _: Arc<Mutex<T>>) {}
}

/// The slots of the keys in memory; a new slot holds `T::default()`.
pub struct Slots<K, T> {
    cache: Cache<K, Arc<Mutex<T>>, UnitWeighter, DefaultHashBuilder, PinHeld>,
}

impl<K, T> Slots<K, T>
where
    K: Eq + Hash + Clone,
    T: Default,
{
    /// Slots for at most `capacity` keys (at least 16; held ones may exceed it).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(16);
        Self {
            cache: Cache::with(
                capacity,
                capacity as u64,
                UnitWeighter,
                DefaultHashBuilder::default(),
                PinHeld,
            ),
        }
    }

    /// Holds `key`'s slot.
    pub async fn hold(&self, key: &K) -> Held<T> {
        self.slot(key).lock_owned().await
    }

    /// Holds the slots of `keys`, taken in order so that two writers holding several never
    /// wait on each other.
    pub async fn hold_all(&self, keys: &BTreeSet<K>) -> BTreeMap<K, Held<T>>
    where
        K: Ord,
    {
        let mut held = BTreeMap::new();
        for key in keys {
            held.insert(key.clone(), self.hold(key).await);
        }
        held
    }

    /// How many keys are in memory.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Whether no key is in memory.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    fn slot(&self, key: &K) -> Arc<Mutex<T>> {
        self.cache
            .get_or_insert_with(key, || Ok::<_, Infallible>(Arc::default()))
            .unwrap_or_else(|never| match never {})
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn given_a_held_slot_when_another_key_is_held_then_it_does_not_wait() {
        let slots: Slots<u32, u32> = Slots::new(16);
        let _a = slots.hold(&1).await;
        let b = tokio::time::timeout(Duration::from_secs(1), slots.hold(&2)).await;
        assert!(b.is_ok(), "another key waited for a held one");
        let again = tokio::time::timeout(Duration::from_millis(50), slots.hold(&1)).await;
        assert!(again.is_err(), "a held key was held twice");
    }

    #[tokio::test]
    async fn given_a_full_cache_then_it_drops_some_idle_slots_and_keeps_held_and_recent_ones() {
        let slots: Slots<u32, u32> = Slots::new(16);
        let mut held = slots.hold(&0).await;
        *held = 7;
        for key in 1..200 {
            *slots.hold(&key).await = key;
        }
        assert!(slots.len() <= 17, "{} slots kept", slots.len());
        assert!(
            slots.len() >= 8,
            "a full cache dropped everything: {} left",
            slots.len()
        );
        drop(held);
        assert_eq!(*slots.hold(&0).await, 7, "the held slot was kept");
        assert_eq!(*slots.hold(&199).await, 199, "the latest slot was kept");
    }
}
