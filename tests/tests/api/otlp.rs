//! OTLP export (issue 34) against the running service and an OTLP/HTTP receiver the test
//! runs: an ingress request with a `traceparent` leads to a turn and a tool call whose
//! spans — the request's `SERVER` span, its command's and the sagas' decision on its fact,
//! the turn's `invoke_agent` and the call's `execute_tool` — share that trace, each a child
//! of the one before, with the GenAI attribute names; a turn claimed before a restart and
//! ended after it is one span, exported once; a collector away holds the turns' spans and
//! loses none; turned on over an existing log, the export starts with what ends next; with
//! no endpoint set, nothing exports.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use pm_tests::otlp::{hex, int, text, Collector};
use pm_tests::{on_both_backends, Response, TestDb, TestService, ADMIN, INGRESS, LLM};
use serde_json::{json, Value};

use crate::support::{config, created, post_with};
use crate::workers::{claimed_soon, fenced, report_traced};

const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const INGRESS_SPAN: &str = "b7ad6b7169203331";
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// The span id of a `traceparent`.
fn span_of(traceparent: &str) -> String {
    traceparent
        .split('-')
        .nth(2)
        .unwrap_or_default()
        .to_string()
}

async fn start(db: &TestDb, collector: Option<&str>) -> TestService {
    let mut config = config(db);
    config.auth_tokens = pm_tests::all_tokens();
    config.otel_exporter_otlp_endpoint = collector.map(str::to_string);
    TestService::start_with(config).await
}

/// A human and a model in a conversation; the ingress posts the human's message in its
/// trace. Returns the conversation and the message's answer.
async fn traced_message(svc: &TestService) -> (String, Response) {
    let post = |path: &'static str, body: Value| async move {
        created(&svc.post(Some(ADMIN), path, &body).await)
    };
    let human = post(
        "/v1/actors",
        json!({"kind": "human", "display_name": "Hana"}),
    )
    .await;
    let model = post("/v1/actors", json!({"kind": "ai", "display_name": "Lin"})).await;
    let conversation = post(
        "/v1/conversations",
        json!({"actor_ids": [human, model], "title": "Traced"}),
    )
    .await;
    let said = post_with(
        svc,
        Some(INGRESS),
        &format!("/v1/conversations/{conversation}/messages"),
        &json!({"actor_id": human, "content": "please look"}),
        &[("traceparent", TRACEPARENT)],
    )
    .await;
    assert_eq!(said.status, 201, "{}", said.text);
    (conversation, said)
}

/// A claim, long-polled: (turn, epoch, the answer).
async fn claimed(svc: &TestService) -> (String, i64, Value) {
    let r = claimed_soon(svc).await;
    let turn = r.json["turn"]["id"].as_str().expect("a turn").to_string();
    let epoch = r.json["turn_epoch"].as_i64().expect("an epoch");
    (turn, epoch, r.json)
}

/// Ends the claimed turn with a fenced `NEED_INFORMATION` checkpoint.
async fn complete(svc: &TestService, conversation: &str, turn: &str, epoch: i64) {
    let done = fenced(
        svc,
        &format!("/v1/conversations/{conversation}/checkpoints"),
        json!({"checkpoint_type": "NEED_INFORMATION", "summary": "which one?"}),
        turn,
        epoch,
    )
    .await;
    assert_eq!(done.status, 201, "{}", done.text);
}

async fn a_comments_spans_share_its_trace_from_request_to_turn_to_tool(db: TestDb) {
    let (collector, url) = Collector::start().await;
    let svc = start(&db, Some(&url)).await;
    let (conversation, said) = traced_message(&svc).await;
    let request_span = span_of(said.header("traceresponse").expect("traceresponse"));

    // A worker claims the turn and reports a tool call in the turn's span.
    let (turn, epoch, answer) = claimed(&svc).await;
    let turn_traceparent = answer["trace_context"]["traceparent"]
        .as_str()
        .expect("the turn's trace context")
        .to_string();
    let reported = report_traced(&svc, &turn, epoch, &turn_traceparent).await;
    let result = svc
        .post(
            Some(LLM),
            &format!("/v1/turns/{turn}/tool-calls/a/result"),
            &json!({"status": "success", "output": {"hits": 3}}),
        )
        .await;
    assert!(result.status < 300, "{}", result.text);
    // The turn resumes with the result; the worker reports usage and completes it.
    let (again, epoch, _) = claimed(&svc).await;
    assert_eq!(again, turn);
    let used = fenced(
        &svc,
        &format!("/v1/turns/{turn}/usage"),
        json!({"input_tokens": 15, "output_tokens": 5}),
        &turn,
        epoch,
    )
    .await;
    assert_eq!(used.status, 200, "{}", used.text);
    complete(&svc, &conversation, &turn, epoch).await;

    // The request's span: a SERVER child of the ingress's span.
    let requests = collector
        .wait_for(
            "POST /v1/conversations/{id}/messages",
            "http.request.method",
            "POST",
        )
        .await;
    let request = requests
        .iter()
        .find(|s| hex(&s.span_id) == request_span)
        .expect("the message request's span");
    assert_eq!(hex(&request.trace_id), TRACE_ID);
    assert_eq!(hex(&request.parent_span_id), INGRESS_SPAN);
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(int(request, "http.response.status_code"), Some(201));
    assert_eq!(text(request, "pm.principal").as_deref(), Some("ingress"));
    // Its command's span, a child of it.
    let commands = collector
        .wait_for("command message", "pm.command.outcome", "created")
        .await;
    let command = commands
        .iter()
        .find(|s| hex(&s.parent_span_id) == request_span)
        .expect("the message command's span");
    assert_eq!(hex(&command.trace_id), TRACE_ID);
    assert_eq!(
        text(command, "pm.aggregate.id").as_deref(),
        said.json["id"].as_str()
    );
    // The sagas' decision on the message, a child of the request that wrote it.
    let decisions = collector
        .wait_for(
            "saga project_manager.message.added",
            "pm.conversation.id",
            &conversation,
        )
        .await;
    assert_eq!(decisions.len(), 1, "decided once");
    assert_eq!(hex(&decisions[0].trace_id), TRACE_ID);
    assert_eq!(hex(&decisions[0].parent_span_id), request_span);

    // The turn's span: invoke_agent, a child of the request, with the GenAI attributes.
    let turns = collector
        .wait_for("invoke_agent", "pm.turn.id", &turn)
        .await;
    assert_eq!(turns.len(), 1, "exported once");
    let agent = &turns[0];
    assert_eq!(hex(&agent.trace_id), TRACE_ID);
    assert_eq!(hex(&agent.parent_span_id), request_span);
    assert_eq!(hex(&agent.span_id), span_of(&turn_traceparent));
    assert_eq!(
        text(agent, "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(
        text(agent, "gen_ai.conversation.id").as_deref(),
        Some(conversation.as_str())
    );
    let row = svc.get(Some(ADMIN), &format!("/v1/turns/{turn}")).await;
    assert_eq!(
        text(agent, "gen_ai.agent.id").as_deref(),
        row.json["agent_id"].as_str()
    );
    assert_eq!(int(agent, "gen_ai.usage.input_tokens"), Some(15));
    assert_eq!(int(agent, "gen_ai.usage.output_tokens"), Some(5));
    assert_eq!(int(agent, "pm.turn.claims"), Some(2));
    assert_eq!(
        text(agent, "pm.turn.outcome").as_deref(),
        Some("turn.completed")
    );
    assert!(agent.end_time_unix_nano >= agent.start_time_unix_nano);

    // The tool call's span: execute_tool, a child of the turn's.
    let tools = collector
        .wait_for("execute_tool search", "gen_ai.tool.call.id", "a")
        .await;
    let tool = tools
        .iter()
        .find(|s| text(s, "pm.turn.id").as_deref() == Some(turn.as_str()))
        .expect("the call's span");
    assert_eq!(hex(&tool.trace_id), TRACE_ID);
    assert_eq!(hex(&tool.parent_span_id), hex(&agent.span_id));
    assert_eq!(
        text(tool, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(text(tool, "gen_ai.tool.name").as_deref(), Some("search"));
    assert_eq!(text(tool, "pm.tool.status").as_deref(), Some("success"));

    // The worker's report joined the trace under the turn's span.
    let report = span_of(reported.header("traceresponse").expect("traceresponse"));
    let reports = collector
        .wait_for(
            "POST /v1/turns/{id}/tool-calls",
            "http.request.method",
            "POST",
        )
        .await;
    let report = reports
        .iter()
        .find(|s| hex(&s.span_id) == report)
        .expect("the report's span");
    assert_eq!(hex(&report.trace_id), TRACE_ID);
    assert_eq!(hex(&report.parent_span_id), hex(&agent.span_id));
    assert!(collector
        .spans()
        .iter()
        .all(|(service, _)| service == "project-manager"));
    assert!(processors(&svc)
        .await
        .contains(&"otlp_agent_spans".to_string()));
    svc.stop().await;
}

async fn a_turn_across_a_restart_is_one_span_exported_once(db: TestDb) {
    let (collector, url) = Collector::start().await;
    let svc = start(&db, Some(&url)).await;
    let (conversation, _) = traced_message(&svc).await;
    let (turn, epoch, _) = claimed(&svc).await;
    svc.stop().await;

    let svc = start(&db, Some(&url)).await;
    complete(&svc, &conversation, &turn, epoch).await;
    let turns = collector
        .wait_for("invoke_agent", "pm.turn.id", &turn)
        .await;
    assert_eq!(hex(&turns[0].trace_id), TRACE_ID);
    // Another second of following the log, and a restart: still one.
    tokio::time::sleep(Duration::from_secs(1)).await;
    svc.stop().await;
    let svc = start(&db, Some(&url)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let exported = collector
        .spans()
        .into_iter()
        .filter(|(_, s)| s.name == "invoke_agent" && text(s, "pm.turn.id") == Some(turn.clone()))
        .count();
    assert_eq!(exported, 1, "the turn's span, once");
    svc.stop().await;
}

/// A collector away holds the turns' spans (the processor's cursor waits) and loses none:
/// once it is back, the turn's span arrives, once.
async fn a_collector_away_holds_the_turns_spans_and_loses_none(db: TestDb) {
    let (collector, url) = Collector::start().await;
    collector.down.store(true, Ordering::SeqCst);
    let svc = start(&db, Some(&url)).await;
    let (conversation, _) = traced_message(&svc).await;
    let (turn, epoch, _) = claimed(&svc).await;
    complete(&svc, &conversation, &turn, epoch).await;
    crate::sagas::wait_for(&svc, &format!("/v1/turns/{turn}"), |t| {
        t["state"] == "completed"
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while collector.refused.load(Ordering::SeqCst) < 2 {
        assert!(
            Instant::now() < deadline,
            "the service never tried to export"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(collector.spans().is_empty(), "nothing kept while down");

    collector.down.store(false, Ordering::SeqCst);
    let turns = collector
        .wait_for("invoke_agent", "pm.turn.id", &turn)
        .await;
    assert_eq!(turns.len(), 1, "exported once");
    assert_eq!(hex(&turns[0].trace_id), TRACE_ID);
    svc.stop().await;
}

async fn turned_on_over_a_log_the_export_starts_with_what_ends_next(db: TestDb) {
    let svc = start(&db, None).await;
    let (conversation, _) = traced_message(&svc).await;
    let (before, epoch, _) = claimed(&svc).await;
    complete(&svc, &conversation, &before, epoch).await;
    // Ended (the sagas wrote its terminal rune) before the export is turned on.
    crate::sagas::wait_for(&svc, &format!("/v1/turns/{before}"), |t| {
        t["state"] == "completed"
    })
    .await;
    svc.stop().await;

    let (collector, url) = Collector::start().await;
    let svc = start(&db, Some(&url)).await;
    let (conversation, _) = traced_message(&svc).await;
    let (after, epoch, _) = claimed(&svc).await;
    complete(&svc, &conversation, &after, epoch).await;
    collector
        .wait_for("invoke_agent", "pm.turn.id", &after)
        .await;
    // In log order: the earlier turn's span would have come first.
    let earlier = collector
        .spans()
        .into_iter()
        .filter(|(_, s)| text(s, "pm.turn.id") == Some(before.clone()))
        .count();
    assert_eq!(earlier, 0, "a turn that ended before the export was on");
    svc.stop().await;
}

async fn without_an_endpoint_nothing_exports(db: TestDb) {
    let svc = start(&db, None).await;
    let (_, said) = traced_message(&svc).await;
    assert!(said.header("traceresponse").is_some(), "traces still flow");
    let names = processors(&svc).await;
    assert!(
        !names.contains(&"otlp_agent_spans".to_string()),
        "{names:?}"
    );
    svc.stop().await;
}

/// The names `GET /v1/admin/processors` lists.
async fn processors(svc: &TestService) -> Vec<String> {
    let report = svc.get(Some(ADMIN), "/v1/admin/processors").await;
    assert_eq!(report.status, 200, "{}", report.text);
    report.json["processors"]
        .as_array()
        .expect("processors")
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}

on_both_backends!(
    a_comments_spans_share_its_trace_from_request_to_turn_to_tool,
    a_turn_across_a_restart_is_one_span_exported_once,
    a_collector_away_holds_the_turns_spans_and_loses_none,
    turned_on_over_a_log_the_export_starts_with_what_ends_next,
    without_an_endpoint_nothing_exports,
);
