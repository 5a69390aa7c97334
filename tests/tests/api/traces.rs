//! Trace context in and out (issue 34) against the running service, with the JetStream
//! relay and a webhook receiver: the `traceparent` of an ingress request is continued by
//! the message it writes, by the runes the sagas decide on that message, by the claim that
//! hands the turn to a worker (the turn's span, the same on every claim) and by the
//! worker's report sent in that span; the relayed message and the webhook delivery of the
//! message carry the same trace as headers. A request without a `traceparent`, or with a
//! malformed one, starts a trace of its own, named in `traceresponse`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pm_application::trace::TraceContext;
use pm_tests::nats::{delete_stream, names, stream_messages, NATS};
use pm_tests::{on_both_backends, Response, TestDb, TestService, ADMIN, INGRESS};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::{config, created, events, post_with};
use crate::webhooks::{header, subscribe, until, Receiver};
use crate::workers::{claimed_soon, report_traced};

/// The ingress's trace, and its span that posted the comment.
const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const TRACESTATE: &str = "ingress=comment-42";

async fn start(db: &TestDb, stream: &str, prefix: &str) -> TestService {
    let mut config = config(db);
    config.auth_tokens = pm_tests::all_tokens();
    config.nats_url = Some(NATS.to_string());
    config.nats_stream = stream.to_string();
    config.nats_subject_prefix = prefix.to_string();
    config.webhook_allowed_hosts = "127.0.0.1/32".into();
    config.webhook_retry_base_ms = 20;
    TestService::start_with(config).await
}

/// The answer's `traceresponse`, read as a trace context.
fn named(r: &Response) -> TraceContext {
    TraceContext {
        traceparent: r
            .header("traceresponse")
            .unwrap_or_else(|| panic!("no traceresponse: {:?}", r.headers))
            .to_string(),
        tracestate: None,
    }
}

/// The event of `events` with CloudEvent `type` and `data.id` `id`.
fn event<'a>(events: &'a [Value], event_type: &str, id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == event_type && e["data"]["id"] == id)
        .unwrap_or_else(|| panic!("no {event_type} of {id}"))
}

async fn a_comments_trace_reaches_its_turn_the_workers_reports_and_every_consumer(db: TestDb) {
    let Some(nats) = pm_tests::nats::client(NATS).await else {
        return;
    };
    let (stream, prefix) = names();
    let (receiver, url) = Receiver::start().await;
    let svc = start(&db, &stream, &prefix).await;
    subscribe(&svc, &url, &["project_manager.message.added"]).await;
    let post = |path: String, body: Value| {
        let svc = &svc;
        async move { created(&svc.post(Some(ADMIN), &path, &body).await) }
    };
    let human = post(
        "/v1/actors".into(),
        json!({"kind": "human", "display_name": "Hana"}),
    )
    .await;
    let model = post(
        "/v1/actors".into(),
        json!({"kind": "ai", "display_name": "Lin"}),
    )
    .await;
    let conversation = post(
        "/v1/conversations".into(),
        json!({"actor_ids": [human, model], "title": "Traced"}),
    )
    .await;

    // The ingress posts a GitHub comment in its trace.
    let said = post_with(
        &svc,
        Some(INGRESS),
        &format!("/v1/conversations/{conversation}/messages"),
        &json!({"actor_id": human, "content": "please look"}),
        &[("traceparent", TRACEPARENT), ("tracestate", TRACESTATE)],
    )
    .await;
    let message = created(&said);
    let request = named(&said);
    assert_eq!(
        request.trace_id(),
        TRACE_ID,
        "the caller's trace is continued"
    );
    assert_ne!(
        request.span_id(),
        "b7ad6b7169203331",
        "as a span of its own"
    );
    assert_eq!(request.flags(), "01");

    // The worker's claim hands it the turn's span in that trace.
    let claim = claimed_soon(&svc).await;
    let turn = claim.json["turn"]["id"]
        .as_str()
        .expect("a turn")
        .to_string();
    let epoch = claim.json["turn_epoch"].as_i64().expect("an epoch");
    let handed = &claim.json["trace_context"];
    let turn_span = TraceContext {
        traceparent: request.traceparent.clone(),
        tracestate: Some(TRACESTATE.into()),
    }
    .of_turn(Uuid::parse_str(&turn).expect("a uuid"));
    assert_eq!(
        handed["traceparent"],
        turn_span.traceparent.as_str(),
        "{handed}"
    );
    assert_eq!(handed["tracestate"], TRACESTATE, "{handed}");

    // The worker reports in the turn's span: its request is a child of it.
    let reported = report_traced(&svc, &turn, epoch, &turn_span.traceparent).await;
    let report = named(&reported);
    assert_eq!(report.trace_id(), TRACE_ID);

    // The log records each: the message in the ingress request's span, what the sagas
    // decided on it in the same, the worker's tool call in the report's.
    let log = events(&svc, &format!("conversation_id={conversation}")).await;
    let fact = event(&log, "project_manager.message.added", &message);
    assert_eq!(fact["traceparent"], request.traceparent.as_str(), "{fact}");
    assert_eq!(fact["tracestate"], TRACESTATE, "{fact}");
    for rune in ["turn.queued", "turn.dispatched"] {
        let of_turn = log
            .iter()
            .find(|e| e["type"] == rune && e["data"]["turn_id"] == turn.as_str())
            .unwrap_or_else(|| panic!("the turn's {rune}"));
        assert_eq!(
            of_turn["traceparent"],
            request.traceparent.as_str(),
            "{of_turn}"
        );
    }
    let call = log
        .iter()
        .find(|e| e["type"] == "tool.call")
        .expect("the tool call's rune");
    assert_eq!(call["traceparent"], report.traceparent.as_str(), "{call}");

    // The relayed message and the webhook delivery carry it as headers.
    let deadline = Instant::now() + Duration::from_secs(30);
    let relayed = loop {
        let messages = stream_messages(&nats, &stream).await;
        if let Some(m) = messages.into_iter().find(|m| m.id == fact["id"]) {
            break m;
        }
        assert!(Instant::now() < deadline, "the message was never relayed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        relayed.traceparent.as_deref(),
        Some(request.traceparent.as_str())
    );
    assert_eq!(relayed.tracestate.as_deref(), Some(TRACESTATE));
    until("the webhook delivery", || !receiver.ids().is_empty()).await;
    let (headers, _) = receiver.deliveries.lock().expect("lock")[0].clone();
    assert_eq!(
        header(&headers, "webhook-id"),
        fact["id"].as_str().unwrap_or_default()
    );
    assert_eq!(header(&headers, "traceparent"), request.traceparent);
    assert_eq!(header(&headers, "tracestate"), TRACESTATE);
    assert_eq!(receiver.fail_first.load(Ordering::SeqCst), 0);

    svc.stop().await;
    delete_stream(&nats, &stream).await;
}

async fn a_request_without_a_valid_traceparent_starts_a_trace_of_its_own(db: TestDb) {
    let mut config = config(&db);
    config.auth_tokens = pm_tests::all_tokens();
    let svc = TestService::start_with(config).await;
    for sent in [
        None,
        Some("00-not-a-trace-01"),
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-zz"),
    ] {
        let headers: Vec<(&str, &str)> = sent.map(|t| vec![("traceparent", t)]).unwrap_or_default();
        let r = post_with(
            &svc,
            Some(ADMIN),
            "/v1/actors",
            &json!({"kind": "human", "display_name": "Untraced"}),
            &headers,
        )
        .await;
        let actor = created(&r);
        let trace = named(&r);
        assert_ne!(trace.trace_id(), TRACE_ID, "{sent:?}");
        assert_eq!(trace.trace_id().len(), 32);
        assert_eq!(trace.flags(), "01");
        let log = events(&svc, "types=project_manager.actor.registered").await;
        let fact = event(&log, "project_manager.actor.registered", &actor);
        assert_eq!(fact["traceparent"], trace.traceparent.as_str(), "{fact}");
        assert!(fact.get("tracestate").is_none(), "{fact}");
    }
    // Reads are answered in a trace too.
    let read = svc.get(Some(ADMIN), "/v1/actors").await;
    assert_eq!(named(&read).trace_id().len(), 32);
    svc.stop().await;
}

on_both_backends!(
    a_comments_trace_reaches_its_turn_the_workers_reports_and_every_consumer,
    a_request_without_a_valid_traceparent_starts_a_trace_of_its_own,
);
