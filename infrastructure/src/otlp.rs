//! Spans over OTLP/HTTP with protobuf (issue 34), with the `opentelemetry` crates: off
//! unless an endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), and then:
//!
//! - [`live::LiveSpans`]: the requests' spans, queued as they end and sent in batches by
//!   one task (a full queue drops, counted: tracing never slows a request);
//! - [`agent_spans::AgentSpans`]: a processor on the log that exports each turn's and each
//!   tool call's span once it ended ([`pm_application::trace::genai`]), and moves its
//!   cursor only once the collector took them: derived from the log, they survive
//!   restarts and are exported once.
//!
//! The exporter reads the other standard settings itself (`OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_EXPORTER_OTLP_TIMEOUT`, …); the resource takes `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES`. Requests go through the service's own `reqwest` ([`http`]).

pub mod agent_spans;
mod convert;
mod http;
pub mod live;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SpanExporter as _;
use opentelemetry_sdk::Resource;
use pm_application::trace::genai::SpanRecord;

/// The path of the traces signal under `OTEL_EXPORTER_OTLP_ENDPOINT` (OTLP/HTTP).
const TRACES_PATH: &str = "/v1/traces";

/// How long one export may take, unless `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where and as what to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The traces URL: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces`.
    pub traces_url: String,
    /// `service.name` (`OTEL_SERVICE_NAME`).
    pub service_name: String,
}

impl OtlpSettings {
    /// The settings of the two endpoint variables, `None` when neither is set (export off).
    pub fn of(
        endpoint: Option<&str>,
        traces_endpoint: Option<&str>,
        service_name: &str,
    ) -> Option<Self> {
        fn nonempty(s: Option<&str>) -> Option<&str> {
            s.map(str::trim).filter(|s| !s.is_empty())
        }
        let traces_url = match (nonempty(traces_endpoint), nonempty(endpoint)) {
            (Some(url), _) => url.to_string(),
            (None, Some(base)) => format!("{}{TRACES_PATH}", base.trim_end_matches('/')),
            (None, None) => return None,
        };
        Some(Self {
            traces_url,
            service_name: service_name.to_string(),
        })
    }
}

/// Why export cannot start: the endpoint or a setting is not usable.
#[derive(Debug, thiserror::Error)]
#[error("OTEL_EXPORTER_OTLP_ENDPOINT: {0}")]
pub struct OtlpError(String);

/// The exporter, shared by the live spans and the processor.
#[derive(Debug)]
pub struct Otlp {
    exporter: opentelemetry_otlp::SpanExporter,
}

impl Otlp {
    /// An exporter to `settings`' URL through `client`.
    ///
    /// # Errors
    /// [`OtlpError`] when the URL or an `OTEL_*` setting the exporter reads is not usable.
    pub fn new(settings: &OtlpSettings, client: reqwest::Client) -> Result<Arc<Self>, OtlpError> {
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(http::Client(client))
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(settings.traces_url.clone())
            .with_timeout(TIMEOUT)
            .build()
            .map_err(|e| OtlpError(e.to_string()))?;
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .build();
        exporter.set_resource(&resource);
        Ok(Arc::new(Self { exporter }))
    }

    /// Sends `spans` (nothing when empty).
    ///
    /// # Errors
    /// The exporter's message when the collector did not take them.
    pub async fn export(&self, spans: Vec<SpanRecord>) -> Result<(), String> {
        let batch: Vec<_> = spans.into_iter().filter_map(convert::span_data).collect();
        if batch.is_empty() {
            return Ok(());
        }
        let count = batch.len() as u64;
        match self.exporter.export(batch).await {
            Ok(()) => {
                metrics::counter!("pm_otlp_spans_exported_total").increment(count);
                Ok(())
            }
            Err(e) => {
                metrics::counter!("pm_otlp_export_failures_total").increment(1);
                Err(e.to_string())
            }
        }
    }
}
