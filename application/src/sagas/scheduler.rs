//! [`DeadlineScheduler`]: fires due deadlines on the replica that runs the saga
//! processor, after the start-up recovery.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{SagaEngine, SagaStore};
use crate::log::LogReader;
use crate::processor::ProcessorStatus;

/// Deadlines fired per transaction at most.
const FIRE_BATCH: u32 = 100;

/// How long the scheduler waits for the saga processor to reach the log's head before it
/// fires anything (it tries again next tick).
const CATCH_UP: Duration = Duration::from_secs(2);

/// Fires the deadlines of the sagas.
///
/// - It acts only while this replica owns the saga processor (the `status` of its
///   runner), so with several replicas each deadline fires once; the saga processor's row
///   lock and the deletion of a fired row in the same transaction make that exact.
/// - Before firing it waits until the processor has applied every event committed before
///   the deadline was looked at: a fact that ended a turn just in time is applied before
///   the turn's watchdog is considered.
/// - On gaining ownership (start-up, or taking over from a replica that died) it first
///   runs the FCMP restart recovery: deadlines that fell due while nobody ran the sagas
///   fire then.
pub struct DeadlineScheduler<S, L> {
    engine: Arc<SagaEngine<S>>,
    status: watch::Receiver<ProcessorStatus>,
    log: L,
    tick: Duration,
}

impl<S: SagaStore, L: LogReader> DeadlineScheduler<S, L> {
    /// A scheduler of `engine`'s deadlines, following the runner whose status is `status`,
    /// looking every `tick`.
    pub fn new(
        engine: Arc<SagaEngine<S>>,
        status: watch::Receiver<ProcessorStatus>,
        log: L,
        tick: Duration,
    ) -> Self {
        Self {
            engine,
            status,
            log,
            tick,
        }
    }

    /// Runs until `shutdown`.
    #[tracing::instrument(name = "deadline_scheduler", skip_all)]
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut recovered = false;
        while !shutdown.is_cancelled() {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.tick) => {}
            }
            if !self.status.borrow().leader {
                recovered = false;
                continue;
            }
            if !self.caught_up().await {
                continue;
            }
            if !recovered {
                match self.engine.restart().await {
                    Ok(sessions) => {
                        tracing::info!(sessions, "saga recovery done");
                        metrics::counter!("pm_saga_recoveries_total").increment(1);
                        recovered = true;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "saga recovery failed; retrying");
                        continue;
                    }
                }
            }
            loop {
                match self.engine.fire_due(FIRE_BATCH).await {
                    Ok(fired) => {
                        metrics::counter!("pm_saga_deadlines_fired_total").increment(fired as u64);
                        if fired < FIRE_BATCH as usize {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not fire deadlines; retrying");
                        break;
                    }
                }
            }
        }
    }

    /// Whether the saga processor has reached the log's head as it is now (waiting up to
    /// [`CATCH_UP`]) while this replica still owns it.
    async fn caught_up(&mut self) -> bool {
        let Ok(head) = self.log.head().await else {
            return false;
        };
        let reached = tokio::time::timeout(
            CATCH_UP,
            self.status.wait_for(|s| !s.leader || s.cursor >= head),
        )
        .await;
        matches!(reached, Ok(Ok(s)) if s.leader)
    }
}
