//! What callers ask of one conversation's machines: operators' controls and workers'
//! requests on turns (WORKERS.md), each decided and committed on its own, or refused
//! without a write.

use std::collections::BTreeMap;

use pm_domain::saga::{
    Control, ControlError, Input, Sagas, WorkerOp, TURN_FENCED, TURN_TRANSITION_NOT_ALLOWED,
};
use uuid::Uuid;

use super::attempt::{Decided, Failure, Hold, Stopped};
use super::{loaded, record, SagaEngine, ATTEMPTS};
use crate::bus::EventMetadata;
use crate::log::LogPosition;
use crate::sagas::slots::Held;
use crate::sagas::{SagaStore, SagaWrite};
use crate::AppError;

/// What [`SagaEngine::worker`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerDone {
    /// The turn's conversation.
    pub conversation: Uuid,
    /// The position of its last rune, if it wrote any.
    pub position: Option<LogPosition>,
    /// The turn's row after it.
    pub turn: Option<pm_domain::saga::TurnView>,
    /// The actor the turn's agent acts for: what a command fenced by the turn may speak
    /// as (its claimant's replica remembers it, sparing that check a read).
    pub actor: Option<Uuid>,
}

/// What [`SagaEngine::one`] committed, and what its caller read from the machines.
struct Done<T> {
    position: Option<LogPosition>,
    read: T,
}

/// Why [`SagaEngine::one`] did not commit.
enum OneError {
    /// A lease the outcome was decided on is gone.
    LeaseGone,
    /// The store failed.
    App(AppError),
}

impl From<AppError> for OneError {
    fn from(e: AppError) -> Self {
        Self::App(e)
    }
}

/// What an operator's control is aimed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlTarget {
    /// A session (by its conversation).
    Session(Uuid),
    /// An agent.
    Agent(Uuid),
}

impl<S: SagaStore> SagaEngine<S> {
    /// An operator's control; answers the conversation whose machines it changed and the
    /// position of its last rune.
    ///
    /// # Errors
    /// `Ok(Err(ControlError))` when the machine refuses it (nothing is written);
    /// [`AppError`] for the store.
    #[tracing::instrument(name = "saga_control", skip(self, metadata))]
    pub async fn control(
        &self,
        target: ControlTarget,
        control: Control,
        metadata: EventMetadata,
    ) -> Result<Result<(Uuid, Option<LogPosition>), ControlError>, AppError> {
        let conversation = match target {
            ControlTarget::Session(c) => c,
            ControlTarget::Agent(a) => match self.store.agent_conversation(a).await? {
                Some(c) => c,
                None => return Ok(Err(ControlError::AgentNotFound)),
            },
        };
        let input = || Input::Control(control.clone());
        match self.one(conversation, None, input, &metadata, |_| ()).await {
            Ok(done) => Ok(done.map(|d| (conversation, d.position))),
            Err(OneError::App(e)) => Err(e),
            // A control decides on no lease.
            Err(OneError::LeaseGone) => Err(AppError::Internal(
                "a control was decided on a worker's lease".into(),
            )),
        }
    }

    /// A worker's request on a turn (WORKERS.md), decided on its conversation's machines
    /// (`seen`: the conversation and the version a claimable look saw the turn at, when the
    /// caller knows them; else looked up) and committed with the leases it was decided on;
    /// answers the turn's row after it.
    ///
    /// # Errors
    /// `Ok(Err(ControlError))` when the machine refuses it, or when the lease it relied on
    /// was gone at commit (`turn_fenced` for a report; `turn_transition_not_allowed` for an
    /// interrupt that lost to a fenced completion); [`AppError`] for the store.
    #[tracing::instrument(name = "saga_worker", skip(self, op, metadata))]
    pub async fn worker(
        &self,
        turn_id: Uuid,
        seen: Option<(Uuid, i64)>,
        op: WorkerOp,
        metadata: EventMetadata,
    ) -> Result<Result<WorkerDone, ControlError>, AppError> {
        let (conversation, seen) = match seen {
            Some((c, version)) => (c, Some(version)),
            None => match self.store.turn_conversation(turn_id).await? {
                Some(c) => (c, None),
                None => return Ok(Err(ControlError::TurnNotFound)),
            },
        };
        let interrupt = matches!(op, WorkerOp::Interrupt { .. });
        let input = || Input::Worker {
            turn_id,
            op: op.clone(),
        };
        let at = metadata.recorded_at;
        let read = |sagas: &Sagas| {
            let agent = sagas.turns().get(&turn_id).and_then(|t| t.agent_id());
            let actor = agent.and_then(|a| sagas.agents().get(&a)?.actor_id());
            (sagas.turn_view(turn_id, at), actor)
        };
        match self.one(conversation, seen, input, &metadata, read).await {
            Ok(done) => Ok(done.map(|d| WorkerDone {
                conversation,
                position: d.position,
                turn: d.read.0,
                actor: d.read.1,
            })),
            Err(OneError::LeaseGone) if interrupt => Ok(Err(ControlError::NotAllowed {
                code: TURN_TRANSITION_NOT_ALLOWED,
                detail: "the turn is completing: a fenced command ended it first".into(),
            })),
            Err(OneError::LeaseGone) => Ok(Err(ControlError::NotAllowed {
                code: TURN_FENCED,
                detail: "the claim's lease expired or was ended".into(),
            })),
            Err(OneError::App(e)) => Err(e),
        }
    }

    /// Decides one input on one conversation and commits it, deciding again (reloaded)
    /// when another writer changed the conversation meanwhile; `read` takes what the
    /// caller wants from the machines after the input. `seen`: a version of the
    /// conversation the caller read (machines cached at it or later are current). A
    /// refusal is answered without a commit, once the loop knows the machines it was
    /// decided on are current ([`Decided::Unwritten`]).
    async fn one<T>(
        &self,
        conversation: Uuid,
        seen: Option<i64>,
        input: impl Fn() -> Input<'static>,
        metadata: &EventMetadata,
        read: impl Fn(&Sagas) -> T,
    ) -> Result<Result<Done<T>, ControlError>, OneError> {
        let hold = Hold::one(conversation).seen(conversation, seen);
        let decided = self
            .run(
                hold,
                None,
                |held: &mut BTreeMap<Uuid, Held>, write: &mut SagaWrite| {
                    let now = self.clock.now();
                    let machines = loaded(held, conversation)?;
                    let refused = if machines.sagas.session().is_none() {
                        Err(ControlError::SessionNotFound)
                    } else {
                        machines.sagas.handle(input(), now, &self.config)
                    };
                    let outcome = match refused {
                        Ok(outcome) => outcome,
                        // A refusal changes nothing, in memory either.
                        Err(refused) => return Ok(Decided::Unwritten(Err(refused))),
                    };
                    let metadata = EventMetadata {
                        recorded_at: now,
                        ..metadata.clone()
                    };
                    record(machines, write, conversation, outcome, &metadata);
                    Ok::<_, AppError>(Decided::Write(Ok(read(&machines.sagas))))
                },
            )
            .await;
        match decided {
            Ok(done) => Ok(done.answer.map(|read| Done {
                position: done.position,
                read,
            })),
            // `concurrency_conflict` (409).
            Err(Stopped::Contended) => {
                Err(AppError::ConcurrencyConflict { attempts: ATTEMPTS }.into())
            }
            Err(Stopped::Decision(e)) => Err(e.into()),
            Err(Stopped::Failed(Failure::LeaseGone { .. })) => Err(OneError::LeaseGone),
            Err(Stopped::Failed(failure)) => Err(AppError::from(failure).into()),
        }
    }
}
