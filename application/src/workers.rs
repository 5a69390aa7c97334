//! Workers (WORKERS.md): the LLM service's processes claim turns, hold them with leases
//! and report on them. [`Workers`] is the use case behind `POST /v1/turns/claim` and the
//! turn reports; the decisions are the sagas' ([`SagaEngine::worker`]), so a claim, a
//! report and an expiry are each one saga transaction on the turn's conversation.
//!
//! - **Claim**: the oldest claimable turns matching the filters are tried in order, each
//!   through its conversation's machines; exactly one caller gets a turn and epoch (one
//!   per replica by the conversation's slot, one across replicas by its version). A
//!   caller that finds nothing waits on the [`ClaimBell`], rung from the log's tail when a
//!   rune makes a turn claimable — no waiter polls the database.
//! - **Heartbeat**: moves the lease's expiry in the store, writing no rune.
//! - **Reports** (release, error, usage) and the operator's **interrupt**: saga inputs,
//!   committed only if the lease they were decided on is still there.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pm_domain::saga::{ControlError, FenceCheck, Fenced, Lease, WorkerOp, CLAIMABLE_AFTER};
use tokio::sync::watch;
use uuid::Uuid;

use crate::bus::EventMetadata;
use crate::log::{LogPosition, LogReader};
use crate::processor::ProcessorStore;
use crate::queries::{Queries, ReadModelStore, SagaReadStore};
use crate::sagas::{ClaimFilter, ClaimableTurn, SagaEngine, SagaStore};
use crate::views::TurnView;
use crate::AppError;

mod context;

pub use context::{claim_context, ClaimContext};

/// Candidates one claim attempt reads at most.
const CANDIDATES: u32 = 16;

/// Rung (a generation count) whenever the log's tail shows a rune of the domain's
/// [`CLAIMABLE_AFTER`]; waiting claimants wake on it and try again.
///
/// The bell's ringer (one task per process) follows the tail only while claimants wait
/// ([`ClaimBell::waiting`]): a process without long-polling workers reads nothing more
/// of the log than before. A claimant first waits until the ringer follows the tail
/// ([`ClaimBell::enter`]), then looks at the database: a rune committed after that look
/// is in a batch the ringer receives, and one committed before it is seen by the look.
#[derive(Debug, Clone)]
pub struct ClaimBell {
    inner: Arc<BellInner>,
}

#[derive(Debug)]
struct BellInner {
    rung: watch::Sender<u64>,
    armed: watch::Sender<bool>,
    waiters: std::sync::atomic::AtomicUsize,
    wanted: tokio::sync::Notify,
    stopped: std::sync::atomic::AtomicBool,
}

/// A claimant waiting on the bell; leaving drops it.
#[derive(Debug)]
pub struct Waiting<'b> {
    bell: &'b ClaimBell,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.bell
            .inner
            .waiters
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How long a claimant waits for the ringer to follow the tail before it goes on anyway
/// (it then relies on the bell's next ring or its own deadline).
const ARMING: Duration = Duration::from_secs(1);

impl Default for ClaimBell {
    fn default() -> Self {
        Self::new()
    }
}

impl ClaimBell {
    /// A bell nobody rang yet.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(BellInner {
                rung: watch::channel(0).0,
                armed: watch::channel(false).0,
                waiters: std::sync::atomic::AtomicUsize::new(0),
                wanted: tokio::sync::Notify::new(),
                stopped: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// The replica is shutting down: every waiting claimant is answered at once with
    /// nothing claimed (`204`), and no claim waits from now on — a long poll must not hold
    /// a rolling deploy for its whole `wait_ms`.
    pub fn stop(&self) {
        self.inner
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.ring();
    }

    /// Whether [`ClaimBell::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Wakes every waiting claimant.
    pub fn ring(&self) {
        self.inner.rung.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Claimants waiting now.
    pub fn waiting(&self) -> usize {
        self.inner.waiters.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves once a claimant waits (at once if one does).
    pub async fn wanted(&self) {
        loop {
            let notified = self.inner.wanted.notified();
            if self.waiting() > 0 {
                return;
            }
            notified.await;
        }
    }

    /// The ringer follows the tail (`true`) or stopped (`false`).
    pub fn set_armed(&self, armed: bool) {
        self.inner.armed.send_replace(armed);
    }

    /// Registers a waiting claimant and waits (up to a second) until the ringer follows
    /// the tail.
    pub async fn enter(&self) -> Waiting<'_> {
        self.inner
            .waiters
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.wanted.notify_waiters();
        let mut armed = self.inner.armed.subscribe();
        let _ = tokio::time::timeout(ARMING, armed.wait_for(|a| *a)).await;
        Waiting { bell: self }
    }

    /// Whether a stretch of the log holds a rune that may make a turn claimable.
    pub fn rings_for<'a>(event_types: impl IntoIterator<Item = &'a str>) -> bool {
        event_types
            .into_iter()
            .any(|t| CLAIMABLE_AFTER.contains(&t))
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.rung.subscribe()
    }
}

/// What a claimant asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// Which turns.
    pub filter: ClaimFilter,
    /// How long to wait for one (0: answer at once).
    pub wait: Duration,
    /// The lease's length.
    pub lease: chrono::Duration,
    /// The worker's name.
    pub worker: String,
}

/// A claimed turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    /// The turn after the claim, as the machines show it (its lease holds the epoch and
    /// expiry; its times are the claim's).
    pub turn: TurnView,
    /// The claim.
    pub lease: Lease,
    /// The position of the claim's last rune.
    pub position: Option<LogPosition>,
    /// The actor the turn's agent acts for (what its fenced commands may speak as).
    pub actor_id: Option<Uuid>,
}

/// Why a report or heartbeat was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No such turn (`404 turn_not_found`).
    #[error("turn not found")]
    TurnNotFound,
    /// The turn has no such call (`404 tool_call_not_found`).
    #[error("the turn has no tool call {0}")]
    ToolCallNotFound(String),
    /// `403` with the code (`approver_forbidden`, `self_approval_forbidden`) and why.
    #[error("{code}: {detail}")]
    Forbidden {
        /// The problem's code.
        code: &'static str,
        /// Why.
        detail: String,
    },
    /// `409` with the code (`turn_fenced`, `turn_transition_not_allowed`) and why.
    #[error("{code}: {detail}")]
    Conflict {
        /// The problem's code.
        code: &'static str,
        /// Why.
        detail: String,
    },
}

impl From<ControlError> for Refused {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::NotAllowed { code, detail } => Self::Conflict { code, detail },
            ControlError::Forbidden { code, detail } => Self::Forbidden { code, detail },
            ControlError::ToolCallNotFound(call_id) => Self::ToolCallNotFound(call_id),
            ControlError::TurnNotFound
            | ControlError::SessionNotFound
            | ControlError::AgentNotFound => Self::TurnNotFound,
        }
    }
}

/// The workers' use case.
pub struct Workers<S> {
    engine: Arc<SagaEngine<S>>,
    bell: ClaimBell,
    candidates: std::sync::Mutex<std::collections::HashMap<ClaimFilter, Candidates>>,
    /// Claimants trying candidates now ([`Trying`]).
    trying: std::sync::atomic::AtomicUsize,
}

/// Claimable turns as one look found them, shared by the claimants one ring woke (one
/// query for all of them, not one each).
#[derive(Debug, Clone)]
struct Candidates {
    /// The bell's count the look was taken after.
    rung: u64,
    /// When.
    at: tokio::time::Instant,
    /// (turn, conversation), oldest first.
    turns: Arc<Vec<ClaimableTurn>>,
}

/// Counts the claimants trying candidates at once.
struct Trying<'c> {
    count: &'c std::sync::atomic::AtomicUsize,
    /// How many were trying when this one began.
    others: usize,
}

impl<'c> Trying<'c> {
    fn new(count: &'c std::sync::atomic::AtomicUsize) -> Self {
        let others = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self { count, others }
    }
}

impl Drop for Trying<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How long a shared look stays good (a claimant woken by a later ring looks again).
const SHARED_LOOK: Duration = Duration::from_millis(100);

impl<S: SagaStore> Workers<S> {
    /// Workers over `engine`, waking on `bell`.
    pub fn new(engine: Arc<SagaEngine<S>>, bell: ClaimBell) -> Self {
        Self {
            engine,
            bell,
            candidates: std::sync::Mutex::new(std::collections::HashMap::new()),
            trying: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The bell waiting claimants wake on.
    pub fn bell(&self) -> &ClaimBell {
        &self.bell
    }

    /// Claims the oldest claimable turn matching the request, waiting up to its `wait`
    /// for one; `None` when nothing was claimable in time.
    ///
    /// # Errors
    /// [`AppError`] from the store.
    #[tracing::instrument(name = "claim", skip_all, fields(worker = %request.worker))]
    pub async fn claim(
        &self,
        request: &ClaimRequest,
        metadata: &EventMetadata,
    ) -> Result<Option<Claimed>, AppError> {
        let until = tokio::time::Instant::now() + request.wait;
        let mut bell = self.bell.subscribe();
        // An answer-at-once claim needs no bell.
        let _waiting = if request.wait.is_zero() {
            None
        } else {
            Some(self.bell.enter().await)
        };
        loop {
            let rung = *bell.borrow_and_update();
            if let Some(claimed) = self.try_claim(request, metadata, rung).await? {
                metrics::counter!("pm_turn_claims_total").increment(1);
                return Ok(Some(claimed));
            }
            if self.bell.is_stopped() {
                return Ok(None);
            }
            tokio::select! {
                rung = bell.changed() => {
                    if rung.is_err() {
                        return Ok(None);
                    }
                }
                _ = tokio::time::sleep_until(until) => return Ok(None),
            }
        }
    }

    /// One pass over the candidates: a look shared with the claimants the same ring (`rung`)
    /// woke, each starting at another candidate so that they do not all race for the
    /// oldest; when a shared look yields nothing, one look of its own.
    async fn try_claim(
        &self,
        request: &ClaimRequest,
        metadata: &EventMetadata,
        rung: u64,
    ) -> Result<Option<Claimed>, AppError> {
        if let Some(shared) = self.shared_look(&request.filter, rung) {
            if let Some(claimed) = self.claim_one(request, metadata, &shared).await? {
                return Ok(Some(claimed));
            }
        }
        let turns = Arc::new(
            self.engine
                .store()
                .claimable(&request.filter, CANDIDATES)
                .await?,
        );
        self.lock_candidates().insert(
            request.filter.clone(),
            Candidates {
                rung,
                at: tokio::time::Instant::now(),
                turns: turns.clone(),
            },
        );
        self.claim_one(request, metadata, &turns).await
    }

    fn lock_candidates(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<ClaimFilter, Candidates>> {
        self.candidates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The shared look for `filter` taken after ring `rung`, while it is fresh.
    fn shared_look(&self, filter: &ClaimFilter, rung: u64) -> Option<Arc<Vec<ClaimableTurn>>> {
        let mut looks = self.lock_candidates();
        looks.retain(|_, c| c.at.elapsed() < SHARED_LOOK);
        looks
            .get(filter)
            .filter(|c| c.rung >= rung)
            .map(|c| c.turns.clone())
    }

    /// Claims the first of `turns` that is still claimable: the oldest for a claimant on
    /// its own; with others trying at the same time, each starts one further down, so
    /// that they do not all race for the oldest.
    async fn claim_one(
        &self,
        request: &ClaimRequest,
        metadata: &EventMetadata,
        turns: &[ClaimableTurn],
    ) -> Result<Option<Claimed>, AppError> {
        if turns.is_empty() {
            return Ok(None);
        }
        let _trying = Trying::new(&self.trying);
        let start = _trying.others % turns.len();
        let rotated = turns[start..].iter().chain(&turns[..start]);
        for candidate in rotated {
            let turn_id = candidate.turn_id;
            let op = WorkerOp::Claim {
                worker: request.worker.clone(),
                lease: request.lease,
            };
            let seen = Some((candidate.conversation_id, candidate.version));
            let done = self
                .engine
                .worker(turn_id, seen, op, metadata.clone())
                .await?;
            // Not claimable any more (another claimant was first): the next one.
            let Ok(done) = done else { continue };
            let Some(turn) = done.turn else { continue };
            let Some(lease) = turn.lease.clone() else {
                continue;
            };
            return Ok(Some(Claimed {
                turn,
                lease,
                position: done.position,
                actor_id: done.actor,
            }));
        }
        Ok(None)
    }

    /// Answers a claim with what `answer` builds from it (the turn's row and its context,
    /// read after the claim). When that fails the claim committed, but its claimant never
    /// learns the epoch: the turn is given back at once ([`unanswered`]) rather than held
    /// until its lease expires — which would also count against the turn's
    /// `PM_TURN_MAX_CLAIMS`. If even the release fails, the lease expires as usual.
    ///
    /// # Errors
    /// `answer`'s error, after the release.
    pub async fn answer_claim<T, E>(
        &self,
        claimed: &Claimed,
        metadata: EventMetadata,
        answer: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let error = match answer.await {
            Ok(answered) => return Ok(answered),
            Err(e) => e,
        };
        let released = self
            .report(claimed.turn.id, unanswered(&claimed.lease), metadata)
            .await;
        if !matches!(released, Ok(Ok(_))) {
            tracing::warn!(turn = %claimed.turn.id, "a claim that could not be answered was not released; its lease will expire");
        }
        Err(error)
    }

    /// Waits until the sagas have decided every event logged in turn `turn_id`'s
    /// conversation before now ([`Workers::settle_point`]), so that the worker's fenced
    /// facts are the turn's before a report on it is decided; up to the queries' wait, then
    /// [`AppError::ProjectionLagging`] (nothing decided).
    ///
    /// # Errors
    /// [`AppError`] from the store, or the queries' wait.
    pub async fn settle<R, G, P, L>(
        &self,
        queries: &Queries<R, G, P, L>,
        turn_id: Uuid,
    ) -> Result<(), AppError>
    where
        R: ReadModelStore,
        G: SagaReadStore,
        P: ProcessorStore,
        L: LogReader,
    {
        if let Some(through) = self.settle_point(turn_id).await? {
            queries.sagas_at(Some(through)).await?;
        }
        Ok(())
    }

    /// Where the sagas must have got to before a report on `turn_id` is decided: the last
    /// event logged in its conversation (`None`: a turn the sagas have not recorded).
    ///
    /// A worker's fenced facts (its messages, acknowledged `201`) belong to its turn, and
    /// the sagas apply them as they reach them in the log; a report decided before they
    /// did — "a message, then the tool calls" sent back to back — would suspend or end the
    /// turn first and leave the message an anomaly, out of the turn's deliverable. The
    /// caller waits for the saga processor to pass this position (read-your-writes on the
    /// saga rows), then reports.
    ///
    /// # Errors
    /// [`AppError`] from the store.
    pub async fn settle_point(&self, turn_id: Uuid) -> Result<Option<LogPosition>, AppError> {
        self.engine.store().turn_logged_through(turn_id).await
    }

    /// A report (release, error, usage) or an interrupt on `turn_id`; answers the position
    /// of its last rune. The caller first lets the sagas reach [`Workers::settle_point`].
    ///
    /// # Errors
    /// `Ok(Err(Refused))` when refused (nothing written); [`AppError`] from the store.
    pub async fn report(
        &self,
        turn_id: Uuid,
        op: WorkerOp,
        metadata: EventMetadata,
    ) -> Result<Result<Option<LogPosition>, Refused>, AppError> {
        let done = self.engine.worker(turn_id, None, op, metadata).await?;
        Ok(done.map(|d| d.position).map_err(Refused::from))
    }

    /// A heartbeat: the claim of `turn_epoch` holds `turn_id` until `now + lease`; `None`
    /// when that claim no longer holds it (the caller says why: [`why_fenced`]). Writes
    /// no rune and reads nothing else.
    ///
    /// # Errors
    /// [`AppError`] from the store.
    pub async fn heartbeat(
        &self,
        turn_id: Uuid,
        turn_epoch: i64,
        lease: chrono::Duration,
    ) -> Result<Option<DateTime<Utc>>, AppError> {
        let now = self.engine.clock().now();
        self.engine
            .store()
            .renew_lease(turn_id, turn_epoch, now + lease, now)
            .await
    }
}

/// The reason of the release that gives back a claim its claimant was never told of.
pub const CLAIM_NOT_ANSWERED: &str = "claim_not_answered";

/// The release of a claim (its `lease`) that committed but could not be answered
/// ([`Workers::answer_claim`]): under the claim's own epoch, so that it gives back only
/// this claim, never a later one.
pub fn unanswered(lease: &Lease) -> WorkerOp {
    WorkerOp::Release {
        turn_epoch: lease.turn_epoch,
        reason: CLAIM_NOT_ANSWERED.into(),
    }
}

/// Why a heartbeat of the claim of `turn_epoch` was refused, from the turn's row as read
/// after the refusal (`None`: no such turn). Only a refused heartbeat reads the row: a
/// renewed one writes and reads nothing else.
pub fn heartbeat_refused(turn: Option<&TurnView>, turn_epoch: i64) -> Refused {
    match turn {
        None => Refused::TurnNotFound,
        Some(turn) => Refused::Conflict {
            code: pm_domain::saga::TURN_FENCED,
            detail: why_fenced(turn, turn_epoch),
        },
    }
}

/// Why the claim of `turn_epoch` does not hold `turn` (as its row shows it): the domain's
/// fencing rule on the row's fields.
pub fn why_fenced(turn: &TurnView, turn_epoch: i64) -> String {
    let check = FenceCheck {
        state: turn.state,
        turn_epoch: turn.turn_epoch,
        claims: turn.claims,
        lease_epoch: turn.lease.as_ref().map(|l| l.turn_epoch),
    };
    match check.check(turn_epoch) {
        Err(why) => why.to_string(),
        // The row shows the claim holding the turn, but its lease was not live.
        Ok(()) => Fenced::LeaseEnded { given: turn_epoch }.to_string(),
    }
}

#[cfg(test)]
mod tests;
