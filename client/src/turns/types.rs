//! The bodies and answers of the workers' calls: [`ClaimRequest`], [`ClaimedTurn`] with
//! its [`ClaimContext`], [`Heartbeat`], and the [`TurnFence`] a claim's writes carry.

use std::time::Duration;

use chrono::{DateTime, Utc};
use pm_api_types::views::{ConversationView, TaskDetail, ToolCallView, TurnView};
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use pm_domain::saga::TurnKind;
use reqwest::header::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::millis;
use crate::http::name;
use crate::Position;

/// What a claim may take and for how long: `POST /v1/turns/claim`'s body. Every field is
/// optional; the filters narrow the turns a claim may take.
///
/// ```
/// use std::time::Duration;
/// use pm_client::{ClaimRequest, TurnKind, Uuid};
///
/// let request = ClaimRequest::new()
///     .worker("llm-7")
///     .kind(TurnKind::Conversation)
///     .actor_id(Uuid::nil())
///     .wait(Duration::from_secs(10))
///     .lease(Duration::from_secs(30));
/// assert_eq!(request.wait, Some(Duration::from_secs(10)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimRequest {
    /// Only this agent's turns.
    pub agent_id: Option<Uuid>,
    /// Only turns of agents acting for this actor (e.g. your assistant's `ai` actor).
    pub actor_id: Option<Uuid>,
    /// Only this conversation's turns.
    pub conversation_id: Option<Uuid>,
    /// Only turns of this kind.
    pub kind: Option<TurnKind>,
    /// How long the service waits for a claimable turn before answering none (a
    /// long-poll; at most 30 s; `None`: answer at once).
    pub wait: Option<Duration>,
    /// The lease: how long the claim holds the turn without a heartbeat (1 s–10 min;
    /// `None`: the service's `PM_TURN_LEASE_MS`, 30 s by default).
    pub lease: Option<Duration>,
    /// A name for operators, shown on the turn's lease (1–200 characters; `None`: the
    /// caller's role).
    pub worker: Option<String>,
}

impl ClaimRequest {
    /// Any claimable turn, at once, with the service's lease.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only this agent's turns.
    #[must_use]
    pub fn agent_id(mut self, id: Uuid) -> Self {
        self.agent_id = Some(id);
        self
    }

    /// Only turns of agents acting for this actor.
    #[must_use]
    pub fn actor_id(mut self, id: Uuid) -> Self {
        self.actor_id = Some(id);
        self
    }

    /// Only this conversation's turns.
    #[must_use]
    pub fn conversation_id(mut self, id: Uuid) -> Self {
        self.conversation_id = Some(id);
        self
    }

    /// Only turns of this kind.
    #[must_use]
    pub fn kind(mut self, kind: TurnKind) -> Self {
        self.kind = Some(kind);
        self
    }

    /// Waits up to `wait` for a claimable turn (a long-poll).
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Holds the turn `lease` without a heartbeat.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The worker's name for operators.
    #[must_use]
    pub fn worker(mut self, name: impl Into<String>) -> Self {
        self.worker = Some(name.into());
        self
    }

    pub(crate) fn body(&self) -> ClaimBody<'_> {
        ClaimBody {
            agent_id: self.agent_id,
            actor_id: self.actor_id,
            conversation_id: self.conversation_id,
            kind: self.kind,
            wait_ms: self.wait.map(millis),
            lease_ms: self.lease.map(millis),
            worker: self.worker.as_deref(),
        }
    }
}

/// [`ClaimRequest`] on the wire.
#[derive(Serialize)]
pub(crate) struct ClaimBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    actor_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<TurnKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    worker: Option<&'a str>,
}

/// A claimed turn: the turn, the claim's epoch and lease, and what the worker needs to
/// work it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct ClaimedTurn {
    /// The turn, `streaming` under this claim (its `lease` is the claim's).
    pub turn: TurnView,
    /// The claim's epoch, one more than any before: what fences its writes.
    pub turn_epoch: i64,
    /// When the lease ends unless renewed ([`Client::heartbeat`](crate::Client::heartbeat)).
    #[serde(with = "pm_domain::time")]
    pub lease_expires_at: DateTime<Utc>,
    /// The worker's name as recorded.
    pub worker: String,
    /// What the worker needs, read once the read model had the claim.
    pub context: ClaimContext,
    /// The turn's span in the W3C trace of what caused it: send its `traceparent` (and
    /// `tracestate`) with the model's calls, so they join the trace of, say, the ingress
    /// request whose message the turn answers. `None` from a service that predates traces.
    #[serde(default)]
    pub trace_context: Option<TraceContext>,
    /// The log position of the claim's `turn.claimed` (`X-Event-Position`).
    #[serde(skip)]
    pub position: Option<Position>,
}

impl ClaimedTurn {
    /// The fence of this claim: its commands and reports carry it.
    pub fn fence(&self) -> TurnFence {
        TurnFence::new(self.turn.id, self.turn_epoch)
    }
}

/// A W3C trace context (<https://www.w3.org/TR/trace-context/>), as the headers of the
/// same names carry it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct TraceContext {
    /// `00-<trace-id>-<parent-id>-<trace-flags>`.
    pub traceparent: String,
    /// The vendors' `tracestate`, when the trace carries one.
    #[serde(default)]
    pub tracestate: Option<String>,
}

/// What a claimed turn is about, so a worker needs no other read to start.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct ClaimContext {
    /// The conversation, with its latest checkpoint.
    #[serde(default, deserialize_with = "forgettable")]
    pub conversation: Option<ConversationView>,
    /// The human message a `message` turn answers.
    #[serde(default, deserialize_with = "forgettable")]
    pub message: Option<MessageAdded>,
    /// The `NEED_INFORMATION` checkpoint an `auto_decide` turn answers.
    #[serde(default, deserialize_with = "forgettable")]
    pub checkpoint: Option<ConversationCheckpointCreated>,
    /// The task of a task turn, with its status and history.
    #[serde(default, deserialize_with = "forgettable")]
    pub task: Option<TaskDetail>,
    /// The turn's tool calls with their results, in the order it reported them: empty on
    /// a turn's first claim; on the claim of a turn that resumed after its calls
    /// finished, every call with its `result` — what the model asked for and what came
    /// back.
    #[serde(default)]
    pub tool_calls: Vec<ToolCallView>,
}

/// An entity of the context whose texts may have been forgotten (TRUST.md "Forgetting a
/// person": the service shows them `null` with `"forgotten": true`): each such text holds
/// [`pm_domain::personal::STAND_IN`], so a worker claiming a turn of a forgotten
/// conversation still reads its context — and hands its model no forgotten text.
fn forgettable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + pm_api_types::views::Personal,
{
    Ok(Option::<pm_api_types::views::Forgettable<T>>::deserialize(d)?.map(|f| f.entity))
}

impl ClaimContext {
    /// The turn's call `call_id`, if it reported one.
    pub fn tool_call(&self, call_id: &str) -> Option<&ToolCallView> {
        self.tool_calls.iter().find(|c| c.call_id == call_id)
    }
}

/// The answer of a heartbeat: the lease's new end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Heartbeat {
    /// The claim's epoch.
    pub turn_epoch: i64,
    /// When the lease now ends.
    #[serde(with = "pm_domain::time")]
    pub lease_expires_at: DateTime<Utc>,
}

/// A claim as its writes name it: the headers `PM-Turn-Id` and `PM-Turn-Epoch`. A write
/// carrying them is applied on behalf of that turn only while this claim holds it;
/// otherwise the service answers `409 turn_fenced` and writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TurnFence {
    /// The turn.
    pub turn_id: Uuid,
    /// The claim's epoch (positive).
    pub turn_epoch: i64,
}

impl TurnFence {
    /// The fence of the claim `turn_epoch` on `turn_id`.
    pub fn new(turn_id: Uuid, turn_epoch: i64) -> Self {
        Self {
            turn_id,
            turn_epoch,
        }
    }

    /// Puts the two headers in `headers`.
    pub(crate) fn apply(&self, headers: &mut HeaderMap) {
        headers.insert(name("pm-turn-id"), self.turn_id_header());
        headers.insert(name("pm-turn-epoch"), HeaderValue::from(self.turn_epoch));
    }

    fn turn_id_header(&self) -> HeaderValue {
        // A hyphenated UUID is always a valid header value.
        HeaderValue::from_str(&self.turn_id.to_string()).unwrap_or(HeaderValue::from_static(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_forgotten_message_in_a_claims_context_when_read_then_a_stand_in_not_an_error() {
        let context: ClaimContext = serde_json::from_value(serde_json::json!({
            "conversation": null,
            "message": {
                "id": Uuid::nil(), "conversation_id": Uuid::nil(), "actor_id": Uuid::nil(),
                "content": null, "external_identity": null, "forgotten": true,
                "time": "2026-11-28T10:00:00.000000Z"
            },
            "checkpoint": null,
            "task": null,
            "tool_calls": []
        }))
        .expect("a forgotten message reads");
        let message = context.message.expect("the message");
        assert_eq!(message.content.as_str(), pm_domain::personal::STAND_IN);
    }

    #[test]
    fn a_claim_request_sends_only_what_is_set_in_milliseconds() {
        let empty = serde_json::to_string(&ClaimRequest::new().body()).expect("json");
        assert_eq!(empty, "{}");
        let full = ClaimRequest::new()
            .kind(TurnKind::Task)
            .wait(Duration::from_millis(2500))
            .lease(Duration::from_secs(2))
            .worker("w-1");
        let json = serde_json::to_value(full.body()).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"kind": "task", "wait_ms": 2500, "lease_ms": 2000, "worker": "w-1"})
        );
    }

    #[test]
    fn a_fence_is_two_headers() {
        let fence = TurnFence::new(Uuid::nil(), 7);
        let mut headers = HeaderMap::new();
        fence.apply(&mut headers);
        assert_eq!(
            headers.get("pm-turn-id").and_then(|v| v.to_str().ok()),
            Some("00000000-0000-0000-0000-000000000000")
        );
        assert_eq!(
            headers.get("pm-turn-epoch").and_then(|v| v.to_str().ok()),
            Some("7")
        );
    }
}
