//! [`SagaProcessor`]: the saga engine as a processor of the log.

use std::sync::Arc;

use crate::log::{LogPosition, LoggedEvent};
use crate::processor::{BatchError, BatchHandler};

use super::{CommitError, SagaEngine, SagaStore, SAGAS};

/// The saga processor: facts in log order into the saga machines.
pub struct SagaProcessor<S> {
    engine: Arc<SagaEngine<S>>,
}

impl<S: SagaStore> SagaProcessor<S> {
    /// The processor of `engine`.
    pub fn new(engine: Arc<SagaEngine<S>>) -> Self {
        Self { engine }
    }
}

impl<S: SagaStore> BatchHandler for SagaProcessor<S> {
    fn name(&self) -> &str {
        SAGAS
    }

    async fn apply(
        &self,
        from: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        self.engine.apply_batch(from, events).await
    }

    async fn park(
        &self,
        from: LogPosition,
        event: &LoggedEvent,
        reason: &str,
    ) -> Result<LogPosition, BatchError> {
        self.engine
            .store()
            .park(from, event, reason)
            .await
            .map_err(|e| match e {
                CommitError::CursorMoved => BatchError::CursorMoved,
                other => BatchError::Transient(other.to_string()),
            })
    }
}
