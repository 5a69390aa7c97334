//! The spans the service exports over OTLP (issue 34), as data: what each is named, when
//! it starts and ends, and what it carries — per the OpenTelemetry semantic conventions
//! [`SEMCONV`] (HTTP for requests, GenAI for agents and tools). The exporter turns them
//! into OTLP; nothing here does I/O.
//!
//! A turn and each of its tool calls are spans derived from the durable state once they
//! ended, never held in memory while they run: a turn that outlives a process (claimed
//! before a restart, ended after) is one span, exported once, by whichever replica
//! follows the log then.
//!
//! - `invoke_agent` (the turn): from its dispatch to its terminal rune, a child of the span
//!   that caused it (the request whose fact the sagas turned into the turn), with its
//!   claims, usage and outcome.
//! - `execute_tool {tool}` (a tool call): from its report to its result, a child of its
//!   turn's span, with the approval wait and the result's status.
//!
//! Commands are spans of the request that ran them ([`command`]), handed to a
//! [`SpanSink`] as they end.

use chrono::{DateTime, Utc};
use pm_domain::saga::rune::{
    TOOL_APPROVAL_REQUESTED, TOOL_APPROVED, TOOL_CALL, TOOL_DENIED, TOOL_RESULT, TURN_ERROR,
};
use serde_json::Value;
use uuid::Uuid;

use super::TraceContext;
use crate::log::LoggedEvent;
use crate::views::TurnView;

/// The semantic conventions' version the spans follow (its schema URL is
/// `https://opentelemetry.io/schemas/<version>`).
pub const SEMCONV: &str = "1.38.0";

/// A span's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A request the service answered.
    Server,
    /// Work within the service (a turn, a tool call).
    Internal,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    /// A string.
    Text(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

/// A finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    /// The span: its trace, its id, the trace's flags and state.
    pub context: TraceContext,
    /// Its parent's span id (16 hex digits) in the same trace; `None` for a root.
    pub parent_span_id: Option<String>,
    /// Whether the parent is another process's span (a caller's).
    pub parent_is_remote: bool,
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: SpanKind,
    /// When it started.
    pub start: DateTime<Utc>,
    /// When it ended (never before it started).
    pub end: DateTime<Utc>,
    /// What it carries.
    pub attributes: Vec<(&'static str, Attribute)>,
    /// Points in it: a name and a time.
    pub events: Vec<(&'static str, DateTime<Utc>)>,
    /// Why it failed, when it did (the span's status is an error then).
    pub error: Option<String>,
}

fn text(value: impl Into<String>) -> Attribute {
    Attribute::Text(value.into())
}

/// Where finished spans go (the exporter's queue): it never blocks, and drops rather than
/// wait.
pub trait SpanSink: Send + Sync + 'static {
    /// Takes a finished span.
    fn finished(&self, span: SpanRecord);
}

/// What a request's span says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpRequest<'a> {
    /// `GET`, `POST`, …
    pub method: &'a str,
    /// The path asked for.
    pub path: &'a str,
    /// The route it matched (`/v1/conversations/{id}/messages`), if any.
    pub route: Option<&'a str>,
    /// The answer's status.
    pub status: u16,
    /// Who was signed in, when someone was.
    pub principal: Option<&'a str>,
}

/// A request's `SERVER` span (HTTP semantic conventions): `<METHOD> <route>` — `<METHOD>`
/// alone when no route matched —, `context` its span and `parent` the caller's span id
/// (`None`: the request started the trace); an error on a `5xx`.
pub fn request(
    context: TraceContext,
    parent: Option<String>,
    http: &HttpRequest<'_>,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
) -> SpanRecord {
    let mut attributes = vec![
        ("http.request.method", text(http.method)),
        ("url.path", text(http.path)),
        ("http.response.status_code", int(http.status)),
    ];
    if let Some(route) = http.route {
        attributes.push(("http.route", text(route)));
    }
    if let Some(principal) = http.principal {
        attributes.push(("pm.principal", text(principal)));
    }
    let error = (http.status >= 500).then(|| http.status.to_string());
    if let Some(error) = &error {
        attributes.push(("error.type", text(error.as_str())));
    }
    SpanRecord {
        context,
        parent_is_remote: parent.is_some(),
        parent_span_id: parent,
        name: http.route.map_or_else(
            || http.method.to_string(),
            |route| format!("{} {route}", http.method),
        ),
        kind: SpanKind::Server,
        start,
        end: end.max(start),
        attributes,
        events: Vec::new(),
        error,
    }
}

/// A command's span: `command <aggregate type>`, a child of the request's span `parent`,
/// from `start` to `end`, with what it did (`outcome`: `created`, `existing`) or why it
/// did not (`error`: its message; `refused` when a rule said no).
pub fn command(
    aggregate_type: &'static str,
    aggregate_id: Uuid,
    parent: &TraceContext,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
    outcome: Result<&'static str, (&'static str, String)>,
) -> SpanRecord {
    let mut attributes = vec![
        ("pm.aggregate.type", text(aggregate_type)),
        ("pm.aggregate.id", text(aggregate_id.to_string())),
    ];
    let error = match outcome {
        Ok(done) => {
            attributes.push(("pm.command.outcome", text(done)));
            None
        }
        Err((failed, message)) => {
            attributes.push(("pm.command.outcome", text(failed)));
            attributes.push(("error.type", text(failed)));
            Some(message)
        }
    };
    SpanRecord {
        context: parent.child(),
        parent_span_id: Some(parent.span_id().to_string()),
        parent_is_remote: false,
        name: format!("command {aggregate_type}"),
        kind: SpanKind::Internal,
        start,
        end: end.max(start),
        attributes,
        events: Vec::new(),
        error,
    }
}

/// The sagas' decision on fact `fact` of conversation `conversation`: `saga <fact type>`,
/// a child of the span that wrote the fact, over the batch of `batch` events that decided
/// it and committed what it decided, from `start` to `end` (its start after the fact's
/// request ended is the sagas' lag). `None` for a fact that recorded no trace.
pub fn saga_decision(
    fact: &LoggedEvent,
    conversation: Uuid,
    batch: usize,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
) -> Option<SpanRecord> {
    let parent = fact.meta().trace()?;
    Some(SpanRecord {
        context: parent.child(),
        parent_span_id: Some(parent.span_id().to_string()),
        parent_is_remote: false,
        name: format!("saga {}", fact.event_type),
        kind: SpanKind::Internal,
        start,
        end: end.max(start),
        attributes: vec![
            ("pm.conversation.id", text(conversation.to_string())),
            ("pm.event.position", text(fact.position.to_string())),
            ("pm.saga.batch_events", int(batch)),
        ],
        events: Vec::new(),
        error: None,
    })
}

/// Saturates: token counts and waits beyond `i64` cannot happen, and must not fail.
fn int(value: impl TryInto<i64>) -> Attribute {
    Attribute::Int(value.try_into().unwrap_or(i64::MAX))
}

/// Turn `turn`'s `invoke_agent` span, `cause` the trace context of what caused it (its
/// first rune's), ended at `ended_at` (its terminal rune's time).
pub fn invoke_agent(turn: &TurnView, cause: &TraceContext, ended_at: DateTime<Utc>) -> SpanRecord {
    let outcome = turn.terminal_rune.clone().unwrap_or_default();
    let mut attributes = vec![
        ("gen_ai.operation.name", text("invoke_agent")),
        ("gen_ai.agent.id", text(turn.agent_id.to_string())),
        (
            "gen_ai.conversation.id",
            text(turn.conversation_id.to_string()),
        ),
        ("gen_ai.usage.input_tokens", int(turn.input_tokens)),
        ("gen_ai.usage.output_tokens", int(turn.output_tokens)),
        ("pm.turn.id", text(turn.id.to_string())),
        ("pm.turn.kind", text(turn.kind.as_str())),
        ("pm.turn.claims", int(turn.claims)),
        ("pm.turn.outcome", text(outcome.as_str())),
        ("pm.turn.tool_calls", int(turn.tool_calls.len())),
    ];
    if let Some(task) = turn.task_id {
        attributes.push(("pm.task.id", text(task.to_string())));
    }
    if let Some(reason) = &turn.deliverable_reason {
        attributes.push(("pm.turn.deliverable_reason", text(reason.as_str())));
    }
    let error = (outcome == TURN_ERROR).then(|| {
        turn.deliverable_reason
            .clone()
            .unwrap_or_else(|| outcome.clone())
    });
    if let Some(error) = &error {
        attributes.push(("error.type", text(error.as_str())));
    }
    SpanRecord {
        context: cause.of_turn(turn.id),
        parent_span_id: Some(cause.span_id().to_string()),
        parent_is_remote: false,
        name: "invoke_agent".into(),
        kind: SpanKind::Internal,
        start: turn.created_at,
        end: ended_at.max(turn.created_at),
        attributes,
        events: Vec::new(),
        error,
    }
}

/// What a tool call's runes say about it, read from its stream (`tool_call` aggregate).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallHistory {
    /// Its turn.
    pub turn_id: Uuid,
    /// The worker's id of the call.
    pub call_id: String,
    /// The tool.
    pub tool_name: String,
    /// When it was reported (`tool.call`).
    pub called_at: DateTime<Utc>,
    /// When a person was asked (`tool.approval_requested`).
    pub approval_requested_at: Option<DateTime<Utc>>,
    /// `approved` or `denied`, by whom and when.
    pub decision: Option<(&'static str, String, DateTime<Utc>)>,
    /// Its result's status and time (`tool.result`).
    pub result: Option<(String, DateTime<Utc>)>,
}

impl ToolCallHistory {
    /// The runes it is read from (a call's `tool.progress` chunks are not).
    pub const RUNES: &'static [&'static str] = &[
        TOOL_CALL,
        TOOL_APPROVAL_REQUESTED,
        TOOL_APPROVED,
        TOOL_DENIED,
        TOOL_RESULT,
    ];

    /// The history in `runes` (one call's stream, in order); `None` when they hold no
    /// `tool.call` or a rune has no time.
    pub fn of(runes: &[LoggedEvent]) -> Option<Self> {
        let mut history: Option<Self> = None;
        for rune in runes {
            let at = rune.recorded_at()?;
            let field = |name: &str| rune.payload.get(name).and_then(Value::as_str);
            match rune.event_type.as_str() {
                TOOL_CALL => {
                    history = Some(Self {
                        turn_id: field("turn_id").and_then(|t| Uuid::parse_str(t).ok())?,
                        call_id: field("call_id")?.to_string(),
                        tool_name: field("tool_name").unwrap_or_default().to_string(),
                        called_at: at,
                        approval_requested_at: None,
                        decision: None,
                        result: None,
                    });
                }
                TOOL_APPROVAL_REQUESTED => history.as_mut()?.approval_requested_at = Some(at),
                TOOL_APPROVED | TOOL_DENIED => {
                    let decided = if rune.event_type == TOOL_APPROVED {
                        "approved"
                    } else {
                        "denied"
                    };
                    let approver = field("approver").unwrap_or_default().to_string();
                    history.as_mut()?.decision = Some((decided, approver, at));
                }
                TOOL_RESULT => {
                    let status = field("status").unwrap_or_default().to_string();
                    history.as_mut()?.result = Some((status, at));
                }
                _ => {}
            }
        }
        history
    }
}

/// A tool call's `execute_tool` span once it has its result (`None` before), `cause` the
/// trace context of what caused its turn.
pub fn execute_tool(call: &ToolCallHistory, cause: &TraceContext) -> Option<SpanRecord> {
    let (status, ended_at) = call.result.clone()?;
    let mut attributes = vec![
        ("gen_ai.operation.name", text("execute_tool")),
        ("gen_ai.tool.name", text(call.tool_name.as_str())),
        ("gen_ai.tool.call.id", text(call.call_id.as_str())),
        ("gen_ai.tool.type", text("function")),
        ("pm.turn.id", text(call.turn_id.to_string())),
        ("pm.tool.status", text(status.as_str())),
        (
            "pm.tool.requires_approval",
            Attribute::Bool(call.approval_requested_at.is_some()),
        ),
    ];
    let mut events = Vec::new();
    if let Some(asked) = call.approval_requested_at {
        events.push(("approval_requested", asked));
    }
    if let Some((decided, approver, at)) = &call.decision {
        let waited = call.approval_requested_at.unwrap_or(call.called_at);
        attributes.push(("pm.tool.approval", text(*decided)));
        attributes.push(("pm.tool.approver", text(approver.as_str())));
        attributes.push((
            "pm.tool.approval_wait_ms",
            int((*at - waited).num_milliseconds().max(0)),
        ));
        events.push((*decided, *at));
    }
    let error = (status != "success").then(|| status.clone());
    if let Some(error) = &error {
        attributes.push(("error.type", text(error.as_str())));
    }
    Some(SpanRecord {
        context: cause.of_tool_call(call.turn_id, &call.call_id),
        parent_span_id: Some(cause.of_turn(call.turn_id).span_id().to_string()),
        parent_is_remote: false,
        name: format!("execute_tool {}", call.tool_name),
        kind: SpanKind::Internal,
        start: call.called_at,
        end: ended_at.max(call.called_at),
        attributes,
        events,
        error,
    })
}

#[cfg(test)]
mod tests;
