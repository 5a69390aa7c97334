//! An OTLP/HTTP receiver for the trace tests (issue 34): it decodes what the service's
//! exporter sends (protobuf) and keeps every span; it can be made to refuse exports.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// Every span the receiver got, with its resource's `service.name`; while `down`, it
/// answers `503` and keeps nothing.
#[derive(Default)]
pub struct Collector {
    spans: Mutex<Vec<(String, Span)>>,
    /// While set, every export is refused with `503`.
    pub down: AtomicBool,
    /// Exports refused so far.
    pub refused: AtomicUsize,
}

impl Collector {
    /// A receiver of `POST /v1/traces` on a loopback port, and its base URL.
    pub async fn start() -> (Arc<Self>, String) {
        let collector = Arc::new(Self::default());
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state(collector.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (collector, url)
    }

    /// Every span received so far, with its `service.name`.
    pub fn spans(&self) -> Vec<(String, Span)> {
        self.spans.lock().expect("lock").clone()
    }

    /// The spans named `name` whose attribute `key` is `value`, once there is one (30 s).
    pub async fn wait_for(&self, name: &str, key: &str, value: &str) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found: Vec<Span> = self
                .spans()
                .into_iter()
                .map(|(_, s)| s)
                .filter(|s| s.name == name && text(s, key).as_deref() == Some(value))
                .collect();
            if !found.is_empty() {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no {name} span with {key}={value}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn receive(
    State(collector): State<Arc<Collector>>,
    body: Bytes,
) -> (axum::http::StatusCode, Vec<u8>) {
    if collector.down.load(Ordering::SeqCst) {
        collector.refused.fetch_add(1, Ordering::SeqCst);
        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, Vec::new());
    }
    let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
    let mut spans = collector.spans.lock().expect("lock");
    for resource in request.resource_spans {
        let service = resource
            .resource
            .as_ref()
            .and_then(|r| attribute(&r.attributes, "service.name"))
            .and_then(|v| match v {
                Any::StringValue(s) => Some(s),
                _ => None,
            })
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                spans.push((service.clone(), span));
            }
        }
    }
    (axum::http::StatusCode::OK, Vec::new())
}

fn attribute(attributes: &[KeyValue], key: &str) -> Option<Any> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

/// The string attribute `key` of `span`.
pub fn text(span: &Span, key: &str) -> Option<String> {
    match attribute(&span.attributes, key)? {
        Any::StringValue(s) => Some(s),
        _ => None,
    }
}

/// The integer attribute `key` of `span`.
pub fn int(span: &Span, key: &str) -> Option<i64> {
    match attribute(&span.attributes, key)? {
        Any::IntValue(i) => Some(i),
        _ => None,
    }
}

/// Bytes (a trace or span id) as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
