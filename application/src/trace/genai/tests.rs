use chrono::TimeZone;
use serde_json::json;

use super::*;
use crate::log::LogPosition;

const CAUSE: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn cause() -> TraceContext {
    TraceContext {
        traceparent: CAUSE.into(),
        tracestate: Some("ingress=42".into()),
    }
}

fn at(second: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 3, 0, second)
        .single()
        .expect("a time")
}

fn turn(terminal: &str, reason: Option<&str>) -> TurnView {
    serde_json::from_value(json!({
        "id": "0193b6a0-0000-7000-8000-000000000001",
        "agent_id": "0193b6a0-0000-7000-8000-000000000002",
        "conversation_id": "0193b6a0-0000-7000-8000-000000000003",
        "kind": "conversation",
        "task_id": null,
        "input": {"kind": "message", "message_id": "0193b6a0-0000-7000-8000-000000000004"},
        "state": "completed",
        "turn_epoch": 2,
        "terminal_rune": terminal,
        "deliverable": null,
        "deliverable_reason": reason,
        "lease": null,
        "claims": 2,
        "input_tokens": 120,
        "output_tokens": 30,
        "tool_calls": [],
        "created_at": at(1),
        "updated_at": at(9),
    }))
    .expect("a turn")
}

fn attribute<'a>(span: &'a SpanRecord, key: &str) -> Option<&'a Attribute> {
    span.attributes
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

fn rune(event_type: &str, second: u32, payload: Value) -> LoggedEvent {
    LoggedEvent {
        position: LogPosition(i64::from(second)),
        aggregate_type: "tool_call".into(),
        aggregate_id: "t".into(),
        sequence: i64::from(second),
        event_type: event_type.into(),
        event_version: "1.0".into(),
        payload: payload.into(),
        metadata: json!({"recorded_at": pm_domain::time::format(&at(second))}).into(),
        conversation_id: None,
        organization: None,
    }
}

const TURN: &str = "0193b6a0-0000-7000-8000-000000000001";

fn approved_call() -> Vec<LoggedEvent> {
    vec![
        rune(
            TOOL_CALL,
            2,
            json!({"call_id": "a", "tool_name": "shell", "turn_id": TURN, "arguments": {}}),
        ),
        rune(TOOL_APPROVAL_REQUESTED, 3, json!({"call_id": "a"})),
        rune(
            TOOL_APPROVED,
            7,
            json!({"call_id": "a", "approver": "alice"}),
        ),
        rune(TOOL_RESULT, 8, json!({"call_id": "a", "status": "success"})),
    ]
}

#[test]
fn given_an_ended_turn_when_its_span_is_made_then_it_is_invoke_agent_under_its_cause() {
    let span = invoke_agent(&turn("turn.completed", None), &cause(), at(9));

    assert_eq!(span.name, "invoke_agent");
    assert_eq!(span.kind, SpanKind::Internal);
    assert_eq!(span.context.trace_id(), cause().trace_id());
    assert_eq!(
        span.context,
        cause().of_turn(Uuid::parse_str(TURN).expect("uuid"))
    );
    assert_eq!(span.parent_span_id.as_deref(), Some("b7ad6b7169203331"));
    assert_eq!((span.start, span.end), (at(1), at(9)));
    assert_eq!(
        attribute(&span, "gen_ai.operation.name"),
        Some(&text("invoke_agent"))
    );
    assert_eq!(
        attribute(&span, "gen_ai.agent.id"),
        Some(&text("0193b6a0-0000-7000-8000-000000000002"))
    );
    assert_eq!(
        attribute(&span, "gen_ai.conversation.id"),
        Some(&text("0193b6a0-0000-7000-8000-000000000003"))
    );
    assert_eq!(
        attribute(&span, "gen_ai.usage.input_tokens"),
        Some(&Attribute::Int(120))
    );
    assert_eq!(
        attribute(&span, "gen_ai.usage.output_tokens"),
        Some(&Attribute::Int(30))
    );
    assert_eq!(attribute(&span, "pm.turn.claims"), Some(&Attribute::Int(2)));
    assert_eq!(
        attribute(&span, "pm.turn.outcome"),
        Some(&text("turn.completed"))
    );
    assert_eq!(span.error, None);
}

#[test]
fn given_a_turn_that_ended_in_error_when_its_span_is_made_then_the_span_is_an_error() {
    let span = invoke_agent(&turn("turn.error", Some("watchdog")), &cause(), at(9));

    assert_eq!(span.error.as_deref(), Some("watchdog"));
    assert_eq!(attribute(&span, "error.type"), Some(&text("watchdog")));
}

#[test]
fn given_a_terminal_rune_logged_before_the_turn_row_time_when_made_then_it_never_ends_before_it_starts(
) {
    let span = invoke_agent(&turn("turn.completed", None), &cause(), at(0));

    assert_eq!(span.end, span.start);
}

#[test]
fn given_an_approved_call_with_its_result_when_its_span_is_made_then_it_is_execute_tool_with_the_wait(
) {
    let history = ToolCallHistory::of(&approved_call()).expect("a history");

    let span = execute_tool(&history, &cause()).expect("a span");

    let turn = Uuid::parse_str(TURN).expect("uuid");
    assert_eq!(span.name, "execute_tool shell");
    assert_eq!(span.context, cause().of_tool_call(turn, "a"));
    assert_eq!(
        span.parent_span_id.as_deref(),
        Some(cause().of_turn(turn).span_id())
    );
    assert_eq!((span.start, span.end), (at(2), at(8)));
    assert_eq!(
        attribute(&span, "gen_ai.operation.name"),
        Some(&text("execute_tool"))
    );
    assert_eq!(attribute(&span, "gen_ai.tool.name"), Some(&text("shell")));
    assert_eq!(attribute(&span, "gen_ai.tool.call.id"), Some(&text("a")));
    assert_eq!(
        attribute(&span, "pm.tool.approval_wait_ms"),
        Some(&Attribute::Int(4000))
    );
    assert_eq!(attribute(&span, "pm.tool.approver"), Some(&text("alice")));
    assert_eq!(attribute(&span, "pm.tool.status"), Some(&text("success")));
    assert_eq!(
        span.events,
        vec![("approval_requested", at(3)), ("approved", at(7))]
    );
    assert_eq!(span.error, None);
}

#[test]
fn given_a_denied_call_when_its_span_is_made_then_it_is_an_error_of_its_status() {
    let mut runes = approved_call();
    runes[2] = rune(TOOL_DENIED, 5, json!({"call_id": "a", "approver": "bob"}));
    runes[3] = rune(TOOL_RESULT, 5, json!({"call_id": "a", "status": "denied"}));

    let span =
        execute_tool(&ToolCallHistory::of(&runes).expect("history"), &cause()).expect("a span");

    assert_eq!(span.error.as_deref(), Some("denied"));
    assert_eq!(attribute(&span, "pm.tool.approval"), Some(&text("denied")));
    assert_eq!(
        attribute(&span, "pm.tool.approval_wait_ms"),
        Some(&Attribute::Int(2000))
    );
}

#[test]
fn given_an_open_call_or_no_call_when_read_then_there_is_no_span() {
    let open = &approved_call()[..3];

    let history = ToolCallHistory::of(open).expect("a history");

    assert_eq!(execute_tool(&history, &cause()), None);
    assert_eq!(ToolCallHistory::of(&approved_call()[1..]), None);
}

#[test]
fn given_a_command_that_wrote_when_its_span_is_made_then_it_is_a_child_of_the_request() {
    let id = Uuid::now_v7();

    let span = command("task", id, &cause(), (at(1), at(2)), Ok("created"));

    assert_eq!(span.name, "command task");
    assert_eq!(span.context.trace_id(), cause().trace_id());
    assert_ne!(span.context.span_id(), cause().span_id());
    assert_eq!(span.parent_span_id.as_deref(), Some(cause().span_id()));
    assert_eq!(
        attribute(&span, "pm.aggregate.id"),
        Some(&text(id.to_string()))
    );
    assert_eq!(
        attribute(&span, "pm.command.outcome"),
        Some(&text("created"))
    );
    assert_eq!(span.error, None);
}

#[test]
fn given_a_refused_command_when_its_span_is_made_then_it_is_an_error_saying_why() {
    let refused = Err(("refused", "the task is done".to_string()));

    let span = command("task", Uuid::now_v7(), &cause(), (at(2), at(1)), refused);

    assert_eq!(span.error.as_deref(), Some("the task is done"));
    assert_eq!(attribute(&span, "error.type"), Some(&text("refused")));
    assert_eq!(span.end, span.start, "never ends before it starts");
}

#[test]
fn given_a_traced_fact_when_the_sagas_decided_it_then_its_span_is_a_child_of_the_facts() {
    let mut fact = rune("project_manager.message.added", 4, json!({}));
    fact.metadata = json!({"traceparent": CAUSE}).into();
    let conversation = Uuid::now_v7();

    let span = saga_decision(&fact, conversation, 7, (at(5), at(6))).expect("a span");

    assert_eq!(span.name, "saga project_manager.message.added");
    assert_eq!(span.context.trace_id(), cause().trace_id());
    assert_eq!(span.parent_span_id.as_deref(), Some("b7ad6b7169203331"));
    assert_eq!(
        attribute(&span, "pm.conversation.id"),
        Some(&text(conversation.to_string()))
    );
    assert_eq!(
        attribute(&span, "pm.saga.batch_events"),
        Some(&Attribute::Int(7))
    );
}

#[test]
fn given_a_fact_without_a_trace_when_the_sagas_decided_it_then_there_is_no_span() {
    let fact = rune("project_manager.message.added", 4, json!({}));

    assert_eq!(
        saga_decision(&fact, Uuid::now_v7(), 1, (at(5), at(6))),
        None
    );
}

#[test]
fn given_a_routed_request_when_its_span_is_made_then_it_is_a_server_span_named_by_route() {
    let http = HttpRequest {
        method: "POST",
        path: "/v1/conversations/c/messages",
        route: Some("/v1/conversations/{id}/messages"),
        status: 201,
        principal: Some("ingress"),
    };

    let span = request(
        cause().child(),
        Some("b7ad6b7169203331".into()),
        &http,
        (at(1), at(2)),
    );

    assert_eq!(span.name, "POST /v1/conversations/{id}/messages");
    assert_eq!(span.kind, SpanKind::Server);
    assert!(span.parent_is_remote);
    assert_eq!(span.parent_span_id.as_deref(), Some("b7ad6b7169203331"));
    assert_eq!(
        attribute(&span, "http.response.status_code"),
        Some(&Attribute::Int(201))
    );
    assert_eq!(attribute(&span, "pm.principal"), Some(&text("ingress")));
    assert_eq!(span.error, None);
}

#[test]
fn given_an_unrouted_failing_request_when_its_span_is_made_then_it_is_named_by_method_and_an_error()
{
    let http = HttpRequest {
        method: "GET",
        path: "/nowhere",
        route: None,
        status: 503,
        principal: None,
    };

    let span = request(TraceContext::root(), None, &http, (at(1), at(2)));

    assert_eq!(span.name, "GET");
    assert!(!span.parent_is_remote);
    assert_eq!(attribute(&span, "http.route"), None);
    assert_eq!(attribute(&span, "error.type"), Some(&text("503")));
    assert_eq!(span.error.as_deref(), Some("503"));
}
