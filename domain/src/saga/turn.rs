//! The Turn aggregate: the L0 queue and the ECHS TurnEngine, with the delivery contract
//! (every terminal rune names the last message the turn produced, or says why not).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::rune::turn::{TurnInput, TurnRune};
use super::types::{TurnKind, TurnState};
use super::{saga_aggregate, Machine, SagaError, TURN_TYPE};

/// A turn (id = [`super::ids::turn_id`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    turn_id: Option<Uuid>,
    agent_id: Option<Uuid>,
    conversation_id: Option<Uuid>,
    kind: Option<TurnKind>,
    task_id: Option<Uuid>,
    input: Option<TurnInput>,
    state: Option<TurnState>,
    turn_epoch: Option<i64>,
    watchdog_epoch: i64,
    messages: u32,
    last_message_id: Option<Uuid>,
    terminal_rune: Option<String>,
    reason: Option<String>,
    deliverable: Option<Uuid>,
    deliverable_reason: Option<String>,
    anomalies: u32,
    #[serde(default)]
    lease: Option<Lease>,
    #[serde(default)]
    claims: u32,
    #[serde(default)]
    expired_claims: u32,
    #[serde(default)]
    usage: Option<(u64, u64)>,
    #[serde(default)]
    tool_call_ids: Vec<String>,
    #[serde(default)]
    batch: Vec<String>,
    #[serde(default)]
    batches: i64,
}

/// A worker's claim on a turn, as its runes recorded it (a heartbeat moves the expiry in
/// the store only: it writes no rune). On the wire, a turn's `lease`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = LeaseView))]
pub struct Lease {
    /// The worker's name.
    pub worker: String,
    /// The claim's epoch: the `PM-Turn-Epoch` its commands carry.
    pub turn_epoch: i64,
    /// When the lease ends unless renewed (heartbeats move it).
    #[serde(with = "crate::time")]
    pub lease_expires_at: chrono::DateTime<chrono::Utc>,
}

/// What says whether a claim holds a turn: the turn's state, epoch, claims and the epoch
/// of the lease that holds it. The one rule of WORKERS.md's fencing, used on the machine
/// ([`Turn::fence`]), on a turn's row (a refused heartbeat's reason) and on the stored
/// lease (a fenced command's append).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceCheck {
    /// The turn's state.
    pub state: TurnState,
    /// Its epoch (`None` before its dispatch).
    pub turn_epoch: Option<i64>,
    /// How many times it was claimed.
    pub claims: u32,
    /// The epoch of the lease holding it, if one does.
    pub lease_epoch: Option<i64>,
}

impl FenceCheck {
    /// Whether the claim of `turn_epoch` holds the turn.
    ///
    /// # Errors
    /// [`Fenced`] saying why not.
    pub fn check(&self, turn_epoch: i64) -> Result<(), Fenced> {
        let current = self.turn_epoch.unwrap_or(0);
        let state = self.state;
        if state.is_terminal() {
            return Err(Fenced::Ended(state));
        }
        if turn_epoch < current {
            return Err(Fenced::NewerEpoch {
                given: turn_epoch,
                current,
            });
        }
        if turn_epoch > current {
            return Err(Fenced::UnknownEpoch {
                given: turn_epoch,
                current,
            });
        }
        if state == TurnState::ToolExecuting {
            return Err(Fenced::Suspended);
        }
        if self.claims == 0 {
            return Err(Fenced::NotClaimed(state));
        }
        match self.lease_epoch {
            Some(epoch) if epoch == turn_epoch && state == LEASED_STATE => Ok(()),
            _ => Err(Fenced::LeaseEnded { given: turn_epoch }),
        }
    }
}

/// Why a command or report fenced by (turn, epoch) is refused: WORKERS.md's `409
/// turn_fenced`, with its detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    /// A later claim holds the turn.
    #[error("turn_epoch {given} is stale: the turn is claimed under epoch {current}")]
    NewerEpoch {
        /// The epoch the caller sent.
        given: i64,
        /// The turn's epoch.
        current: i64,
    },
    /// The epoch was never claimed.
    #[error("turn_epoch {given} was never claimed (the turn is at epoch {current})")]
    UnknownEpoch {
        /// The epoch the caller sent.
        given: i64,
        /// The turn's epoch.
        current: i64,
    },
    /// The claim's lease expired or was released.
    #[error("the lease of epoch {given} ended (expired, released, or with its turn)")]
    LeaseEnded {
        /// The epoch the caller sent.
        given: i64,
    },
    /// The turn waits for tool results (L0 `suspended`).
    #[error("the turn is suspended (tool_executing)")]
    Suspended,
    /// The turn is over.
    #[error("the turn ended ({0})")]
    Ended(TurnState),
    /// The turn was never claimed.
    #[error("the turn is {0}: it was never claimed")]
    NotClaimed(TurnState),
}

/// The states WORKERS.md's **claimable** turn is in: `dispatched` (never claimed yet), or
/// `streaming` while no worker's lease holds it (after a lease expired, a release, or its
/// tool calls finished). The one list: the [`Turn`] machine, a turn's row, the claim's
/// query and the store's partial index `saga_turns_claimable` all say it with these.
pub const CLAIMABLE_STATES: [TurnState; 2] = [TurnState::Dispatched, TurnState::Streaming];

/// The one state a worker's lease holds a turn in: a claim starts the turn (`turn.claimed`
/// needs `streaming`), and reporting tool calls or ending the turn ends the lease. In the
/// other claimable state (`dispatched`) no lease can hold it, so there it is not asked.
pub const LEASED_STATE: TurnState = TurnState::Streaming;

/// WORKERS.md's claimable, as far as the turn knows: its state is one of
/// [`CLAIMABLE_STATES`] and, in the [`LEASED_STATE`], no worker's lease holds it. The
/// session has the last say (only an `active` session's turns are claimed): the claim's
/// query and the session machine check that, not this.
pub fn claimable(state: TurnState, leased: bool) -> bool {
    CLAIMABLE_STATES.contains(&state) && !(state == LEASED_STATE && leased)
}

/// The runes after which a turn may have become claimable: the workers' claim bell wakes
/// waiting claimants on them and the agents' NATS doorbells (DELIVERY.md) ring for them.
/// One rune per event that makes a turn claimable (WORKERS.md):
///
/// - `agent.turn_dispatched`: a turn was dispatched (`dispatched` is claimable). Written
///   in the same commit as the turn's own `turn.dispatched`; the agent's rune is the one
///   listed because it names the agent and the epoch, all a doorbell needs, without a read.
/// - `turn.lease_expired`, `turn.released`: a claim ended without ending the turn, which is
///   `streaming` with no lease again.
/// - `turn.tools_finished`: the last tool result resumed the turn, `streaming` and
///   unleased (reporting the calls ended the lease).
/// - `session.resumed`, `session.unsuspended`: the session is `active` again, so its turns
///   that were claimable but for the session are claimable now.
pub const CLAIMABLE_AFTER: [&str; 6] = [
    super::rune::AGENT_TURN_DISPATCHED,
    super::rune::TURN_LEASE_EXPIRED,
    super::rune::TURN_RELEASED,
    super::rune::TURN_TOOLS_FINISHED,
    super::rune::SESSION_RESUMED,
    super::rune::SESSION_UNSUSPENDED,
];

impl Turn {
    /// The turn's id; `None` before `turn.queued`.
    pub fn id(&self) -> Option<Uuid> {
        self.turn_id
    }
    /// Its agent.
    pub fn agent_id(&self) -> Option<Uuid> {
        self.agent_id
    }
    /// `conversation` or `task`.
    pub fn kind(&self) -> Option<TurnKind> {
        self.kind
    }
    /// The task of a task turn.
    pub fn task_id(&self) -> Option<Uuid> {
        self.task_id
    }
    /// What it works on.
    pub fn input(&self) -> Option<&TurnInput> {
        self.input.as_ref()
    }
    /// Its state; `None` before `turn.queued`.
    pub fn state(&self) -> Option<TurnState> {
        self.state
    }
    /// The agent's epoch of its lease.
    pub fn turn_epoch(&self) -> Option<i64> {
        self.turn_epoch
    }
    /// The epoch of its `turn_timeout` deadline: the `turn_epoch` at dispatch, plus one
    /// for every re-arm (`turn.started`, `turn.assistant_delta`, tool runes).
    pub fn watchdog_epoch(&self) -> i64 {
        self.watchdog_epoch
    }
    /// Messages it produced.
    pub fn messages(&self) -> u32 {
        self.messages
    }
    /// The last message it produced.
    pub fn last_message_id(&self) -> Option<Uuid> {
        self.last_message_id
    }
    /// The name of its terminal rune, once it has one.
    pub fn terminal_rune(&self) -> Option<&str> {
        self.terminal_rune.as_deref()
    }
    /// The interruption's reason or the error's type.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
    /// The delivered message of its terminal rune.
    pub fn deliverable(&self) -> Option<Uuid> {
        self.deliverable
    }
    /// Why the deliverable is what it is.
    pub fn deliverable_reason(&self) -> Option<&str> {
        self.deliverable_reason.as_deref()
    }
    /// `saga.anomaly` runes recorded on the turn.
    pub fn anomalies(&self) -> u32 {
        self.anomalies
    }
    /// Whether it is `completed`, `interrupted` or `error`.
    pub fn is_terminal(&self) -> bool {
        self.state.is_some_and(TurnState::is_terminal)
    }
    /// Whether it is `dispatched`, `streaming` or `tool_executing` (the watchdog's states).
    pub fn is_running(&self) -> bool {
        matches!(
            self.state,
            Some(TurnState::Dispatched | TurnState::Streaming | TurnState::ToolExecuting)
        )
    }
    /// Whether it goes straight to streaming when dispatched ([`TurnInput::TaskResume`]).
    pub fn starts_on_dispatch(&self) -> bool {
        matches!(self.input, Some(TurnInput::TaskResume { .. }))
    }
    /// The worker's claim, while one holds the turn.
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }
    /// How many times it was claimed.
    pub fn claims(&self) -> u32 {
        self.claims
    }
    /// How many of its claims expired.
    pub fn expired_claims(&self) -> u32 {
        self.expired_claims
    }
    /// Tokens reported (input, output), once any were.
    pub fn usage(&self) -> Option<(u64, u64)> {
        self.usage
    }
    /// WORKERS.md's claimable (before the session's say): [`claimable`] on its runes.
    pub fn is_claimable(&self) -> bool {
        self.state
            .is_some_and(|state| claimable(state, self.lease.is_some()))
    }
    /// Whether a command or report fenced by `turn_epoch` may act for the turn, as far as
    /// its runes know (the store still checks the lease is live: heartbeats move it).
    ///
    /// # Errors
    /// [`Fenced`] saying why not.
    pub fn fence(&self, turn_epoch: i64) -> Result<(), Fenced> {
        FenceCheck {
            state: self.state.unwrap_or(TurnState::Queued),
            turn_epoch: self.turn_epoch,
            claims: self.claims,
            lease_epoch: self.lease.as_ref().map(|l| l.turn_epoch),
        }
        .check(turn_epoch)
    }
    /// Every `call_id` it reported, in order.
    pub fn tool_call_ids(&self) -> &[String] {
        &self.tool_call_ids
    }
    /// The calls it waits for while `tool_executing` (its last batch; empty after
    /// `turn.tools_finished`).
    pub fn batch(&self) -> &[String] {
        &self.batch
    }
    /// How many batches it reported: the epoch of its `tool_resume` deadline.
    pub fn batches(&self) -> i64 {
        self.batches
    }
    /// The state's name, `none` before `turn.queued`.
    pub fn state_name(&self) -> String {
        self.state.map_or("none", TurnState::as_str).to_string()
    }

    fn guard(&self, rune: &TurnRune) -> Result<(), SagaError> {
        let id = match rune {
            TurnRune::Queued(r) => r.turn_id,
            TurnRune::Dispatched(r) => r.turn_id,
            TurnRune::Started(r) => r.turn_id,
            TurnRune::AssistantDelta(r) => r.turn_id,
            TurnRune::ToolCallsReceived(r) => r.turn_id,
            TurnRune::ToolsFinished(r) => r.turn_id,
            TurnRune::Completed(r) => r.turn_id,
            TurnRune::Interrupted(r) => r.turn_id,
            TurnRune::Error(r) => r.turn_id,
            TurnRune::Claimed(r) => r.turn_id,
            TurnRune::LeaseExpired(r) => r.turn_id,
            TurnRune::Released(r) => r.turn_id,
            TurnRune::UsageReported(r) => r.turn_id,
            TurnRune::Anomaly(_) => return Ok(()),
        };
        if let Some(expected) = self.turn_id.filter(|e| *e != id) {
            return Err(SagaError::WrongInstance {
                rune: rune.name(),
                expected,
                got: id,
            });
        }
        let fail = |reason: String| {
            Err(SagaError::Guard {
                rune: rune.name(),
                reason,
            })
        };
        if let TurnRune::Started(r) = rune {
            if self.agent_id.is_some_and(|a| a != r.agent_id) {
                return fail(format!("agent {} is not the turn's agent", r.agent_id));
            }
        }
        if let TurnRune::ToolCallsReceived(r) = rune {
            let reused =
                r.call_ids.iter().enumerate().find(|(i, id)| {
                    self.tool_call_ids.contains(id) || r.call_ids[..*i].contains(id)
                });
            if r.call_ids.is_empty() {
                return fail("a batch has at least one call".into());
            }
            if let Some((_, id)) = reused {
                return fail(format!("call {id} is already the turn's"));
            }
        }
        if let TurnRune::Claimed(r) = rune {
            let current = self.turn_epoch.unwrap_or(0);
            if r.turn_epoch <= current {
                return fail(format!("epoch {} is not above {current}", r.turn_epoch));
            }
        }
        let lease_end = match rune {
            TurnRune::LeaseExpired(r) => Some(r.turn_epoch),
            TurnRune::Released(r) => Some(r.turn_epoch),
            _ => None,
        };
        if let Some(epoch) = lease_end {
            if self.lease.as_ref().map(|l| l.turn_epoch) != Some(epoch) {
                return fail(format!("epoch {epoch} holds no lease"));
            }
        }
        if let Some((deliverable, reason)) = rune.delivery() {
            if deliverable.is_none() && reason.is_none() {
                return fail("a null deliverable needs a deliverable_reason".into());
            }
            if deliverable.is_some() && deliverable != self.last_message_id {
                return fail("the deliverable is not the turn's last message".into());
            }
        }
        Ok(())
    }
}

impl Machine for Turn {
    type Rune = TurnRune;

    fn check(&self, rune: &TurnRune) -> Result<(), SagaError> {
        use TurnRune as R;
        use TurnState as T;
        self.guard(rune)?;
        let st = self.state;
        let edge = match rune {
            R::Queued(_) => st.is_none(),
            R::Dispatched(_) => st == Some(T::Queued),
            R::Started(_) => st == Some(T::Dispatched),
            R::AssistantDelta(_) | R::ToolCallsReceived(_) => st == Some(T::Streaming),
            R::ToolsFinished(_) => st == Some(T::ToolExecuting),
            R::Completed(_) => matches!(st, Some(T::Streaming | T::ToolExecuting)),
            R::Interrupted(_) => st == Some(T::Queued) || self.is_running(),
            R::Error(_) => self.is_running(),
            R::Claimed(_) => self.is_claimable() && st == Some(T::Streaming),
            R::LeaseExpired(_) | R::Released(_) => st == Some(T::Streaming),
            R::UsageReported(_) => self.is_running(),
            R::Anomaly(_) => true,
        };
        if edge {
            Ok(())
        } else {
            Err(SagaError::NoEdge {
                machine: TURN_TYPE,
                state: self.state_name(),
                rune: rune.name(),
            })
        }
    }

    fn fold(&mut self, rune: TurnRune) {
        use TurnRune as R;
        use TurnState as T;
        let name = rune.name();
        match rune {
            R::Queued(r) => {
                self.turn_id = Some(r.turn_id);
                self.agent_id = Some(r.agent_id);
                self.conversation_id = Some(r.conversation_id);
                self.kind = Some(r.kind);
                self.task_id = r.task_id;
                self.input = Some(r.input);
                self.state = Some(T::Queued);
            }
            R::Dispatched(r) => {
                self.turn_epoch = Some(r.turn_epoch);
                self.watchdog_epoch = r.turn_epoch;
                self.state = Some(T::Dispatched);
            }
            R::Started(_) => {
                self.watchdog_epoch += 1;
                self.state = Some(T::Streaming);
            }
            R::AssistantDelta(r) => {
                self.watchdog_epoch += 1;
                self.messages += 1;
                self.last_message_id = Some(r.message_id);
            }
            R::ToolCallsReceived(r) => {
                self.watchdog_epoch += 1;
                // WORKERS.md: reporting tool calls ends the worker's lease.
                self.lease = None;
                self.state = Some(T::ToolExecuting);
                self.tool_call_ids.extend(r.call_ids.iter().cloned());
                self.batch = r.call_ids;
                self.batches += 1;
            }
            R::ToolsFinished(_) => {
                self.watchdog_epoch += 1;
                self.batch.clear();
                self.state = Some(T::Streaming);
            }
            R::Completed(r) => {
                self.end(
                    T::Completed,
                    name,
                    None,
                    r.deliverable,
                    r.deliverable_reason,
                );
            }
            R::Interrupted(r) => {
                let reason = Some(r.reason);
                self.end(
                    T::Interrupted,
                    name,
                    reason,
                    r.deliverable,
                    r.deliverable_reason,
                );
            }
            R::Error(r) => {
                let reason = Some(r.error_type);
                self.end(T::Error, name, reason, r.deliverable, r.deliverable_reason);
            }
            R::Claimed(r) => {
                self.turn_epoch = Some(r.turn_epoch);
                self.claims += 1;
                self.lease = Some(Lease {
                    turn_epoch: r.turn_epoch,
                    worker: r.worker,
                    lease_expires_at: r.lease_expires_at,
                });
            }
            R::LeaseExpired(_) => {
                self.expired_claims += 1;
                self.lease = None;
            }
            R::Released(_) => self.lease = None,
            R::UsageReported(r) => {
                let (input, output) = self.usage.unwrap_or((0, 0));
                self.usage = Some((
                    input.saturating_add(r.input_tokens),
                    output.saturating_add(r.output_tokens),
                ));
            }
            R::Anomaly(_) => self.anomalies += 1,
        }
    }
}

impl Turn {
    fn end(
        &mut self,
        state: TurnState,
        rune: &str,
        reason: Option<String>,
        deliverable: Option<Uuid>,
        deliverable_reason: Option<String>,
    ) {
        self.state = Some(state);
        self.lease = None;
        self.batch.clear();
        self.terminal_rune = Some(rune.to_string());
        self.reason = reason;
        self.deliverable = deliverable;
        self.deliverable_reason = deliverable_reason;
    }
}

saga_aggregate!(Turn, TurnRune, TURN_TYPE);
