//! The `Idempotency-Key` decorator: runs a [`KeyedCommand`] under the key's policy. It
//! performs the actions [`super::decision::decide`] chooses — run, record, claim, ask
//! whether a replica is alive, take over, complete, release, replay — against its ports,
//! and remembers which keys run on this replica (in memory: that is per replica by
//! nature).
//!
//! The common path is one command run: its append writes the key's row; only an answer
//! that wrote nothing is recorded after it, and only a key that already has a row is
//! claimed. A keyed command runs in a task of its own, so a caller that goes away
//! mid-request does not cancel it between its append and the key's bookkeeping.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use chrono::Utc;

use super::decision::{decide, Action, Known, RunSaid};
use super::ports::{Claimed, IdempotencyStore, ReplicaLiveness};
use super::{IdempotencyKey, StoredAnswer, StoredResponse};
use crate::fact::Fact;
use crate::log::{LogPosition, LogReader};
use crate::AppError;

/// What a command run did, as the key's policy needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// It appended a fact: its append wrote (or completed) the key's row.
    Appended,
    /// It answered without writing a fact: keep this answer for repeats.
    Answered(StoredAnswer),
    /// Its append found the unclaimed key already has a row
    /// ([`AppError::IdempotencyKeyTaken`]); nothing was written.
    KeyTaken,
    /// It failed without an answer worth keeping: a retry runs it again.
    Failed,
}

impl RunOutcome {
    fn said(&self) -> RunSaid {
        match self {
            Self::Appended => RunSaid::Appended,
            Self::Answered(_) => RunSaid::Answered,
            Self::KeyTaken => RunSaid::KeyTaken,
            Self::Failed => RunSaid::Failed,
        }
    }
}

/// A command run: what it did, and the caller's own answer to hand back.
#[derive(Debug)]
pub struct Ran<R> {
    /// What it did.
    pub outcome: RunOutcome,
    /// The answer as the caller will send it.
    pub response: R,
}

/// The command port the decorator wraps: one command, runnable again (a repeat of a key
/// whose first run was abandoned runs it under a claim), with the key it is to append
/// with.
pub trait KeyedCommand: Send + 'static {
    /// The caller's answer.
    type Response: Send + 'static;

    /// Runs the command with `key` for its append.
    fn run(&self, key: IdempotencyKey) -> impl Future<Output = Ran<Self::Response>> + Send;
}

/// A replayed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Replay {
    /// The fact the key's first run appended, read back from the log.
    Appended {
        /// The fact.
        fact: Fact,
        /// Its position.
        position: LogPosition,
        /// The payload as the log shows it (`null` texts, `"forgotten": true`) when some of
        /// its texts can no longer be read: the answer then, never the fact's stand-ins.
        unreadable: Option<String>,
    },
    /// The answer the first run gave without a fact.
    Answer(StoredAnswer),
}

/// How a keyed request was handled.
#[derive(Debug)]
pub enum Handled<R> {
    /// The command ran: its own answer.
    Ran(R),
    /// A repeat: the first answer again.
    Replayed(Replay),
    /// The key was used for another request (`422 idempotency_key_reused`).
    Reused,
    /// A request with the key is still running (`409 idempotency_key_in_use`).
    InUse,
    /// The key's bookkeeping failed before the command ran (the store is away).
    Failed(AppError),
}

type Running = Arc<Mutex<HashSet<(String, String)>>>;

/// Marks a key as running on this replica until dropped, however its request ends.
struct Entered {
    running: Running,
    id: (String, String),
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Ok(mut set) = self.running.lock() {
            set.remove(&self.id);
        }
    }
}

/// The `Idempotency-Key` use case of one replica, over a key store, replica liveness and
/// the log (to replay a fact).
pub struct Idempotency<St, L, R> {
    inner: Arc<Inner<St, L, R>>,
}

impl<St, L, R> Clone for Idempotency<St, L, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<St, L, R> {
    store: St,
    liveness: L,
    log: R,
    replica: String,
    running: Running,
}

fn id(key: &IdempotencyKey) -> (String, String) {
    (key.role.clone(), key.key.clone())
}

impl<St: IdempotencyStore, L: ReplicaLiveness, R: LogReader> Idempotency<St, L, R> {
    /// The use case for replica `replica` (the id its claims carry and liveness knows).
    pub fn new(store: St, liveness: L, log: R, replica: impl Into<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                liveness,
                log,
                replica: replica.into(),
                running: Arc::default(),
            }),
        }
    }

    /// The key store.
    pub fn store(&self) -> &St {
        &self.inner.store
    }

    /// Runs `command` under `key` in a task of its own (see the module's doc).
    pub async fn run<C: KeyedCommand>(
        &self,
        key: IdempotencyKey,
        command: C,
    ) -> Handled<C::Response> {
        let this = self.clone();
        tokio::spawn(async move { this.handle(key, command).await })
            .await
            .unwrap_or_else(|e| {
                Handled::Failed(AppError::Internal(format!(
                    "the command's task failed: {e}"
                )))
            })
    }

    /// Marks the key running here; `None` when it already is.
    fn enter(&self, key: &IdempotencyKey) -> Option<Entered> {
        let id = id(key);
        let inserted = self
            .inner
            .running
            .lock()
            .map(|mut set| set.insert(id.clone()))
            .unwrap_or(false);
        inserted.then(|| Entered {
            running: self.inner.running.clone(),
            id,
        })
    }

    fn running_here(&self, key: &IdempotencyKey) -> bool {
        self.inner
            .running
            .lock()
            .map(|set| set.contains(&id(key)))
            .unwrap_or(true)
    }

    /// Drives the state machine from the request's arrival to its answer.
    async fn handle<C: KeyedCommand>(
        &self,
        mut key: IdempotencyKey,
        command: C,
    ) -> Handled<C::Response> {
        let inner = &self.inner;
        let replica = inner.replica.as_str();
        // Held while the key runs here: dropped before a claim, renewed by one.
        let mut entered = self.enter(&key);
        let mut known = Known::Arrived {
            running_here: entered.is_none(),
        };
        let mut ran: Option<Ran<C::Response>> = None;
        let mut claims = 0;
        loop {
            let action = decide(&known, &key.request_hash, replica, Utc::now());
            known = match action {
                Action::RunUnclaimed | Action::RunClaimed => {
                    key.claimed = action == Action::RunClaimed;
                    key.owner = replica.to_string();
                    let run = command.run(key.clone()).await;
                    let said = run.outcome.said();
                    ran = Some(run);
                    if key.claimed {
                        Known::RanClaimed(said)
                    } else {
                        Known::RanUnclaimed(said)
                    }
                }
                Action::Answer => return answered(ran),
                Action::Record => {
                    let Some(answer) = stored_answer(ran.as_ref()) else {
                        return answered(ran);
                    };
                    match inner.store.record(&key, &answer).await {
                        Ok(written) => Known::Recorded(written),
                        Err(e) => {
                            tracing::warn!(error = %e, "could not store an idempotency answer");
                            return answered(ran);
                        }
                    }
                }
                Action::Claim => {
                    drop(entered.take());
                    claims += 1;
                    match inner.store.claim(&key, replica).await {
                        Ok(Claimed::Now) => {
                            // Another request with the key arrived here while this one
                            // claimed: it runs the key; this one gives the claim back.
                            let Some(mark) = self.enter(&key) else {
                                if let Err(e) = inner.store.release(&key, replica).await {
                                    tracing::warn!(error = %e, "could not release a claim");
                                }
                                return Handled::InUse;
                            };
                            entered = Some(mark);
                            Known::ClaimedNow
                        }
                        Ok(Claimed::Found(row)) => Known::Found {
                            row,
                            running_here: self.running_here(&key),
                        },
                        Ok(Claimed::Gone) => Known::Vanished { claims },
                        Err(e) => return Handled::Failed(e),
                    }
                }
                Action::AskLiveness(owner) => match inner.liveness.is_alive(&owner).await {
                    Ok(alive) => Known::Liveness { owner, alive },
                    Err(e) => return Handled::Failed(e),
                },
                Action::TakeOver { from } => {
                    let Some(mark) = self.enter(&key) else {
                        return Handled::InUse;
                    };
                    match inner.store.take_over(&key, from.as_deref(), replica).await {
                        Ok(won) => {
                            if won {
                                tracing::info!(role = %key.role, abandoned_by = ?from,
                                    "took over an abandoned Idempotency-Key claim");
                                entered = Some(mark);
                            }
                            Known::TookOver { won, claims }
                        }
                        Err(e) => return Handled::Failed(e),
                    }
                }
                Action::Complete => {
                    if let Some(answer) = stored_answer(ran.as_ref()) {
                        if let Err(e) = inner.store.complete(&key, &answer).await {
                            tracing::warn!(error = %e, "could not store an idempotency answer");
                        }
                    }
                    return answered(ran);
                }
                Action::Release => {
                    if let Err(e) = inner.store.release(&key, replica).await {
                        tracing::warn!(error = %e, "could not release an idempotency key");
                    }
                    return answered(ran);
                }
                Action::Replay(stored) => return self.replay(stored).await,
                Action::Reused => return Handled::Reused,
                Action::InUse => return Handled::InUse,
            };
        }
    }

    /// The stored answer, or the fact at the stored position read back from the log.
    async fn replay<T>(&self, stored: StoredResponse) -> Handled<T> {
        match stored {
            StoredResponse::Answer(answer) => Handled::Replayed(Replay::Answer(answer)),
            StoredResponse::Appended(position) => match self.read_fact(position).await {
                Ok((fact, unreadable)) => Handled::Replayed(Replay::Appended {
                    fact,
                    position,
                    unreadable,
                }),
                Err(e) => Handled::Failed(e),
            },
        }
    }

    /// The fact at `position` of the log.
    async fn read_fact(&self, position: LogPosition) -> Result<(Fact, Option<String>), AppError> {
        let event = self.inner.log.event_at(position).await?.ok_or_else(|| {
            AppError::Internal(format!("the fact of a completed key is not at {position}"))
        })?;
        let (fact, unreadable) =
            Fact::from_logged_unreadable(&event).map_err(|e| AppError::Internal(e.to_string()))?;
        Ok((fact, unreadable.then(|| event.payload.text().to_string())))
    }
}

/// The answer a run kept for repeats, if it gave one.
fn stored_answer<T>(ran: Option<&Ran<T>>) -> Option<StoredAnswer> {
    match ran.map(|r| &r.outcome) {
        Some(RunOutcome::Answered(answer)) => Some(answer.clone()),
        _ => None,
    }
}

/// The command's own answer.
fn answered<T>(ran: Option<Ran<T>>) -> Handled<T> {
    match ran {
        Some(ran) => Handled::Ran(ran.response),
        None => Handled::Failed(AppError::Internal(
            "the idempotency policy answered before the command ran".into(),
        )),
    }
}
