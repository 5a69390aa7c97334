//! A batch of the log through the machines: its facts planned onto their conversations,
//! decided in log order, and committed with the processor's cursor in one transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::stream::{self, StreamExt};
use pm_domain::saga::Input;
use pm_domain::types::ActorKind;
use uuid::Uuid;

use super::attempt::{Decided, Failure, Hold, Stopped};
use super::{loaded, record, SagaEngine, READS_IN_PARALLEL, SAGA_ROLE, SYSTEM_PRINCIPAL};
use crate::bus::EventMetadata;
use crate::fact::{Fact, FactError};
use crate::log::{LogPosition, LoggedEvent};
use crate::processor::BatchError;
use crate::sagas::slots::Held;
use crate::sagas::{SagaStore, SagaWrite};
use crate::trace::genai;
use crate::AppError;

/// A fact of a batch with the conversation whose machines decide it.
struct Planned<'e> {
    index: usize,
    event: &'e LoggedEvent,
    fact: Fact,
    conversation: Uuid,
}

impl<S: SagaStore> SagaEngine<S> {
    /// Applies a batch of the log (the events after `from`) and moves the processor's
    /// cursor to its last event, in one transaction.
    ///
    /// # Errors
    /// [`BatchError`]: a fact that cannot be read is poison; store trouble is transient
    /// (the batch is decided again).
    #[tracing::instrument(name = "saga_batch", skip_all, fields(from = %from, events = events.len()))]
    pub async fn apply_batch(
        &self,
        from: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        let Some(last) = events.last().map(|e| e.position) else {
            return Ok(from);
        };
        // Only timed when its decisions are spans.
        let start = self.spans.as_ref().map(|_| chrono::Utc::now());
        let planned = plan(events)?;
        let kinds = self.kinds_of(&planned).await.map_err(transient)?;
        let conversations: BTreeSet<Uuid> = planned
            .iter()
            .filter(|p| !matches!(p.fact, Fact::ActorRegistered(_)))
            .map(|p| p.conversation)
            .collect();
        // Conversations started in this batch have no runes yet (runes are committed with
        // the cursor, and nothing else writes a conversation before its session exists).
        let started: BTreeSet<Uuid> = planned
            .iter()
            .filter(|p| matches!(p.fact, Fact::ConversationStarted(_)))
            .map(|p| p.conversation)
            .collect();
        let hold = Hold::all(conversations).fresh(started);
        let decided = self
            .run(hold, Some((from, last)), |held, write| {
                for p in &planned {
                    self.decide_fact(held, write, p, &kinds)?;
                }
                Ok(Decided::Write(last))
            })
            .await;
        match decided {
            Ok(done) => {
                if let Some((spans, start)) = self.spans.as_ref().zip(start) {
                    let end = chrono::Utc::now();
                    for p in &planned {
                        let decided = genai::saga_decision(
                            p.event,
                            p.conversation,
                            events.len(),
                            (start, end),
                        );
                        if let Some(span) = decided {
                            spans.finished(span);
                        }
                    }
                }
                Ok(done.answer)
            }
            // The batch is read again.
            Err(Stopped::Contended) => Err(BatchError::Transient(
                "saga state kept changing under the batch".into(),
            )),
            Err(Stopped::Decision(e)) => Err(e),
            Err(Stopped::Failed(Failure::CursorMoved)) => Err(BatchError::CursorMoved),
            Err(Stopped::Failed(failure)) => Err(BatchError::Transient(failure.to_string())),
        }
    }

    /// The kinds of the actors whose kind a batch's decisions need: learnt from the
    /// batch's own registrations, remembered, or read (in parallel).
    async fn kinds_of(
        &self,
        planned: &[Planned<'_>],
    ) -> Result<HashMap<Uuid, ActorKind>, AppError> {
        let mut kinds = HashMap::new();
        let mut wanted = BTreeSet::new();
        for p in planned {
            match &p.fact {
                Fact::ActorRegistered(a) => {
                    self.kinds.insert(a.id, a.kind);
                    kinds.insert(a.id, a.kind);
                }
                Fact::ConversationStarted(c) => wanted.extend(c.actor_ids.iter().copied()),
                Fact::MessageAdded(m) => {
                    wanted.insert(m.actor_id);
                }
                _ => {}
            }
        }
        let missing: Vec<Uuid> = wanted
            .into_iter()
            .filter(|id| match self.kinds.get(id) {
                Some(kind) => {
                    kinds.insert(*id, kind);
                    false
                }
                None => !kinds.contains_key(id),
            })
            .collect();
        let read: Vec<(Uuid, Result<Option<ActorKind>, AppError>)> = stream::iter(missing)
            .map(|id| async move { (id, self.store.actor_kind(id).await) })
            .buffer_unordered(READS_IN_PARALLEL)
            .collect()
            .await;
        for (id, kind) in read {
            if let Some(kind) = kind? {
                self.kinds.insert(id, kind);
                kinds.insert(id, kind);
            }
        }
        Ok(kinds)
    }

    /// Decides what one fact of a batch does.
    fn decide_fact(
        &self,
        held: &mut BTreeMap<Uuid, Held>,
        write: &mut SagaWrite,
        p: &Planned<'_>,
        kinds: &HashMap<Uuid, ActorKind>,
    ) -> Result<(), BatchError> {
        let event = p.event;
        let now = event.recorded_at().unwrap_or_else(|| self.clock.now());
        let ai_actors: Vec<Uuid>;
        let input = match &p.fact {
            Fact::ConversationStarted(fact) => {
                ai_actors = fact
                    .actor_ids
                    .iter()
                    .copied()
                    .filter(|id| kinds.get(id) == Some(&ActorKind::Ai))
                    .collect();
                Input::ConversationStarted {
                    fact,
                    ai_actors: &ai_actors,
                }
            }
            Fact::MessageAdded(fact) => Input::MessageAdded {
                fact,
                author: kinds
                    .get(&fact.actor_id)
                    .copied()
                    .unwrap_or(ActorKind::Human),
            },
            Fact::ConversationCheckpointCreated(fact) => Input::CheckpointCreated(fact),
            Fact::TaskCreated(fact) => Input::TaskCreated(fact),
            Fact::TaskCheckpointCreated(fact) => Input::TaskCheckpointCreated {
                fact,
                conversation_id: p.conversation,
            },
            Fact::ActorRegistered(_) | Fact::ActorForgotten(_) | Fact::ConversationForgotten(_) => {
                return Ok(())
            }
        };
        let machines =
            loaded(held, p.conversation).map_err(|e| BatchError::Transient(e.to_string()))?;
        // A fenced fact (WORKERS.md) names its turn in its metadata.
        let fence = event.meta().turn_id();
        let outcome = machines
            .sagas
            .handle_fenced_at(event.position.value(), fence, input, now, &self.config)
            .map_err(|e| BatchError::Poison {
                index: p.index,
                reason: format!("a fact was refused like a control: {e}"),
            })?;
        let metadata = EventMetadata {
            correlation_id: event
                .meta()
                .correlation_id()
                .map_or_else(|| event.position.to_string(), str::to_string),
            causation_id: Some(event.position.to_string()),
            role: SAGA_ROLE.into(),
            // Whoever wrote the fact asked, through it, for what the sagas decide on it.
            principal: event
                .meta()
                .principal()
                .unwrap_or(SYSTEM_PRINCIPAL)
                .to_string(),
            recorded_at: now,
            turn: None,
            // In the trace of the fact it decides on.
            trace: event.meta().trace(),
        };
        record(machines, write, p.conversation, outcome, &metadata);
        Ok(())
    }
}

/// The facts of a batch that the machines decide, each with its conversation.
///
/// # Errors
/// [`BatchError::Poison`] for an event that names a fact but does not read as one.
fn plan(events: &[LoggedEvent]) -> Result<Vec<Planned<'_>>, BatchError> {
    let mut planned = Vec::with_capacity(events.len());
    for (index, event) in events.iter().enumerate() {
        let fact = match Fact::from_logged(event) {
            Ok(fact) => fact,
            // Runes and anything else that is not a fact: not the sagas' input.
            Err(FactError::Unknown(_)) => continue,
            Err(e) => {
                return Err(BatchError::Poison {
                    index,
                    reason: e.to_string(),
                })
            }
        };
        let conversation = match &fact {
            // Registrations only teach kinds; they have no machines.
            Fact::ActorRegistered(_) => Uuid::nil(),
            // Forgetting changes no machine: their texts read as stand-ins from then on.
            Fact::ActorForgotten(_) | Fact::ConversationForgotten(_) => continue,
            Fact::ConversationStarted(c) => c.id,
            Fact::MessageAdded(m) => m.conversation_id,
            Fact::ConversationCheckpointCreated(c) => c.conversation_id,
            Fact::TaskCreated(t) => t.conversation_id,
            Fact::TaskCheckpointCreated(_) => match event.conversation_id {
                Some(c) => c,
                None => continue,
            },
        };
        planned.push(Planned {
            index,
            event,
            fact,
            conversation,
        });
    }
    // Registrations stay in the plan (their kinds are learnt from it) but hold no slot.
    Ok(planned)
}

fn transient(e: AppError) -> BatchError {
    BatchError::Transient(e.to_string())
}
