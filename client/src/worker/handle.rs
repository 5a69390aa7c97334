//! [`TurnHandle`]: a claimed turn in a worker's hands — what it is about, the commands
//! fenced by the claim, and the ways to end the claim.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use pm_api_types::commands::{
    AddMessageInput, CreateConversationCheckpointInput, CreateTaskCheckpointInput, CreateTaskInput,
};
use pm_api_types::views::{ToolCallView, TurnView};
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use uuid::Uuid;

use super::lease::Lease;
use crate::{
    ClaimContext, ClaimedTurn, Client, CommandRequest, Controlled, Error, ToolBatch, TurnFence,
};

/// A turn this worker holds, from [`Worker::next`](crate::Worker::next).
///
/// While the handle lives, a background task renews the claim's lease every third of its
/// length. The commands it offers carry the claim's fence (`PM-Turn-Id`, `PM-Turn-Epoch`)
/// and an `Idempotency-Key` like every command, so the service applies them on behalf of
/// this turn only while the claim holds it. Once the service has answered `409
/// turn_fenced` — to a heartbeat or a command: the lease expired, a newer claim or an
/// operator took the turn — the claim is lost, the heartbeat stops and the commands fail
/// at once with that error: the worker should drop the turn and go on to the next.
///
/// End it with the command that completes the turn (a conversation checkpoint; a task's
/// `WORK_COMPLETED` or `WORK_PAUSED`) followed by [`finish`](TurnHandle::finish), or with
/// [`release`](TurnHandle::release) or [`report_error`](TurnHandle::report_error) — or
/// hand it over to tool calls with [`report_tool_calls`](TurnHandle::report_tool_calls):
/// it comes back under a new claim once they have their results. Dropping an unfinished handle releases the turn in the background (best effort: if
/// that fails, the lease expires), so another worker gets it at once.
#[derive(Debug)]
pub struct TurnHandle {
    claim: ClaimedTurn,
    lease: Arc<Lease>,
}

impl TurnHandle {
    pub(crate) fn new(claim: ClaimedTurn, lease: Arc<Lease>) -> Self {
        Self { claim, lease }
    }

    /// The turn as claimed.
    pub fn turn(&self) -> &TurnView {
        &self.claim.turn
    }

    /// What the turn is about: its conversation, message, checkpoint or task.
    pub fn context(&self) -> &ClaimContext {
        &self.claim.context
    }

    /// The claim as the service answered it.
    pub fn claim(&self) -> &ClaimedTurn {
        &self.claim
    }

    /// The claim's fence.
    pub fn fence(&self) -> TurnFence {
        self.lease.fence
    }

    /// The claim's epoch.
    pub fn epoch(&self) -> i64 {
        self.lease.fence.turn_epoch
    }

    /// When the lease ends unless renewed, as of the last heartbeat.
    pub fn lease_expires_at(&self) -> DateTime<Utc> {
        self.lease.expires_at()
    }

    /// Whether the service fenced the claim off (its commands fail with `turn_fenced`).
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// `Ok` while the claim holds the turn as far as this worker knows; else the
    /// `turn_fenced` error its commands get. Check it between long steps (an LLM call) to
    /// stop working a turn that is no longer yours.
    ///
    /// # Errors
    /// `409 turn_fenced` when the claim was lost or ended.
    pub fn check(&self) -> Result<(), Error> {
        self.lease.check()
    }

    /// Resolves once the claim no longer holds the turn — the service fenced it off, or
    /// this worker ended it (a [`Worker::shutdown`](crate::Worker::shutdown) released it) —
    /// with the `turn_fenced` error its commands now get. Race it against a long step (the
    /// model's call) to stop working a turn that is gone:
    ///
    /// ```no_run
    /// # async fn run(turn: pm_client::TurnHandle, model: impl std::future::Future<Output = String>) -> Result<(), pm_client::Error> {
    /// let answer = tokio::select! {
    ///     answer = model => answer,
    ///     gone = turn.ended() => return Err(gone),
    /// };
    /// # Ok(()) }
    /// ```
    pub async fn ended(&self) -> Error {
        self.lease.over().await
    }

    /// The worker's client, for calls outside the claim (reads, unfenced commands).
    pub fn client(&self) -> &Client {
        &self.lease.client
    }

    /// A command fenced by the claim, guarded by the handle and in the turn's span.
    fn fenced<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        request: CommandRequest<T>,
    ) -> CommandRequest<T> {
        let request = request.fenced(self.lease.fence).guarded(self.lease.clone());
        match &self.claim.trace_context {
            Some(trace) => request.traced(trace),
            None => request,
        }
    }

    /// `POST /v1/conversations/{id}/messages` in the turn's conversation, fenced by the
    /// claim (e.g. the AI's answer, as the turn's `ai` actor).
    pub fn add_message(&self, input: AddMessageInput) -> CommandRequest<MessageAdded> {
        let conversation = self.claim.turn.conversation_id;
        self.fenced(self.lease.client.add_message(conversation, input))
    }

    /// `POST /v1/conversations/{id}/checkpoints` in the turn's conversation, fenced by the
    /// claim: completes a conversation turn.
    pub fn create_conversation_checkpoint(
        &self,
        input: CreateConversationCheckpointInput,
    ) -> CommandRequest<ConversationCheckpointCreated> {
        let conversation = self.claim.turn.conversation_id;
        self.fenced(
            self.lease
                .client
                .create_conversation_checkpoint(conversation, input),
        )
    }

    /// `POST /v1/conversations/{id}/tasks` in the turn's conversation, fenced by the claim.
    pub fn create_task(&self, input: CreateTaskInput) -> CommandRequest<TaskCreated> {
        let conversation = self.claim.turn.conversation_id;
        self.fenced(self.lease.client.create_task(conversation, input))
    }

    /// `POST /v1/tasks/{id}/checkpoints`, fenced by the claim: `WORK_COMPLETED` or
    /// `WORK_PAUSED` on a task turn's task completes the turn.
    pub fn create_task_checkpoint(
        &self,
        task_id: Uuid,
        input: CreateTaskCheckpointInput,
    ) -> CommandRequest<TaskCheckpointCreated> {
        self.fenced(self.lease.client.create_task_checkpoint(task_id, input))
    }

    /// Reports tokens spent on the turn ([`Client::report_usage`]: added up, so retried
    /// only when the connection failed).
    ///
    /// # Errors
    /// `409 turn_fenced` when the claim was lost or ended, and the [`Error`]s of any call.
    pub async fn report_usage(
        &self,
        input_tokens: u64,
        output_tokens: u64,
    ) -> Result<Controlled<TurnView>, Error> {
        self.lease.check()?;
        let answer = self
            .lease
            .client
            .report_usage(self.lease.fence, input_tokens, output_tokens)
            .await;
        if let Err(e) = &answer {
            self.lease.observe(e);
        }
        answer
    }

    /// The turn's tool calls as the claim found them: none on its first claim; on the
    /// claim of a turn that resumed after its tool calls, every call with its `result`
    /// (`success` with the tool's output, `error`, `timeout`, `cancelled`, or `denied`
    /// with the approver's reason) — what the model needs to go on.
    pub fn tool_calls(&self) -> &[ToolCallView] {
        &self.claim.context.tool_calls
    }

    /// Hands the turn over to tool calls ([`Client::report_tool_calls`], fenced by the
    /// claim): the turn waits for the calls (`tool_executing`) and **the claim ends** —
    /// the heartbeat stops, nothing is released, and the handle's later commands fail at
    /// once with `turn_fenced` (as after [`finish`](TurnHandle::finish)). Once every call
    /// has its result (approved and executed, denied, timed out), the turn is claimable
    /// again: some worker's [`next`](crate::Worker::next) gets it under a higher epoch,
    /// with the calls and their results in [`tool_calls`](TurnHandle::tool_calls). Drop
    /// the handle (or call `finish`) and go on to other work meanwhile.
    ///
    /// A failed report leaves the claim held (its heartbeat running again) unless the
    /// service said the claim is gone, so the worker may report the error, release the
    /// turn or try again.
    ///
    /// ```no_run
    /// # async fn run(turn: pm_client::TurnHandle) -> Result<(), pm_client::Error> {
    /// use pm_client::{ToolCall, ToolStatus};
    ///
    /// if turn.tool_calls().is_empty() {
    ///     // The model wants to run a command: ask for approval, wait for the result.
    ///     let call = ToolCall::new("call-1", "shell", serde_json::json!({"cmd": "cargo test"}))
    ///         .requires_approval("runs a shell command");
    ///     turn.report_tool_calls(call).await?;
    ///     return Ok(()); // the turn comes back through Worker::next once it has its result
    /// }
    /// let passed = turn.tool_calls().iter().all(|c| {
    ///     c.result.as_ref().is_some_and(|r| r.status == ToolStatus::Success)
    /// });
    /// // … let the model answer with what the tools said, complete the turn …
    /// # let _ = passed; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a batch the service would refuse (nothing sent), `409
    /// turn_fenced` when the claim was lost or ended, `409 tool_call_exists` for a
    /// `call_id` the turn used for another call, and the [`Error`]s of any call.
    pub async fn report_tool_calls(
        &self,
        batch: impl Into<ToolBatch>,
    ) -> Result<Controlled<TurnView>, Error> {
        self.lease.check()?;
        self.lease.stop_heartbeat();
        let answer = self
            .lease
            .client
            .report_tool_calls(self.lease.fence, batch)
            .await;
        match &answer {
            Ok(_) => {
                self.lease.end("reported tool calls on");
            }
            Err(e) => {
                self.lease.observe(e);
                if self.lease.is_held() {
                    self.lease.start_heartbeat();
                }
            }
        }
        answer
    }

    /// The turn is done with (its completing command answered): stops the heartbeat
    /// without releasing anything.
    pub fn finish(self) {
        self.lease.end("finished");
    }

    /// Gives the turn back (`turn.released`, with `reason` or `released`): another worker
    /// may claim it at once, under a higher epoch.
    ///
    /// # Errors
    /// `409 turn_fenced` when the claim was lost or ended (the turn is not this worker's to
    /// give), and the [`Error`]s of any call (then the lease expires instead).
    pub async fn release(self, reason: Option<&str>) -> Result<Controlled<TurnView>, Error> {
        self.lease.take("released")?;
        self.lease.client.release(self.lease.fence, reason).await
    }

    /// Ends the turn in `turn.error` ([`Client::report_error`]): for a turn that cannot be
    /// worked (the model failed for good). It counts toward the session's error threshold.
    ///
    /// # Errors
    /// `409 turn_fenced` when the claim was lost or ended, and the [`Error`]s of any call.
    pub async fn report_error(
        self,
        error_type: &str,
        message: &str,
    ) -> Result<Controlled<TurnView>, Error> {
        self.lease.take("reported an error on")?;
        self.lease
            .client
            .report_error(self.lease.fence, error_type, message)
            .await
    }
}

impl Drop for TurnHandle {
    /// An unfinished handle releases its turn (in the background, best effort).
    fn drop(&mut self) {
        self.lease
            .release_in_background("dropped", "handle_dropped");
    }
}
