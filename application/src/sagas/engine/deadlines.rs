//! Inputs of the sagas' own: the deadlines that fall due, and the start-up recovery of
//! the sessions no replica ran the sagas for. Each conversation is one transaction, and
//! conversations go in parallel.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt};
use pm_domain::saga::{Deadline, Input};
use uuid::Uuid;

use super::attempt::{Decided, Hold, Stopped};
use super::{
    deadline_key, loaded, record, SagaEngine, ATTEMPTS, CONVERSATIONS_IN_PARALLEL, SAGA_ROLE,
    SYSTEM_PRINCIPAL,
};
use crate::bus::EventMetadata;
use crate::sagas::slots::Held;
use crate::sagas::{SagaStore, SagaWrite};
use crate::trace::TraceContext;
use crate::AppError;

impl<S: SagaStore> SagaEngine<S> {
    /// Fires the deadlines due now (at most `limit`), each once; returns how many fired.
    /// Each conversation's deadlines are one transaction, and conversations go in
    /// parallel; a conversation written elsewhere meanwhile is left for the next call.
    ///
    /// # Errors
    /// The store's error when nothing could be fired.
    #[tracing::instrument(name = "saga_deadlines", skip(self))]
    pub async fn fire_due(&self, limit: u32) -> Result<usize, AppError> {
        let now = self.clock.now();
        let due = self.store.due(now, limit).await?;
        let mut by_conversation: BTreeMap<Uuid, Vec<Deadline>> = BTreeMap::new();
        for (conversation, deadline) in due {
            by_conversation
                .entry(conversation)
                .or_default()
                .push(deadline);
        }
        let results: Vec<Result<usize, AppError>> = stream::iter(by_conversation)
            .map(|(conversation, deadlines)| self.fire(conversation, deadlines, now))
            .buffer_unordered(CONVERSATIONS_IN_PARALLEL)
            .collect()
            .await;
        summed(results)
    }

    /// Fires `deadlines` of `conversation` in one transaction, decided once: a conflict
    /// means they may have been fired elsewhere, and what is still due is due at the next
    /// call.
    async fn fire(
        &self,
        conversation: Uuid,
        deadlines: Vec<Deadline>,
        now: DateTime<Utc>,
    ) -> Result<usize, AppError> {
        let hold = Hold::one(conversation).once();
        let fired = self
            .run(hold, None, |held, write| {
                for deadline in &deadlines {
                    let metadata = EventMetadata {
                        correlation_id: deadline_key(deadline),
                        causation_id: Some(format!(
                            "{}:{}",
                            deadline_key(deadline),
                            deadline.epoch
                        )),
                        role: SAGA_ROLE.into(),
                        principal: SYSTEM_PRINCIPAL.into(),
                        recorded_at: now,
                        turn: None,
                        // No request caused it: a trace of its own.
                        trace: Some(TraceContext::root()),
                    };
                    // The row is spent whatever the machine decides (a stale epoch does
                    // nothing).
                    write.fired.push((conversation, *deadline));
                    let input = Input::DeadlineDue(deadline);
                    self.decide(held, write, conversation, input, now, &metadata)?;
                }
                Ok(Decided::Write(deadlines.len()))
            })
            .await;
        match fired {
            Ok(done) => Ok(done.answer),
            // Fired or changed elsewhere: what is still due is due at the next call.
            Err(Stopped::Contended) => Ok(0),
            Err(Stopped::Decision(e)) => Err(e),
            Err(Stopped::Failed(failure)) => Err(failure.into()),
        }
    }

    /// The start-up recovery (FCMP §4) of the open sessions that wait for the user or have
    /// deadlines that fell due while no replica ran the sagas; returns how many sessions
    /// it looked at. Each session is one transaction; sessions go in parallel.
    ///
    /// # Errors
    /// The store's error (the sessions recovered before it stay recovered).
    #[tracing::instrument(name = "saga_restart", skip(self))]
    pub async fn restart(&self) -> Result<usize, AppError> {
        let now = self.clock.now();
        let recovering = self.store.recovering(now).await?;
        let results: Vec<Result<usize, AppError>> = stream::iter(recovering)
            .map(|(conversation, deadlines)| self.recover(conversation, deadlines, now))
            .buffer_unordered(CONVERSATIONS_IN_PARALLEL)
            .collect()
            .await;
        let mut sessions = 0;
        for result in results {
            sessions += result?;
        }
        Ok(sessions)
    }

    /// Recovers one session (see [`SagaEngine::restart`]).
    async fn recover(
        &self,
        conversation: Uuid,
        deadlines: Vec<Deadline>,
        now: DateTime<Utc>,
    ) -> Result<usize, AppError> {
        let overdue: Vec<Deadline> = deadlines.into_iter().filter(|d| d.due_at <= now).collect();
        let metadata = EventMetadata {
            correlation_id: format!("restart:{conversation}"),
            causation_id: Some("restart".into()),
            role: SAGA_ROLE.into(),
            principal: SYSTEM_PRINCIPAL.into(),
            recorded_at: now,
            turn: None,
            trace: Some(TraceContext::root()),
        };
        let recovered = self
            .run(Hold::one(conversation), None, |held, write| {
                let input = Input::Restart { overdue: &overdue };
                self.decide(held, write, conversation, input, now, &metadata)?;
                Ok(Decided::Write(1))
            })
            .await;
        match recovered {
            Ok(done) => Ok(done.answer),
            Err(Stopped::Contended) => Err(AppError::ConcurrencyConflict { attempts: ATTEMPTS }),
            Err(Stopped::Decision(e)) => Err(e),
            Err(Stopped::Failed(failure)) => Err(failure.into()),
        }
    }

    /// Runs `input` through the machines of `conversation` into `write`. Inputs that are
    /// not controls are never refused; a refusal would only mean nothing to write.
    fn decide(
        &self,
        held: &mut BTreeMap<Uuid, Held>,
        write: &mut SagaWrite,
        conversation: Uuid,
        input: Input<'_>,
        now: DateTime<Utc>,
        metadata: &EventMetadata,
    ) -> Result<(), AppError> {
        let machines = loaded(held, conversation)?;
        let outcome = machines
            .sagas
            .handle(input, now, &self.config)
            .unwrap_or_default();
        record(machines, write, conversation, outcome, metadata);
        Ok(())
    }
}

/// The sum of the counts, or the first error when nothing was counted.
fn summed(results: Vec<Result<usize, AppError>>) -> Result<usize, AppError> {
    let mut total = 0;
    let mut error = None;
    for result in results {
        match result {
            Ok(n) => total += n,
            Err(e) => error = error.or(Some(e)),
        }
    }
    match error {
        Some(e) if total == 0 => Err(e),
        Some(e) => {
            tracing::warn!(error = %e, "some deadlines could not be fired; retrying");
            Ok(total)
        }
        None => Ok(total),
    }
}
