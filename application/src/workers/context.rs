//! A claim's context (WORKERS.md): what the worker needs to work its turn without another
//! read — its conversation, the message, checkpoint or task that caused it, and its tool
//! calls — read so that it shows the turn's cause.

use serde::Serialize;
use uuid::Uuid;

use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use pm_domain::saga::TurnInput;

use crate::log::{LogPosition, LogReader};
use crate::processor::ProcessorStore;
use crate::queries::{Queries, ReadModelStore, SagaReadStore};
use crate::views::{ConversationView, Forgettable, TaskDetail, ToolCallView, TurnView};
use crate::AppError;

/// What a worker needs to work its turn, without another read. Its entities are shown
/// as every answer shows them: forgotten texts `null` (TRUST.md "Forgetting a person").
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimContext {
    /// The conversation, with its latest checkpoint.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<ConversationView>))]
    pub conversation: Option<Forgettable<ConversationView>>,
    /// The human message the turn answers (input `message`).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<MessageAdded>))]
    pub message: Option<Forgettable<MessageAdded>>,
    /// The `NEED_INFORMATION` checkpoint an auto-decide answers (input `auto_decide`).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<ConversationCheckpointCreated>))]
    pub checkpoint: Option<Forgettable<ConversationCheckpointCreated>>,
    /// The task of a task turn, with its status and history.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<TaskDetail>))]
    pub task: Option<Forgettable<TaskDetail>>,
    /// The turn's tool calls with their results (empty until it reports some): after a
    /// suspension, what the resumed turn continues from.
    pub tool_calls: Vec<ToolCallView>,
}

/// The context of claimed `turn`. The read model applies the log in order, so once it
/// shows what caused the turn (its message, the waited-on checkpoint, its task or the task
/// checkpoint that retried or resumed it) it shows everything before that too: the context
/// is read at once, and only when the cause is not there yet is it read again once the
/// read model has processed the claim (`position`, the claim's last rune).
///
/// # Errors
/// [`AppError`] from the read model, or [`AppError::ProjectionLagging`] when it does not
/// reach `position` in time.
pub async fn claim_context<R, G, P, L>(
    queries: &Queries<R, G, P, L>,
    turn: &TurnView,
    position: Option<LogPosition>,
) -> Result<ClaimContext, AppError>
where
    R: ReadModelStore,
    G: SagaReadStore,
    P: ProcessorStore,
    L: LogReader,
{
    let now = read_context(queries.at(None).await?, turn).await?;
    if now.shows_cause_of(&turn.input) {
        return Ok(now);
    }
    read_context(queries.at(position).await?, turn).await
}

async fn read_context(
    read: &impl ReadModelStore,
    turn: &TurnView,
) -> Result<ClaimContext, AppError> {
    let conversation = read.conversation(turn.conversation_id).await?;
    let (mut message, mut checkpoint, mut task) = (None, None, None);
    match &turn.input {
        TurnInput::Message { message_id } => {
            message = read.message(turn.conversation_id, *message_id).await?;
        }
        TurnInput::AutoDecide {
            checkpoint_id: Some(id),
        } => checkpoint = read.checkpoint(turn.conversation_id, *id).await?,
        TurnInput::AutoDecide {
            checkpoint_id: None,
        } => {}
        TurnInput::Task { task_id }
        | TurnInput::TaskRetry { task_id, .. }
        | TurnInput::TaskResume { task_id, .. } => task = read.task(*task_id).await?,
    }
    Ok(ClaimContext {
        conversation,
        message,
        checkpoint,
        task,
        tool_calls: turn.tool_calls.clone(),
    })
}

impl ClaimContext {
    /// Whether it holds what caused a turn of `input` (see [`claim_context`]): the
    /// conversation and the turn's cause. An auto-decide without a checkpoint names no
    /// cause, so only the read after the claim can show everything before it.
    pub fn shows_cause_of(&self, input: &TurnInput) -> bool {
        let has_task_checkpoint = |id: &Uuid| {
            self.task
                .as_ref()
                .is_some_and(|t| t.entity.checkpoints.iter().any(|c| c.checkpoint.id == *id))
        };
        self.conversation.is_some()
            && match input {
                TurnInput::Message { .. } => self.message.is_some(),
                TurnInput::AutoDecide {
                    checkpoint_id: Some(_),
                } => self.checkpoint.is_some(),
                TurnInput::AutoDecide {
                    checkpoint_id: None,
                } => false,
                TurnInput::Task { .. } => self.task.is_some(),
                TurnInput::TaskRetry {
                    task_checkpoint_id, ..
                }
                | TurnInput::TaskResume {
                    task_checkpoint_id, ..
                } => has_task_checkpoint(task_checkpoint_id),
            }
    }
}
