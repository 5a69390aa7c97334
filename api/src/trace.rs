//! The W3C Trace Context of a request (issue 34): a request continues the trace its
//! caller sent in `traceparent`/`tracestate` as a span of its own, or starts a new trace;
//! every fact it writes records that span ([`pm_application::trace`]), and the answer
//! names it in `traceresponse` (W3C Trace Context Level 2), so a caller that sent none can
//! still find what it caused.
//!
//! A malformed `traceparent` is ignored, as the W3C recommendation asks (a new trace is
//! started), never refused: tracing must not break a request.
//!
//! When spans are exported (OTLP), the request's span is exported as it ends: a `SERVER`
//! span named `<method> <route>` per the HTTP semantic conventions, a child of the
//! caller's span, with the principal that was signed in.

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use chrono::Utc;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use pm_application::trace::genai::{self, HttpRequest, SpanSink};
use pm_application::trace::TraceContext;
use pm_infrastructure::otlp::live::LiveSpans;

/// The answer's header naming the request's span.
pub const TRACERESPONSE: &str = "traceresponse";

/// The request's span in its trace, put in the request's extensions by [`begin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTrace(pub TraceContext);

/// The principal a request was signed in as, put in the answer's extensions by the guard
/// when spans are exported (the request's span names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn(pub String);

/// What [`begin`] gave a request: its span, to name in the answer and, when spans are
/// exported, to export as it ends ([`end`]).
pub struct Begun {
    named: Option<HeaderValue>,
    started: Option<Started>,
}

/// A request's span as it began, for its export.
struct Started {
    spans: LiveSpans,
    context: TraceContext,
    parent: Option<String>,
    method: String,
    path: String,
    start: chrono::DateTime<Utc>,
}

/// Gives `req` its span ([`of`]) in its extensions. Called by the request's outermost
/// middleware (`routes::request_context`), which runs [`end`] on the answer: one layer,
/// not one of its own — every `from_fn` layer clones the whole stack inside it per
/// request.
pub fn begin(spans: Option<&LiveSpans>, req: &mut Request) -> Begun {
    let (trace, parent) = of(req.headers());
    let named = HeaderValue::from_str(&trace.traceparent).ok();
    let started = spans.map(|spans| Started {
        spans: spans.clone(),
        context: trace.clone(),
        parent,
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        start: Utc::now(),
    });
    req.extensions_mut().insert(RequestTrace(trace));
    Begun { named, started }
}

/// Names the request's span in `response` (`traceresponse`) and, when spans are exported,
/// exports it.
pub fn end(begun: Begun, response: &mut Response) {
    if let Some(s) = begun.started {
        let http = HttpRequest {
            method: &s.method,
            path: &s.path,
            route: response
                .extensions()
                .get::<MatchedPath>()
                .map(MatchedPath::as_str),
            status: response.status().as_u16(),
            principal: response
                .extensions()
                .get::<SignedIn>()
                .map(|p| p.0.as_str()),
        };
        s.spans.finished(genai::request(
            s.context,
            s.parent,
            &http,
            (s.start, Utc::now()),
        ));
    }
    if let Some(named) = begun.named {
        response.headers_mut().insert(TRACERESPONSE, named);
    }
}

/// A new span in the trace of `headers`' valid `traceparent` (with its flags and its
/// valid `tracestate` entries), with the caller's span id; or a new trace, without.
pub fn of(headers: &HeaderMap) -> (TraceContext, Option<String>) {
    if !headers.contains_key("traceparent") {
        return (TraceContext::root(), None);
    }
    let cx = TraceContextPropagator::new().extract(&Headers(headers));
    let span = cx.span();
    let parent = span.span_context();
    if !parent.is_valid() {
        return (TraceContext::root(), None);
    }
    let caller = TraceContext::new(
        parent.trace_id().to_bytes(),
        parent.span_id().to_bytes(),
        parent.trace_flags().to_u8(),
        Some(parent.trace_state().header()),
    );
    (caller.child(), Some(caller.span_id().to_string()))
}

/// The request's headers as the propagator reads them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(axum::http::HeaderName::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).expect("a header"));
        }
        headers
    }

    #[test]
    fn given_a_callers_traceparent_when_read_then_the_request_is_a_new_span_of_its_trace() {
        let (trace, parent) = of(&headers(&[
            ("traceparent", PARENT),
            ("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
        ]));

        assert_eq!(parent.as_deref(), Some("00f067aa0ba902b7"));
        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(trace.span_id(), "00f067aa0ba902b7");
        assert_eq!(trace.flags(), "01");
        assert_eq!(
            trace.tracestate.as_deref(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
    }

    #[test]
    fn given_an_unsampled_caller_when_read_then_the_flags_are_kept() {
        let unsampled = PARENT.replace("-01", "-00");

        let (trace, _) = of(&headers(&[("traceparent", &unsampled)]));

        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(trace.flags(), "00");
        assert_eq!(trace.tracestate, None);
    }

    #[test]
    fn given_no_or_a_malformed_traceparent_when_read_then_a_new_trace_starts() {
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        ] {
            let (trace, parent) = of(&headers(&[("traceparent", bad)]));

            assert_ne!(
                trace.trace_id(),
                "4bf92f3577b34da6a3ce929d0e0e4736",
                "{bad}"
            );
            assert_eq!(trace.trace_id().len(), 32, "{bad}");
            assert_eq!(trace.flags(), "01", "{bad}");
            assert_eq!(parent, None, "{bad}");
        }
        assert_eq!(of(&HeaderMap::new()).0.trace_id().len(), 32);
    }
}
