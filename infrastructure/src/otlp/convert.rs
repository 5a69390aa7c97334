//! A [`SpanRecord`] as the SDK's [`SpanData`], with the ids it names (derived or
//! recorded, never drawn by the SDK).

use std::borrow::Cow;
use std::str::FromStr;

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind as OtelKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use pm_application::trace::genai::{Attribute, SpanKind, SpanRecord, SEMCONV};
use pm_application::trace::TraceContext;

/// The span, or `None` (logged) when its context does not read as W3C ids.
pub(super) fn span_data(span: SpanRecord) -> Option<SpanData> {
    let Some(context) = span_context(&span.context) else {
        tracing::warn!(traceparent = %span.context.traceparent, "a span with an unreadable trace context was not exported");
        return None;
    };
    let parent_span_id = span
        .parent_span_id
        .as_deref()
        .and_then(|id| SpanId::from_hex(id).ok())
        .unwrap_or(SpanId::INVALID);
    let attributes = span
        .attributes
        .into_iter()
        .map(|(key, value)| KeyValue::new(key, value_of(value)))
        .collect();
    let mut events = SpanEvents::default();
    events.events = span
        .events
        .into_iter()
        .map(|(name, at)| Event::new(name, at.into(), Vec::new(), 0))
        .collect();
    Some(SpanData {
        span_context: context,
        parent_span_id,
        parent_span_is_remote: span.parent_is_remote,
        span_kind: match span.kind {
            SpanKind::Server => OtelKind::Server,
            SpanKind::Internal => OtelKind::Internal,
        },
        name: Cow::Owned(span.name),
        start_time: span.start.into(),
        end_time: span.end.into(),
        attributes,
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status: match span.error {
            Some(message) => Status::error(message),
            None => Status::Unset,
        },
        instrumentation_scope: scope(),
    })
}

fn value_of(value: Attribute) -> Value {
    match value {
        Attribute::Text(s) => Value::from(s),
        Attribute::Int(i) => Value::I64(i),
        Attribute::Bool(b) => Value::Bool(b),
    }
}

fn span_context(trace: &TraceContext) -> Option<SpanContext> {
    let trace_id = TraceId::from_hex(trace.trace_id()).ok()?;
    let span_id = SpanId::from_hex(trace.span_id()).ok()?;
    let flags = u8::from_str_radix(trace.flags(), 16).ok()?;
    let state = trace
        .tracestate
        .as_deref()
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        false,
        state,
    ))
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("project-manager")
        .with_version(env!("CARGO_PKG_VERSION"))
        .with_schema_url(format!("https://opentelemetry.io/schemas/{SEMCONV}"))
        .build()
}
