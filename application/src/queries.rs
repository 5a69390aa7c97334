//! The query side: the read model's port ([`ReadModelStore`]) and the sagas'
//! ([`SagaReadStore`]), their filters, and [`Queries`], which makes a read wait until the
//! processor behind it has processed a given log position (`?min_position=`,
//! read-your-writes).

mod sagas;

pub use sagas::{
    AgentFilter, AnomalyFilter, SagaReadStore, SessionFilter, ToolCallFilter, TurnFilter,
};

use std::future::Future;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use pm_domain::types::{CheckpointType, TaskStatus};
use uuid::Uuid;

use crate::log::{LogPosition, LogReader};
use crate::processor::{ProcessorStatus, ProcessorStore};
use crate::read_model::READ_MODEL;
use crate::sagas::SAGAS;
use crate::scope::Scope;
use crate::views::{
    ConversationView, Forgettable, Page, PageRequest, StatsGroup, TaskCheckpointView, TaskDetail,
    TaskStatsView, TaskView,
};
use crate::AppError;
use tokio::sync::watch;

/// Filters of `GET /v1/conversations`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConversationFilter {
    /// Exact organization.
    pub organization: Option<String>,
    /// Exact status.
    pub status: Option<String>,
    /// Exact external source.
    pub external_source: Option<String>,
    /// Conversations this actor takes part in.
    pub actor_id: Option<Uuid>,
    /// Created at or after.
    pub created_after: Option<DateTime<Utc>>,
    /// Created before.
    pub created_before: Option<DateTime<Utc>>,
    /// Type of the latest checkpoint.
    pub latest_checkpoint_type: Option<CheckpointType>,
}

/// Filters of `GET /v1/tasks` (and `GET /v1/conversations/{id}/tasks`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Derived status.
    pub status: Option<TaskStatus>,
    /// Assignee.
    pub assigned_to: Option<Uuid>,
    /// Conversation.
    pub conversation_id: Option<Uuid>,
    /// The `BEGIN_WORK` checkpoint.
    pub checkpoint_id: Option<Uuid>,
    /// The conversation's organization.
    pub organization: Option<String>,
}

/// Filters of `GET /v1/conversations/{id}/messages`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFilter {
    /// Only messages about this task.
    pub task_id: Option<Uuid>,
    /// Only messages by this actor.
    pub actor_id: Option<Uuid>,
}

/// Read access to the read model. Lists and statistics take the caller's [`Scope`]; one
/// thing is read by id once the HTTP layer has checked the caller may see it. Entities
/// that show personal texts come as [`Forgettable`]: once their party is forgotten their
/// texts are shown `null` (TRUST.md "Forgetting a person").
///
/// # Errors
/// Every method fails with [`AppError::Unavailable`] when the store cannot be read.
pub trait ReadModelStore: Send + Sync + 'static {
    /// The actor, if registered (and projected).
    fn actor(
        &self,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<Forgettable<ActorRegistered>>, AppError>> + Send;
    /// The conversation with its latest checkpoint and counts.
    fn conversation(
        &self,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<Forgettable<ConversationView>>, AppError>> + Send;
    /// Conversations matching `filter`, oldest first.
    fn conversations(
        &self,
        scope: &Scope,
        filter: &ConversationFilter,
        page: &PageRequest,
    ) -> impl Future<Output = Result<Page<Forgettable<ConversationView>>, AppError>> + Send;
    /// A conversation's checkpoints in log order.
    fn checkpoints(
        &self,
        conversation_id: Uuid,
        page: &PageRequest,
    ) -> impl Future<Output = Result<Page<Forgettable<ConversationCheckpointCreated>>, AppError>> + Send;
    /// One checkpoint of a conversation.
    fn checkpoint(
        &self,
        conversation_id: Uuid,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<Forgettable<ConversationCheckpointCreated>>, AppError>> + Send;
    /// A conversation's messages in `time` order.
    fn messages(
        &self,
        conversation_id: Uuid,
        filter: &MessageFilter,
        page: &PageRequest,
    ) -> impl Future<Output = Result<Page<Forgettable<MessageAdded>>, AppError>> + Send;
    /// One message of a conversation.
    fn message(
        &self,
        conversation_id: Uuid,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<Forgettable<MessageAdded>>, AppError>> + Send;
    /// Tasks matching `filter`, oldest first.
    fn tasks(
        &self,
        scope: &Scope,
        filter: &TaskFilter,
        page: &PageRequest,
    ) -> impl Future<Output = Result<Page<Forgettable<TaskView>>, AppError>> + Send;
    /// The task with its status and checkpoint history.
    fn task(
        &self,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<Forgettable<TaskDetail>>, AppError>> + Send;
    /// One checkpoint of a task.
    fn task_checkpoint(
        &self,
        task_id: Uuid,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<TaskCheckpointView>, AppError>> + Send;
    /// Counts by status and cycle times, overall or per group.
    fn task_stats(
        &self,
        scope: &Scope,
        group: StatsGroup,
    ) -> impl Future<Output = Result<TaskStatsView, AppError>> + Send;
}

/// How long a read waits for `min_position` before answering that the projection lags.
pub const MIN_POSITION_WAIT: Duration = Duration::from_secs(5);

/// The query use cases: the read model and the saga rows, behind read-your-writes.
pub struct Queries<R, G, P, L> {
    read: R,
    sagas: G,
    processors: P,
    log: L,
    /// The status of this replica's own runners, by processor: a wait ends as soon as the
    /// local runner has committed the position, without polling the store.
    local: Vec<(&'static str, watch::Receiver<ProcessorStatus>)>,
}

impl<R: ReadModelStore, G: SagaReadStore, P: ProcessorStore, L: LogReader> Queries<R, G, P, L> {
    /// Queries over `read` (kept by the `read_model` processor) and `sagas` (kept by the
    /// `sagas` processor), whose cursors are in `processors`, of the log `log`.
    pub fn new(read: R, sagas: G, processors: P, log: L) -> Self {
        Self {
            read,
            sagas,
            processors,
            log,
            local: Vec::new(),
        }
    }

    /// Also follows this replica's runner of `processor` (its committed cursor, as
    /// [`ProcessorStatus::cursor`]): reads waiting for a position it has committed answer
    /// at once, woken by the runner instead of the 20 ms poll of the store.
    pub fn with_local_runner(
        mut self,
        processor: &'static str,
        status: watch::Receiver<ProcessorStatus>,
    ) -> Self {
        self.local.push((processor, status));
        self
    }

    /// The read model, once it has processed `min_position` (immediately without one).
    ///
    /// # Errors
    /// [`AppError::InvalidPosition`] at once for a position beyond the log's end;
    /// [`AppError::ProjectionLagging`] when it has not been processed within
    /// [`MIN_POSITION_WAIT`]; [`AppError::Unavailable`] when the store cannot be read.
    pub async fn at(&self, min_position: Option<LogPosition>) -> Result<&R, AppError> {
        self.wait(READ_MODEL, min_position).await?;
        Ok(&self.read)
    }

    /// The saga rows, once the saga processor has processed `min_position`.
    ///
    /// # Errors
    /// As [`Queries::at`].
    pub async fn sagas_at(&self, min_position: Option<LogPosition>) -> Result<&G, AppError> {
        self.wait(SAGAS, min_position).await?;
        Ok(&self.sagas)
    }

    /// The saga rows as they are (for the answer of a control, which wrote them).
    pub fn sagas_unchecked(&self) -> &G {
        &self.sagas
    }

    #[tracing::instrument(name = "read_your_writes", skip(self), fields(min_position = ?min_position.map(|p| p.to_string())))]
    async fn wait(
        &self,
        processor: &str,
        min_position: Option<LogPosition>,
    ) -> Result<(), AppError> {
        let Some(wanted) = min_position else {
            return Ok(());
        };
        let started = Instant::now();
        let mut checked_head = false;
        let mut local = self
            .local
            .iter()
            .find(|(name, _)| *name == processor)
            .map(|(_, status)| status.clone());
        loop {
            // The local runner's cursor only moves after its commit, and cursors only
            // grow: at or past `wanted`, the rows are there.
            if local.as_ref().is_some_and(|s| s.borrow().cursor >= wanted) {
                return Ok(());
            }
            let processed = self.processors.cursor(processor).await?;
            if processed >= wanted {
                return Ok(());
            }
            if !checked_head {
                check_in_log(&self.log, wanted).await?;
                checked_head = true;
            }
            if started.elapsed() >= MIN_POSITION_WAIT {
                return Err(AppError::ProjectionLagging { processed, wanted });
            }
            let poll = tokio::time::sleep(Duration::from_millis(20));
            let runner_gone = match local.as_mut() {
                Some(status) => tokio::select! {
                    changed = status.changed() => changed.is_err(),
                    () = poll => false,
                },
                None => {
                    poll.await;
                    false
                }
            };
            if runner_gone {
                local = None;
            }
        }
    }
}

/// Fails with [`AppError::InvalidPosition`] unless `position` is in the log (at or before
/// its committed end).
///
/// # Errors
/// [`AppError::InvalidPosition`], or the log's own error.
pub async fn check_in_log(log: &impl LogReader, position: LogPosition) -> Result<(), AppError> {
    let head = log.end().await?;
    if position > head {
        return Err(AppError::InvalidPosition(format!(
            "position {position} is beyond the end of the log ({head})"
        )));
    }
    Ok(())
}
