//! [`Approvals`]: what an approver (admin, or an ingress relaying a person's decision)
//! needs — the calls waiting for a decision, as they come, and the decision itself.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use pm_api_types::views::ToolCallView;
use pm_domain::saga::ToolCallState;
use uuid::Uuid;

use crate::codes::TOOL_CALL_NOT_AWAITING_APPROVAL;
use crate::retry::jitter;
use crate::{ApprovalNote, Client, Error, ToolCallQuery};

/// The tool calls waiting for a person's approval (`GET /v1/tool-calls?state=
/// awaiting_approval`), and their approval or denial.
///
/// Why a type for it: an approver polls, must not be shown a call twice while it decides,
/// and must expect to lose races — another approver, or the approval timeout
/// (`PM_TOOL_APPROVAL_TIMEOUT_SECS`), may decide first. [`approve`](Approvals::approve)
/// and [`deny`](Approvals::deny) answer `None` then instead of an error.
///
/// ```no_run
/// # async fn run(client: pm_client::Client) -> Result<(), pm_client::Error> {
/// use futures::TryStreamExt;
/// use pm_client::ApprovalNote;
///
/// let approvals = client.approvals();
/// let mut waiting = approvals.follow();
/// while let Some(call) = waiting.try_next().await? {
///     let decided = if call.tool_name == "shell" && call.arguments.to_string().contains("rm -rf") {
///         approvals.deny(&call, Some("destructive command"), &ApprovalNote::default()).await?
///     } else {
///         approvals.approve(&call, &ApprovalNote::default()).await?
///     };
///     if decided.is_none() {
///         println!("{} was decided elsewhere (or timed out)", call.call_id);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Approvals {
    client: Client,
    query: ToolCallQuery,
    interval: Duration,
}

impl Client {
    /// The approver's calls: tool calls waiting for approval, and their decisions.
    pub fn approvals(&self) -> Approvals {
        Approvals {
            client: self.clone(),
            query: ToolCallQuery::new()
                .state(ToolCallState::AwaitingApproval)
                .limit(500),
            interval: Duration::from_millis(500),
        }
    }
}

impl Approvals {
    /// Only calls of this conversation's turns.
    #[must_use]
    pub fn conversation_id(mut self, id: Uuid) -> Self {
        self.query = self.query.conversation_id(id);
        self
    }

    /// Only calls of this turn.
    #[must_use]
    pub fn turn_id(mut self, id: Uuid) -> Self {
        self.query = self.query.turn_id(id);
        self
    }

    /// How often [`follow`](Approvals::follow) looks for new calls (default 500 ms).
    #[must_use]
    pub fn interval(mut self, every: Duration) -> Self {
        self.interval = every.max(Duration::from_millis(10));
        self
    }

    /// Every call waiting for approval now, oldest first (all pages).
    ///
    /// # Errors
    /// The [`Error`]s of any call.
    pub async fn pending(&self) -> Result<Vec<ToolCallView>, Error> {
        self.client
            .read()
            .walk(self.query.clone())
            .try_collect()
            .await
    }

    /// Each call waiting for approval, once, as it appears (oldest first), polling every
    /// [`interval`](Approvals::interval); endless until dropped.
    ///
    /// A call is yielded once while it waits, whether or not it is decided then: a call
    /// left undecided is not shown again (it times out after
    /// `PM_TOOL_APPROVAL_TIMEOUT_SECS`). Failures worth waiting out (the service
    /// unreachable or unavailable) are retried with the client's backoff; others end the
    /// stream with the error.
    pub fn follow(
        &self,
    ) -> impl Stream<Item = Result<ToolCallView, Error>> + Send + Unpin + 'static {
        let state = Follow {
            approvals: self.clone(),
            shown: HashSet::new(),
            ready: VecDeque::new(),
            polled: false,
            failures: 0,
            failed: false,
        };
        futures::stream::unfold(state, |mut state| async move {
            let item = state.next().await?;
            Some((item, state))
        })
        .boxed()
    }

    /// Approves `call` (`POST …/approve`) as the signed-in principal, with `note`: it
    /// may run now. `None` when it no longer waits for approval (another approver decided,
    /// or its approval timed out): read it to see how it ended.
    ///
    /// # Errors
    /// As [`Client::approve_tool_call`], `tool_call_not_awaiting_approval` aside.
    pub async fn approve(
        &self,
        call: &ToolCallView,
        note: &ApprovalNote,
    ) -> Result<Option<ToolCallView>, Error> {
        decided(
            self.client
                .approve_tool_call(call.turn_id, &call.call_id, note)
                .await,
        )
    }

    /// Denies `call` (`POST …/deny`) with `reason` (default `denied`): it ends with the
    /// result `denied`, which the model reads on the resumed turn. `None` when it no longer
    /// waits for approval.
    ///
    /// # Errors
    /// As [`Client::deny_tool_call`], `tool_call_not_awaiting_approval` aside.
    pub async fn deny(
        &self,
        call: &ToolCallView,
        reason: Option<&str>,
        note: &ApprovalNote,
    ) -> Result<Option<ToolCallView>, Error> {
        decided(
            self.client
                .deny_tool_call(call.turn_id, &call.call_id, reason, note)
                .await,
        )
    }
}

/// A decision's answer; `None` for a call that no longer awaits one.
fn decided(
    answer: Result<crate::Controlled<ToolCallView>, Error>,
) -> Result<Option<ToolCallView>, Error> {
    match answer {
        Ok(c) => Ok(Some(c.view)),
        Err(e) if e.code() == Some(TOOL_CALL_NOT_AWAITING_APPROVAL) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The state of [`Approvals::follow`].
struct Follow {
    approvals: Approvals,
    /// The calls yielded that still wait (forgotten once they no longer do).
    shown: HashSet<(Uuid, String)>,
    /// Calls found and not yet yielded.
    ready: VecDeque<ToolCallView>,
    /// Whether a poll was made (the first is made at once).
    polled: bool,
    /// Consecutive failed polls.
    failures: u32,
    /// A failure ended the stream.
    failed: bool,
}

impl Follow {
    async fn next(&mut self) -> Option<Result<ToolCallView, Error>> {
        if self.failed {
            return None;
        }
        loop {
            if let Some(call) = self.ready.pop_front() {
                self.shown.insert((call.turn_id, call.call_id.clone()));
                return Some(Ok(call));
            }
            if self.polled {
                let delay = if self.failures == 0 {
                    self.approvals.interval
                } else {
                    let retry = &self.approvals.client.inner.retry;
                    retry.backoff(self.failures, jitter())
                };
                tokio::time::sleep(delay).await;
            }
            self.polled = true;
            match self.approvals.pending().await {
                Ok(calls) => {
                    self.failures = 0;
                    let waiting: HashSet<(Uuid, String)> = calls
                        .iter()
                        .map(|c| (c.turn_id, c.call_id.clone()))
                        .collect();
                    self.shown.retain(|k| waiting.contains(k));
                    self.ready = calls
                        .into_iter()
                        .filter(|c| !self.shown.contains(&(c.turn_id, c.call_id.clone())))
                        .collect();
                }
                Err(e) if e.is_retryable() => {
                    self.failures += 1;
                    tracing::warn!(error = %e, "looking for tool calls to approve failed; trying again");
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
