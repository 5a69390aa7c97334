//! Tool calls (WORKERS.md "Tools") as typed calls: a claimed turn reports a batch of calls
//! and suspends ([`Client::report_tool_calls`], or better
//! [`TurnHandle::report_tool_calls`](crate::TurnHandle::report_tool_calls)); approvers
//! approve or deny the calls that need it ([`Client::approve_tool_call`],
//! [`Client::deny_tool_call`], or the polling [`Approvals`]); executors report progress
//! and the one result of each executing call ([`Client::report_tool_progress`],
//! [`Client::report_tool_result`], or the polling [`Executor`]). Once every call of the
//! batch has its result the turn is claimable again, and the next claim's
//! [`ClaimContext::tool_calls`](crate::ClaimContext::tool_calls) carries every call with
//! its result.
//!
//! The per-call requests are keyed by the turn and the `call_id`, not fenced: the executor
//! and the approver are not the worker that claimed the turn.
//!
//! Retries (see [`RetryPolicy`](crate::RetryPolicy)) — none of these take an
//! `Idempotency-Key`; what a repeat after a lost answer does decides:
//!
//! | call | a retry after a lost answer | so it is retried |
//! |---|---|---|
//! | [`report_tool_calls`](Client::report_tool_calls) | the same batch again answers `200`, nothing written | yes |
//! | [`approve_tool_call`](Client::approve_tool_call), [`deny_tool_call`](Client::deny_tool_call) | answers `409 tool_call_not_awaiting_approval` | yes |
//! | [`report_tool_result`](Client::report_tool_result) | the same result again answers `200`, nothing written | yes |
//! | [`report_tool_progress`](Client::report_tool_progress) | would record the chunk twice | only when the connection failed |

mod approvals;
mod executor;

use std::time::Duration;

use pm_api_types::views::{ToolCallView, TurnView};
use pm_domain::saga::{ToolStatus, ToolStream};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

pub use approvals::Approvals;
pub use executor::{Executor, ExecutorBuilder, ToolRun};

use pm_domain::limits::{
    is_short_text, MAX_APPROVAL_COMMENT, MAX_CALL_ID, MAX_TOOL_CALLS, MAX_TOOL_PAYLOAD,
    MAX_TOOL_WAIT_MS,
};

use crate::http::{segment, Call, Retries};
use crate::turns::{checked, json, millis};
use crate::{Client, Controlled, Error, TurnFence};

/// The longest timeout or resume deadline the service takes (a day).
const MAX_WAIT: Duration = Duration::from_millis(MAX_TOOL_WAIT_MS);

/// One call of a batch a claimed turn reports: what the model asked to run.
///
/// ```
/// use std::time::Duration;
/// use pm_client::ToolCall;
///
/// let call = ToolCall::new("call-1", "shell", serde_json::json!({"cmd": "cargo test"}))
///     .requires_approval("runs a shell command")
///     .timeout(Duration::from_secs(120));
/// assert!(call.requires_approval);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The worker's id of the call (e.g. the model's tool-use id), 1–200 characters,
    /// unique within the turn: the per-call requests name it.
    pub call_id: String,
    /// The tool (1–1024 bytes).
    pub tool_name: String,
    /// Its arguments: any JSON, at most 64 KiB.
    pub arguments: Value,
    /// Whether a person must approve it before it runs; without, it starts `executing`.
    pub requires_approval: bool,
    /// Why the worker's policy asks a person (shown to approvers).
    pub policy_reason: Option<String>,
    /// How long it may execute once running (1 ms–1 day; `None`: the service's
    /// `PM_TOOL_TIMEOUT_SECS`). A call still running then ends with status `timeout`.
    pub timeout: Option<Duration>,
}

impl ToolCall {
    /// A call of `tool_name` with `arguments`, running without approval.
    pub fn new(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        arguments: impl Into<Value>,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            tool_name: tool_name.into(),
            arguments: arguments.into(),
            requires_approval: false,
            policy_reason: None,
            timeout: None,
        }
    }

    /// The call waits for a person's approval before it runs; `policy_reason` tells the
    /// approver why it was asked.
    #[must_use]
    pub fn requires_approval(mut self, policy_reason: impl Into<String>) -> Self {
        self.requires_approval = true;
        self.policy_reason = Some(policy_reason.into());
        self
    }

    /// The call may execute for at most `timeout`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// The calls a claimed turn reports at once (`POST /v1/turns/{id}/tool-calls`), 1–64 of
/// them, and how long the turn may wait for all of them.
///
/// ```
/// use std::time::Duration;
/// use pm_client::{ToolBatch, ToolCall};
///
/// let batch = ToolBatch::new()
///     .call(ToolCall::new("a", "search", serde_json::json!({"q": "rust"})))
///     .call(ToolCall::new("b", "shell", serde_json::json!({"cmd": "ls"})).requires_approval("shell"))
///     .resume_deadline(Duration::from_secs(600));
/// assert_eq!(batch.calls.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ToolBatch {
    /// The calls, in the model's order.
    pub calls: Vec<ToolCall>,
    /// L0 `resume_deadline` (1 ms–1 day from the report): every call still open then
    /// times out and the turn resumes. `None`: only the calls' own timeouts bound it.
    pub resume_deadline: Option<Duration>,
}

impl ToolBatch {
    /// An empty batch: add calls with [`call`](ToolBatch::call).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a call.
    #[must_use]
    pub fn call(mut self, call: ToolCall) -> Self {
        self.calls.push(call);
        self
    }

    /// Sets the batch's resume deadline.
    #[must_use]
    pub fn resume_deadline(mut self, deadline: Duration) -> Self {
        self.resume_deadline = Some(deadline);
        self
    }

    /// The batch on the wire, checked as the service checks it (so a bad batch fails here,
    /// naming the field, instead of costing a round trip and a `422`).
    fn body(&self) -> Result<BatchBody<'_>, Error> {
        if self.calls.is_empty() || self.calls.len() > MAX_TOOL_CALLS {
            return Err(Error::InvalidInput(format!(
                "calls: a batch holds 1 to {MAX_TOOL_CALLS} calls, not {}",
                self.calls.len()
            )));
        }
        let mut calls: Vec<CallBody<'_>> = Vec::with_capacity(self.calls.len());
        for (i, call) in self.calls.iter().enumerate() {
            let field = |name: &str| format!("calls[{i}].{name}");
            let id = call.call_id.as_str();
            if !is_short_text(id, MAX_CALL_ID) {
                return Err(Error::InvalidInput(format!(
                    "{}: {id:?} is not 1 to {MAX_CALL_ID} characters, not blank, without NUL",
                    field("call_id")
                )));
            }
            if calls.iter().any(|c| c.call_id == id) {
                return Err(Error::InvalidInput(format!(
                    "{}: {id:?} appears twice in the batch",
                    field("call_id")
                )));
            }
            let size = serde_json::to_vec(&call.arguments).map_or(0, |v| v.len());
            if size > MAX_TOOL_PAYLOAD {
                return Err(Error::InvalidInput(format!(
                    "{}: {size} bytes, at most 64 KiB",
                    field("arguments")
                )));
            }
            calls.push(CallBody {
                call_id: id,
                tool_name: checked(&field("tool_name"), &call.tool_name)?,
                arguments: &call.arguments,
                requires_approval: call.requires_approval,
                policy_reason: call
                    .policy_reason
                    .as_deref()
                    .map(|r| checked(&field("policy_reason"), r))
                    .transpose()?,
                timeout_ms: wait_ms(&field("timeout"), call.timeout)?,
            });
        }
        Ok(BatchBody {
            calls,
            resume_deadline_ms: wait_ms("resume_deadline", self.resume_deadline)?,
        })
    }
}

impl From<ToolCall> for ToolBatch {
    fn from(call: ToolCall) -> Self {
        Self::new().call(call)
    }
}

impl From<Vec<ToolCall>> for ToolBatch {
    fn from(calls: Vec<ToolCall>) -> Self {
        Self {
            calls,
            resume_deadline: None,
        }
    }
}

impl FromIterator<ToolCall> for ToolBatch {
    fn from_iter<I: IntoIterator<Item = ToolCall>>(calls: I) -> Self {
        calls.into_iter().collect::<Vec<_>>().into()
    }
}

/// A duration the service takes in milliseconds, 1 to a day.
fn wait_ms(what: &str, wait: Option<Duration>) -> Result<Option<u64>, Error> {
    match wait {
        Some(d) if d < Duration::from_millis(1) || d > MAX_WAIT => Err(Error::InvalidInput(
            format!("{what}: {d:?} is not between 1 ms and a day"),
        )),
        _ => Ok(wait.map(millis)),
    }
}

/// The one result an executor reports for an executing call
/// (`POST …/tool-calls/{call_id}/result`).
///
/// ```
/// use pm_client::{ToolResult, ToolStatus};
///
/// let ok = ToolResult::success(serde_json::json!({"passed": 12}));
/// assert_eq!(ok.status, ToolStatus::Success);
/// let failed: ToolResult = Err::<serde_json::Value, _>("exit status 2").into();
/// assert_eq!(failed.error.as_deref(), Some("exit status 2"));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolResult {
    /// `success`, `error` or `cancelled` (`timeout` and `denied` are the service's own).
    pub status: ToolStatus,
    /// The tool's answer: any JSON (the model reads it on the resumed turn).
    pub output: Option<Value>,
    /// What went wrong (cut to the 64 KiB the service keeps).
    pub error: Option<String>,
}

impl ToolResult {
    /// The tool ran; `output` is its answer.
    pub fn success(output: impl Into<Value>) -> Self {
        Self {
            status: ToolStatus::Success,
            output: Some(output.into()),
            error: None,
        }
    }

    /// The tool failed; `message` says how.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Error,
            output: None,
            error: Some(message.into()),
        }
    }

    /// The executor gave the call up before it finished (e.g. the tool's process was
    /// killed), with an optional why.
    pub fn cancelled(why: Option<String>) -> Self {
        Self {
            status: ToolStatus::Cancelled,
            output: None,
            error: why,
        }
    }

    /// Adds an output (e.g. what a failed tool printed before it failed).
    #[must_use]
    pub fn with_output(mut self, output: impl Into<Value>) -> Self {
        self.output = Some(output.into());
        self
    }

    fn body(&self) -> Result<ResultBody<'_>, Error> {
        if matches!(self.status, ToolStatus::Timeout | ToolStatus::Denied) {
            return Err(Error::InvalidInput(format!(
                "status {}: an executor reports success, error or cancelled",
                self.status
            )));
        }
        Ok(ResultBody {
            status: self.status,
            output: self.output.as_ref(),
            error: self.error.as_deref().map(clean),
        })
    }
}

/// `Ok(output)` is a success, `Err(e)` an error saying `e`.
impl<E: std::fmt::Display> From<Result<Value, E>> for ToolResult {
    fn from(result: Result<Value, E>) -> Self {
        match result {
            Ok(output) => Self::success(output),
            Err(e) => Self::error(e.to_string()),
        }
    }
}

/// Text as the service keeps it: at most 64 KiB (cut on a character boundary) and
/// without NUL (replaced with U+FFFD), so a tool's raw output never makes its report fail.
fn clean(text: &str) -> String {
    chunks(text).into_iter().next().unwrap_or_default()
}

/// `text` in pieces of at most 64 KiB, cut on character boundaries, NUL replaced with
/// U+FFFD; none for empty text.
fn chunks(text: &str) -> Vec<String> {
    let text = text.replace('\0', "\u{FFFD}");
    let mut pieces = Vec::new();
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let mut end = rest.len().min(MAX_TOOL_PAYLOAD);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        pieces.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    pieces
}

#[derive(Serialize)]
struct BatchBody<'a> {
    calls: Vec<CallBody<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resume_deadline_ms: Option<u64>,
}

#[derive(Serialize)]
struct CallBody<'a> {
    call_id: &'a str,
    tool_name: &'a str,
    arguments: &'a Value,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    requires_approval: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
}

/// What an approver adds to its decision (TRUST.md "Approvals"). Who decides is never
/// said: the service records the signed-in principal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApprovalNote {
    /// The `human` actor whose decision an ingress relays.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<Uuid>,
    /// Why, at most 1,000 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl ApprovalNote {
    /// A note relaying `person`'s decision.
    pub fn on_behalf_of(person: Uuid) -> Self {
        Self {
            on_behalf_of: Some(person),
            comment: None,
        }
    }

    /// The note with a comment.
    #[must_use]
    pub fn with_comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    fn checked(&self) -> Result<(), Error> {
        match &self.comment {
            Some(c) if !is_short_text(c, MAX_APPROVAL_COMMENT) => Err(Error::InvalidInput(
                format!("comment: must be 1 to {MAX_APPROVAL_COMMENT} characters, without NUL"),
            )),
            _ => Ok(()),
        }
    }
}

#[derive(Serialize)]
struct DenyBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(flatten)]
    note: &'a ApprovalNote,
}

#[derive(Serialize)]
struct ProgressBody<'a> {
    stream: ToolStream,
    chunk: &'a str,
}

#[derive(Serialize)]
struct ResultBody<'a> {
    status: ToolStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The calls of workers (llm, admin), approvers (admin, ingress) and executors (llm, admin)
/// on tool calls.
impl Client {
    /// `POST /v1/turns/{id}/tool-calls`, fenced by the claim: the turn waits for these
    /// calls (`tool_executing`, its agent's head `suspended`) and **the claim's lease
    /// ends** — stop renewing it; the turn is claimable again, under a higher epoch, once
    /// every call has its result. A worker with a [`TurnHandle`](crate::TurnHandle) calls
    /// [`TurnHandle::report_tool_calls`](crate::TurnHandle::report_tool_calls), which
    /// stops its heartbeat too.
    ///
    /// Answers the suspended turn with its calls; [`Controlled::position`] is `None` when
    /// the same batch had been reported already (nothing was written: a retry after a lost
    /// answer lands there).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a batch the service would refuse (no call or over 64, a
    /// `call_id` blank, over 200 characters or twice in the batch, arguments over 64 KiB, a
    /// timeout outside 1 ms–1 day); `409 turn_fenced` when the claim no longer holds the
    /// turn, `409 tool_call_exists` for a `call_id` the turn used for another call, `404
    /// turn_not_found`, and the [`Error`]s of any call.
    pub async fn report_tool_calls(
        &self,
        fence: TurnFence,
        batch: impl Into<ToolBatch>,
    ) -> Result<Controlled<TurnView>, Error> {
        let batch = batch.into();
        let call = self.report_call(fence, "tool-calls", &batch.body()?)?;
        self.controlled(call).await
    }

    /// `POST /v1/turns/{turn_id}/tool-calls/{call_id}/approve` (a principal the call's
    /// tool policy lists as an approver — by default admin, or an ingress relaying a
    /// person's decision): the call may run (`awaiting_approval → executing`). The service
    /// records the signed-in principal as the approver, with `note`.
    ///
    /// # Errors
    /// `409 tool_call_not_awaiting_approval` when the call does not wait for approval (it
    /// needs none, another approver decided, or it timed out; also when a retry finds the
    /// approval done), `404 turn_not_found` or `tool_call_not_found`, `403
    /// approver_forbidden` for a principal the policy does not list, `403
    /// self_approval_forbidden` for the principal that reported the call,
    /// [`Error::InvalidInput`] for a comment that is blank or over 1,000 characters, and
    /// the [`Error`]s of any call.
    pub async fn approve_tool_call(
        &self,
        turn_id: Uuid,
        call_id: &str,
        note: &ApprovalNote,
    ) -> Result<Controlled<ToolCallView>, Error> {
        note.checked()?;
        let body = json(note)?;
        let call = Call::post(call_path(turn_id, call_id, "approve"), Some(body));
        self.controlled(call).await
    }

    /// `POST /v1/turns/{turn_id}/tool-calls/{call_id}/deny` (an approver of the call, as
    /// for approving): the call will not run; it ends at once with the result `denied`
    /// carrying `reason` (default `denied`), which the model reads on the resumed turn.
    ///
    /// # Errors
    /// As [`approve_tool_call`](Client::approve_tool_call).
    pub async fn deny_tool_call(
        &self,
        turn_id: Uuid,
        call_id: &str,
        reason: Option<&str>,
        note: &ApprovalNote,
    ) -> Result<Controlled<ToolCallView>, Error> {
        let reason = reason.map(|r| checked("reason", r)).transpose()?;
        note.checked()?;
        let body = json(&DenyBody { reason, note })?;
        let call = Call::post(call_path(turn_id, call_id, "deny"), Some(body));
        self.controlled(call).await
    }

    /// `POST /v1/turns/{turn_id}/tool-calls/{call_id}/progress` (llm, admin): output of an
    /// executing call as it comes (`tool.progress`), for people and UIs following the
    /// turn. Text over 64 KiB goes in several chunks (cut on character boundaries, the
    /// answer is the last one's); NUL is sent as U+FFFD.
    ///
    /// Retried only when the connection failed: a repeat that reached the service would
    /// record the chunk twice.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty chunk (nothing sent); `409
    /// tool_call_not_executing` while the call awaits approval, `409
    /// tool_call_terminal` once it has its result (cancelled, timed out), `404
    /// turn_not_found` or `tool_call_not_found`, and the [`Error`]s of any call.
    pub async fn report_tool_progress(
        &self,
        turn_id: Uuid,
        call_id: &str,
        stream: ToolStream,
        chunk: &str,
    ) -> Result<Controlled<ToolCallView>, Error> {
        let pieces = chunks(chunk);
        let mut last = None;
        for piece in &pieces {
            let body = json(&ProgressBody {
                stream,
                chunk: piece,
            })?;
            let mut call = Call::post(call_path(turn_id, call_id, "progress"), Some(body));
            call.retries = Retries::Unsent;
            last = Some(self.controlled(call).await?);
        }
        last.ok_or_else(|| Error::InvalidInput("chunk: empty, nothing to report".into()))
    }

    /// `POST /v1/turns/{turn_id}/tool-calls/{call_id}/result` (llm, admin): the executing
    /// call's one result (INV-TOOL-TERMINAL). The same result again only acknowledges
    /// ([`Controlled::position`] `None`), so a retry after a lost answer is safe. The last
    /// result of a batch resumes its turn: it is claimable again.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a status `timeout` or `denied` (the service's own);
    /// `409 tool_call_terminal` when the call already has another result (it was
    /// cancelled, timed out, or another executor reported first), `409
    /// tool_call_not_executing` while it awaits approval, `404 turn_not_found` or
    /// `tool_call_not_found`, and the [`Error`]s of any call.
    pub async fn report_tool_result(
        &self,
        turn_id: Uuid,
        call_id: &str,
        result: &ToolResult,
    ) -> Result<Controlled<ToolCallView>, Error> {
        let body = json(&result.body()?)?;
        let call = Call::post(call_path(turn_id, call_id, "result"), Some(body));
        self.controlled(call).await
    }
}

/// `/v1/turns/{turn_id}/tool-calls/{call_id}/{what}`, the call id percent-encoded.
fn call_path(turn_id: Uuid, call_id: &str, what: &str) -> String {
    format!("/v1/turns/{turn_id}/tool-calls/{}/{what}", segment(call_id))
}

/// Whether `error` says the call is over for its executor: it has its result (cancelled,
/// timed out, reported by another), or it does not exist (any more).
pub(crate) fn is_call_over(error: &Error) -> bool {
    matches!(
        error.code(),
        Some(crate::codes::TOOL_CALL_TERMINAL)
            | Some(crate::codes::TOOL_CALL_NOT_EXECUTING)
            | Some(crate::codes::TOOL_CALL_NOT_FOUND)
            | Some(crate::codes::TURN_NOT_FOUND)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_checked_and_sent_as_the_service_takes_it() {
        let batch = ToolBatch::new()
            .call(ToolCall::new("a", "search", serde_json::json!({"q": 1})))
            .call(
                ToolCall::new("b", "shell", serde_json::json!("ls"))
                    .requires_approval("shell")
                    .timeout(Duration::from_secs(2)),
            )
            .resume_deadline(Duration::from_secs(60));
        let wire = serde_json::to_value(batch.body().expect("valid")).expect("json");
        assert_eq!(
            wire,
            serde_json::json!({"calls": [
                {"call_id": "a", "tool_name": "search", "arguments": {"q": 1}},
                {"call_id": "b", "tool_name": "shell", "arguments": "ls", "requires_approval": true,
                 "policy_reason": "shell", "timeout_ms": 2000}
            ], "resume_deadline_ms": 60000})
        );
        let bad = [
            ToolBatch::new(),
            ToolCall::new(" ", "t", Value::Null).into(),
            ToolCall::new("x".repeat(201), "t", Value::Null).into(),
            vec![
                ToolCall::new("a", "t", Value::Null),
                ToolCall::new("a", "u", Value::Null),
            ]
            .into(),
            ToolCall::new("a", "", Value::Null).into(),
            ToolCall::new("a", "t", Value::String("x".repeat(70_000))).into(),
            ToolCall::new("a", "t", Value::Null)
                .timeout(Duration::ZERO)
                .into(),
            ToolBatch::from(ToolCall::new("a", "t", Value::Null))
                .resume_deadline(Duration::from_secs(86_401)),
            (0..65)
                .map(|i| ToolCall::new(i.to_string(), "t", Value::Null))
                .collect(),
        ];
        for batch in bad {
            assert!(
                matches!(batch.body(), Err(Error::InvalidInput(_))),
                "{batch:?}"
            );
        }
    }

    #[test]
    fn results_refuse_the_services_statuses_and_keep_text_sendable() {
        let mut r = ToolResult::success(1);
        r.status = ToolStatus::Timeout;
        assert!(r.body().is_err());
        let failed = ToolResult::error(format!("a\0b{}", "é".repeat(40_000)));
        let body = failed.body().expect("valid");
        let error = body.error.expect("an error");
        assert!(error.len() <= MAX_TOOL_PAYLOAD && error.starts_with("a\u{FFFD}b"));
        let wire = serde_json::to_value(ToolResult::cancelled(None).body().expect("ok"));
        assert_eq!(
            wire.expect("json"),
            serde_json::json!({"status": "cancelled"})
        );
    }

    #[test]
    fn long_output_goes_in_chunks_on_character_boundaries() {
        assert!(chunks("").is_empty());
        let text = "é".repeat(50_000); // 100 000 bytes
        let pieces = chunks(&text);
        assert_eq!(pieces.len(), 2);
        assert!(pieces.iter().all(|p| p.len() <= MAX_TOOL_PAYLOAD));
        assert_eq!(pieces.concat(), text);
        assert_eq!(
            call_path(Uuid::nil(), "a/b", "result"),
            "/v1/turns/00000000-0000-0000-0000-000000000000/tool-calls/a%2Fb/result"
        );
    }
}
