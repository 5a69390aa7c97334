//! The machines of held conversations in memory: loaded from the store — from a
//! conversation's [snapshot](crate::sagas::snapshot) and the runes after it — and
//! snapshotted again after the commits that make one due.

use std::collections::{BTreeMap, BTreeSet};

use futures::stream::{self, StreamExt};
use uuid::Uuid;

use super::{SagaEngine, READS_IN_PARALLEL};
use crate::log::LogPosition;
use crate::sagas::slots::{Held, Machines};
use crate::sagas::snapshot;
use crate::sagas::{SagaStore, StoredSnapshot};
use crate::AppError;

impl<S: SagaStore> SagaEngine<S> {
    /// Loads the machines of the held conversations that are not in memory, in parallel;
    /// those in `fresh` are begun empty instead (see [`Hold`](super::attempt::Hold)).
    pub(super) async fn load(
        &self,
        held: &mut BTreeMap<Uuid, Held>,
        fresh: &BTreeSet<Uuid>,
    ) -> Result<(), AppError> {
        let mut missing = Vec::new();
        for (conversation, slot) in held.iter_mut() {
            if slot.is_some() {
                continue;
            }
            if fresh.contains(conversation) {
                // What loading a conversation without runes gives, without the read.
                **slot = Some(Machines::empty());
            } else {
                missing.push(*conversation);
            }
        }
        let read: Vec<(Uuid, Result<_, AppError>)> = stream::iter(missing)
            .map(|c| async move { (c, self.load_one(c).await) })
            .buffer_unordered(READS_IN_PARALLEL)
            .collect()
            .await;
        let mut failed = None;
        for (conversation, machines) in read {
            match (machines, held.get_mut(&conversation)) {
                (Ok(machines), Some(slot)) => **slot = Some(machines),
                (Err(e), _) => failed = Some(e),
                (Ok(_), None) => {}
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// One conversation's machines: from its snapshot and the runes after it, or — when
    /// the snapshot does not read — from all its runes.
    async fn load_one(&self, conversation: Uuid) -> Result<Machines, AppError> {
        let stored = self
            .store
            .load(conversation, Some(snapshot::FORMAT))
            .await?;
        let from_snapshot = stored.snapshot.is_some();
        let heavy = stored.runes.len() >= HEAVY_RUNES || from_snapshot;
        match cpu_bound(heavy, || Machines::restore(stored)) {
            Ok(machines) => {
                if from_snapshot {
                    metrics::counter!("pm_saga_snapshots_loaded_total").increment(1);
                }
                Ok(machines)
            }
            Err(e) => {
                tracing::warn!(%conversation, error = %e, "a saga snapshot does not read; folding the runes");
                metrics::counter!("pm_saga_snapshots_unreadable_total").increment(1);
                let stored = self.store.load(conversation, None).await?;
                let heavy = stored.runes.len() >= HEAVY_RUNES;
                cpu_bound(heavy, || Machines::restore(stored)).map_err(AppError::Internal)
            }
        }
    }

    /// Writes, beside the saga path, a snapshot of `machines` if one is due; `conversation`
    /// was just committed with runes up to `position`, so they hold every rune of it up to
    /// there.
    pub(super) fn snapshot(
        &self,
        conversation: Uuid,
        machines: &mut Machines,
        position: LogPosition,
    ) {
        if !self.snapshots.due(machines.runes, machines.covered) {
            return;
        }
        let Ok(permit) = self.snapshot_writes.clone().try_acquire_owned() else {
            return;
        };
        let encoded = cpu_bound(true, || {
            snapshot::encode(&machines.sagas, &machines.streams, machines.runes)
        });
        let state = match encoded {
            Ok(state) => state,
            Err(e) => {
                tracing::error!(%conversation, error = %e, "a saga snapshot does not encode");
                return;
            }
        };
        machines.covered = machines.runes;
        let bytes = state.len();
        let write = self.store.save_snapshot(
            conversation,
            StoredSnapshot {
                position,
                format: snapshot::FORMAT,
                state,
            },
        );
        tokio::spawn(async move {
            let _permit = permit;
            match write.await {
                Ok(()) => {
                    metrics::counter!("pm_saga_snapshots_written_total").increment(1);
                    tracing::debug!(%conversation, %position, bytes, "saga snapshot written");
                }
                // The next due snapshot makes up for it; loads fold more runes meanwhile.
                Err(e) => {
                    tracing::warn!(%conversation, error = %e, "a saga snapshot was not written")
                }
            }
        });
    }
}

/// Runes from which a conversation's fold counts as heavy work ([`cpu_bound`]).
const HEAVY_RUNES: usize = 1_000;

/// Runs `f` — decoding, folding or encoding a long conversation's machines, milliseconds
/// of CPU — so that the worker's other tasks move to another thread meanwhile
/// (`block_in_place`) when `heavy` and the runtime has other threads; inline otherwise
/// (a current-thread runtime, as in tests, has no other thread to move them to).
fn cpu_bound<T>(heavy: bool, f: impl FnOnce() -> T) -> T {
    let threads = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if heavy && threads {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}
