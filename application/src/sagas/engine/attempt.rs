//! [`SagaEngine::run`]: the one load → decide → commit loop that every entry point of the
//! engine — batches, deadlines, the restart, controls and workers' requests — decides
//! through, and its one conflict policy.
//!
//! Another writer (a control or a deadline on another replica) may change a held
//! conversation between its load and the commit. The store then refuses the commit
//! ([`CommitError::Conflict`]); an answer given without a commit is checked against the
//! stored version instead. Either way the machines of every held conversation are
//! forgotten — they hold decisions that were not written, or an old state — and the loop
//! decides again on what it reloads, up to [`Hold`]'s attempts: then it stops as
//! [`Stopped::Contended`], which each entry point answers in its own way. Nothing else is
//! retried: a moved cursor, a lost lease or a failing store do not get better by deciding
//! again, so they stop the loop at once ([`Failure`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use uuid::Uuid;

use super::{forget, rows, SagaEngine, ATTEMPTS};
use crate::log::LogPosition;
use crate::sagas::slots::{Held, Machines};
use crate::sagas::{CommitError, Committed, SagaStore, SagaWrite};
use crate::AppError;

/// The conversations a writer decides on, and how often it may decide.
pub(super) struct Hold {
    conversations: BTreeSet<Uuid>,
    /// Conversations with no runes yet: begun without a read on the first attempt. A
    /// later attempt follows another writer's commit, which may have decided them.
    fresh: BTreeSet<Uuid>,
    /// Versions of conversations the caller read: machines cached at one of them or later
    /// are current without a read (versions only grow).
    seen: BTreeMap<Uuid, i64>,
    attempts: u32,
}

impl Hold {
    /// `conversations`, decided on up to [`ATTEMPTS`] times.
    pub(super) fn all(conversations: BTreeSet<Uuid>) -> Self {
        Self {
            conversations,
            fresh: BTreeSet::new(),
            seen: BTreeMap::new(),
            attempts: ATTEMPTS,
        }
    }

    /// One conversation.
    pub(super) fn one(conversation: Uuid) -> Self {
        Self::all(BTreeSet::from([conversation]))
    }

    /// With `fresh` begun without a read on the first attempt.
    pub(super) fn fresh(mut self, fresh: BTreeSet<Uuid>) -> Self {
        self.fresh = fresh;
        self
    }

    /// With `conversation` known to be at `version` or later, if the caller read it.
    pub(super) fn seen(mut self, conversation: Uuid, version: Option<i64>) -> Self {
        if let Some(version) = version {
            self.seen.insert(conversation, version);
        }
        self
    }

    /// Decided on once: a conflict stops the loop at once.
    pub(super) fn once(mut self) -> Self {
        self.attempts = 1;
        self
    }
}

/// What a decision on the held machines came to.
pub(super) enum Decided<T> {
    /// The write holds what was decided: commit it, then answer.
    Write(T),
    /// Nothing was decided — the machines are as loaded and the write is empty (a
    /// refusal): answer without a commit, once the machines are known to be current.
    Unwritten(T),
}

/// An answer of the loop.
#[derive(Debug)]
pub(super) struct Answered<T> {
    /// What the decision answered.
    pub(super) answer: T,
    /// The position of the last rune committed, if any was.
    pub(super) position: Option<LogPosition>,
}

/// Why the loop stopped without an answer.
#[derive(Debug)]
pub(super) enum Stopped<E> {
    /// Every attempt found a held conversation written elsewhere.
    Contended,
    /// The decision failed with its own error (a poison fact); nothing was committed.
    Decision(E),
    /// What no attempt mends.
    Failed(Failure),
}

/// A commit or a load that failed for a reason deciding again does not mend: every
/// [`CommitError`] but a conflict, which the loop alone handles.
#[derive(Debug)]
pub(super) enum Failure {
    /// The processor's stored cursor is not where the batch started.
    CursorMoved,
    /// A lease the write was decided on is gone.
    LeaseGone {
        /// The turn.
        turn_id: Uuid,
        /// The claim's epoch.
        turn_epoch: i64,
    },
    /// The store failed.
    Store(AppError),
}

impl Failure {
    /// What `e` is when it is not a conflict; `None` for a conflict.
    fn unless_conflict(e: CommitError) -> Option<Self> {
        match e {
            CommitError::Conflict { .. } => None,
            CommitError::CursorMoved => Some(Self::CursorMoved),
            CommitError::LeaseGone {
                turn_id,
                turn_epoch,
            } => Some(Self::LeaseGone {
                turn_id,
                turn_epoch,
            }),
            CommitError::Store(e) => Some(Self::Store(e)),
        }
    }
}

impl fmt::Display for Failure {
    /// In the words of the [`CommitError`] it was.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CursorMoved => CommitError::CursorMoved.fmt(f),
            Self::LeaseGone {
                turn_id,
                turn_epoch,
            } => CommitError::LeaseGone {
                turn_id: *turn_id,
                turn_epoch: *turn_epoch,
            }
            .fmt(f),
            Self::Store(e) => e.fmt(f),
        }
    }
}

impl From<Failure> for AppError {
    /// The store's own error; a moved cursor or a lost lease where no caller expects one
    /// is the store being unavailable.
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Store(e) => e,
            other => AppError::Unavailable(other.to_string()),
        }
    }
}

impl<E> From<Failure> for Stopped<E> {
    fn from(failure: Failure) -> Self {
        Self::Failed(failure)
    }
}

impl<S: SagaStore> SagaEngine<S> {
    /// Holds the slots of `hold`'s conversations (across every attempt: no other writer of
    /// this replica decides on them meanwhile), loads what is not in memory, lets `decide`
    /// decide into a new write, and commits it — `batch` moving the processor's cursor with
    /// it — deciding again as the module's policy says.
    ///
    /// # Errors
    /// [`Stopped`]: contended after every attempt, the decision's error, or a failure.
    pub(super) async fn run<T, E>(
        &self,
        hold: Hold,
        batch: Option<(LogPosition, LogPosition)>,
        mut decide: impl FnMut(&mut BTreeMap<Uuid, Held>, &mut SagaWrite) -> Result<Decided<T>, E>,
    ) -> Result<Answered<T>, Stopped<E>> {
        let mut held = self.slots.hold_all(&hold.conversations).await;
        let later = BTreeSet::new();
        for attempt in 1..=hold.attempts {
            let fresh = if attempt == 1 { &hold.fresh } else { &later };
            let cached: Vec<Uuid> = held
                .iter()
                .filter(|(_, slot)| slot.is_some())
                .map(|(conversation, _)| *conversation)
                .collect();
            self.load(&mut held, fresh).await.map_err(Failure::Store)?;
            let mut write = SagaWrite::default();
            let decided = match decide(&mut held, &mut write) {
                Ok(decided) => decided,
                // The machines may hold part of what was decided.
                Err(e) => {
                    forget(&mut held);
                    return Err(Stopped::Decision(e));
                }
            };
            match decided {
                Decided::Unwritten(answer) => {
                    debug_assert!(write == SagaWrite::default(), "an unwritten decision wrote");
                    if self.current(&held, &cached, &hold.seen).await? {
                        return Ok(Answered {
                            answer,
                            position: None,
                        });
                    }
                    forget(&mut held);
                }
                Decided::Write(answer) => match self.commit(&mut held, write, batch).await {
                    Ok(committed) => {
                        return Ok(Answered {
                            answer,
                            position: committed.last_position,
                        })
                    }
                    Err(e) => match Failure::unless_conflict(e) {
                        // Forgotten by `commit`: decided again on what is reloaded.
                        None => {}
                        Some(failure) => return Err(failure.into()),
                    },
                },
            }
        }
        Err(Stopped::Contended)
    }

    /// Whether machines an answer was decided on without a commit are current — no
    /// commit's version check tells that another replica changed them. Those loaded by
    /// this attempt are; those `cached` in memory before it are once a version the caller
    /// saw, or the stored one, says so.
    async fn current<E>(
        &self,
        held: &BTreeMap<Uuid, Held>,
        cached: &[Uuid],
        seen: &BTreeMap<Uuid, i64>,
    ) -> Result<bool, Stopped<E>> {
        let versions: Vec<(Uuid, i64)> = cached
            .iter()
            .filter_map(|c| held.get(c)?.as_ref().map(|m| (*c, m.version)))
            .collect();
        for (conversation, version) in versions {
            let current = match seen.get(&conversation) {
                Some(seen) => version >= *seen,
                None => {
                    let stored = self.store.conversation_version(conversation).await;
                    stored.map_err(Failure::Store)? == version
                }
            };
            if !current {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Commits `write` with the version of every held conversation and the rows they
    /// changed. Committed: each held conversation is one version further. Not committed:
    /// the held machines are forgotten — they hold decisions that were not written.
    pub(super) async fn commit(
        &self,
        held: &mut BTreeMap<Uuid, Held>,
        mut write: SagaWrite,
        batch: Option<(LogPosition, LogPosition)>,
    ) -> Result<Committed, CommitError> {
        write.conversations = held
            .iter()
            .filter_map(|(c, slot)| slot.as_ref().map(|m| (*c, m.version)))
            .collect();
        rows(held, &mut write);
        let written: BTreeSet<Uuid> = write.runes.iter().map(|r| r.conversation_id).collect();
        // The machines leave their slots while the commit runs: if this future is dropped
        // (a client that went away cancels its control or claim), the slots are left
        // empty — reloaded by the next writer — instead of holding decisions that may not
        // have been written.
        let mut taken: Vec<(Uuid, Machines)> = held
            .iter_mut()
            .filter_map(|(c, slot)| slot.take().map(|m| (*c, m)))
            .collect();
        match self.store.commit(write, batch).await {
            Ok(committed) => {
                for (conversation, mut machines) in taken.drain(..) {
                    machines.version += 1;
                    // Runes were appended, so the store names their last position; a
                    // store that did not gets no snapshot (none is taken as of a position
                    // that predates runes the machines hold).
                    if let (true, Some(position)) =
                        (written.contains(&conversation), committed.last_position)
                    {
                        self.snapshot(conversation, &mut machines, position);
                    }
                    if let Some(slot) = held.get_mut(&conversation) {
                        **slot = Some(machines);
                    }
                }
                Ok(committed)
            }
            Err(e) => {
                if let CommitError::Conflict { conversations } = &e {
                    tracing::info!(?conversations, "saga state written elsewhere; reloading");
                    metrics::counter!("pm_saga_conflicts_total").increment(1);
                }
                Err(e)
            }
        }
    }
}
