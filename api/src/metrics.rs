//! The service's metrics catalogue: every metric `GET /metrics` shows, described (`# HELP`,
//! `# TYPE`) and registered at zero when the recorder is installed, so a scrape right after
//! the start shows zeros instead of gaps. Labelled metrics are registered for the label
//! values known in advance (processors, aggregates, fact types); the HTTP metrics appear
//! with the first request, since their labels are its method, route and status.

use cqrs_es::Aggregate;
use pm_application::sagas::SAGAS;
use pm_domain::actor::Actor;
use pm_domain::checkpoint::ConversationCheckpoint;
use pm_domain::conversation::Conversation;
use pm_domain::message::Message;
use pm_domain::task::Task;
use pm_infrastructure::read_model::READ_MODEL;

/// What a metric is, for its `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A monotonic count.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// A distribution in buckets.
    Histogram,
}

/// One metric of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Its name.
    pub name: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// Its `# HELP` text.
    pub help: &'static str,
    /// The label it is broken down by, and that label's values known at start.
    pub label: Option<(&'static str, &'static [&'static str])>,
}

/// The processors of every replica.
const PROCESSORS: &[&str] = &[READ_MODEL, SAGAS];

/// The aggregate types commands write to.
const AGGREGATES: &[&str] = &[
    Actor::TYPE,
    Conversation::TYPE,
    ConversationCheckpoint::TYPE,
    Message::TYPE,
    Task::TYPE,
];

/// Why the boundary refused a request (TRUST.md "The boundary"): the `reason` of
/// `pm_http_refused_total`.
pub mod refusal {
    /// A body that did not arrive within `PM_BODY_READ_TIMEOUT_MS` (`408`).
    pub const BODY_TIMEOUT: &str = "body_timeout";
    /// A connection beyond `PM_MAX_CONNECTIONS` (`503`).
    pub const CONNECTIONS: &str = "connections";
    /// An event stream beyond `PM_MAX_STREAMS_PER_PRINCIPAL` (`429`).
    pub const STREAMS: &str = "streams";
    /// A waiting claim beyond `PM_MAX_STREAMS_PER_PRINCIPAL` (`429`).
    pub const WAITING_CLAIMS: &str = "waiting_claims";
    /// An MCP session beyond `PM_MCP_SESSIONS_PER_PRINCIPAL` (`429`).
    pub const MCP_SESSIONS: &str = "mcp_sessions";
    /// An address held after too many failed authentications (`429`).
    pub const FAILED_AUTHENTICATIONS: &str = "failed_authentications";
    /// Open mode: a `Host` that is not loopback (`403`).
    pub const OPEN_MODE_HOST: &str = "open_mode_host";
    /// Open mode: a write from an `Origin` that is not loopback (`403`).
    pub const OPEN_MODE_ORIGIN: &str = "open_mode_origin";
    /// A body that does not say it is JSON (`415`).
    pub const NOT_JSON: &str = "not_json";
    /// Every reason.
    pub const ALL: &[&str] = &[
        BODY_TIMEOUT,
        CONNECTIONS,
        STREAMS,
        WAITING_CLAIMS,
        MCP_SESSIONS,
        FAILED_AUTHENTICATIONS,
        OPEN_MODE_HOST,
        OPEN_MODE_ORIGIN,
        NOT_JSON,
    ];
}

/// Counts a request the boundary refused, by `reason` (one of [`refusal`]).
pub fn refused(reason: &'static str) {
    ::metrics::counter!("pm_http_refused_total", "reason" => reason).increment(1);
}

/// Every metric the service records.
pub const CATALOGUE: &[Metric] = &[
    Metric {
        name: "http_requests_total",
        kind: Kind::Counter,
        help: "HTTP requests answered, by method, route and status.",
        label: None,
    },
    Metric {
        name: "http_request_duration_seconds",
        kind: Kind::Histogram,
        help: "Time to answer an HTTP request, by method, route and status.",
        label: None,
    },
    Metric {
        name: "pm_http_connections",
        kind: Kind::Gauge,
        help: "HTTP connections open now.",
        label: None,
    },
    Metric {
        name: "pm_http_connections_rejected_total",
        kind: Kind::Counter,
        help: "HTTP connections turned away with 503 because PM_MAX_CONNECTIONS were open.",
        label: None,
    },
    Metric {
        name: "pm_http_refused_total",
        kind: Kind::Counter,
        help: "Requests the boundary refused (TRUST.md), by reason: a slow body, the connection cap, a per-principal limit, failed authentications, open mode's Host/Origin, a body not JSON.",
        label: Some(("reason", refusal::ALL)),
    },
    Metric {
        name: "pm_facts_appended_total",
        kind: Kind::Counter,
        help: "Facts appended to the log, by fact type.",
        label: Some(("type", pm_domain::catalogue::FACTS)),
    },
    Metric {
        name: "pm_append_batch_events",
        kind: Kind::Histogram,
        help: "Appends committed together in one group-commit transaction (PostgreSQL).",
        label: None,
    },
    Metric {
        name: "pm_command_conflicts_total",
        kind: Kind::Counter,
        help: "Commands that lost an optimistic-concurrency race and were tried again, by aggregate type.",
        label: Some(("aggregate", AGGREGATES)),
    },
    Metric {
        name: "pm_processor_lag_events",
        kind: Kind::Gauge,
        help: "Events in the log the processor has not handled yet, by processor.",
        label: Some(("processor", PROCESSORS)),
    },
    Metric {
        name: "pm_processor_events_total",
        kind: Kind::Counter,
        help: "Events the processor has handled, by processor.",
        label: Some(("processor", PROCESSORS)),
    },
    Metric {
        name: "pm_processor_parked_total",
        kind: Kind::Counter,
        help: "Poison events the processor has parked, by processor.",
        label: Some(("processor", PROCESSORS)),
    },
    Metric {
        name: "pm_processor_batch_events",
        kind: Kind::Histogram,
        help: "Events per batch the processor read from the log, by processor.",
        label: Some(("processor", PROCESSORS)),
    },
    Metric {
        name: "pm_log_head_position",
        kind: Kind::Gauge,
        help: "The log's head position (checked every second).",
        label: None,
    },
    Metric {
        name: "pm_log_held_back_seconds",
        kind: Kind::Gauge,
        help: "How long the oldest append in progress has been running (readers cannot pass it until it ends), in seconds.",
        label: None,
    },
    Metric {
        name: "pm_saga_conflicts_total",
        kind: Kind::Counter,
        help: "Saga commits refused because a conversation was written elsewhere meanwhile (its machines are reloaded and decided again).",
        label: None,
    },
    Metric {
        name: "pm_saga_deadlines_fired_total",
        kind: Kind::Counter,
        help: "Saga deadlines (session and turn timeouts) that fired.",
        label: None,
    },
    Metric {
        name: "pm_saga_snapshots_written_total",
        kind: Kind::Counter,
        help: "Snapshots of a conversation's saga machines written (PM_SAGA_SNAPSHOT_RUNES).",
        label: None,
    },
    Metric {
        name: "pm_saga_snapshots_loaded_total",
        kind: Kind::Counter,
        help: "Conversations loaded from a snapshot and the runes after it instead of all their runes.",
        label: None,
    },
    Metric {
        name: "pm_saga_snapshots_unreadable_total",
        kind: Kind::Counter,
        help: "Snapshots that did not decode (the conversation was folded from all its runes instead).",
        label: None,
    },
    Metric {
        name: "pm_sealed_refused_total",
        kind: Kind::Counter,
        help: "Sealed personal texts that did not open with their keys (moved to another event or altered): read as null.",
        label: None,
    },
    Metric {
        name: "pm_keys_made_total",
        kind: Kind::Counter,
        help: "Data keys of personal texts made, by how: with their party's first fact, by a statement of their own, or in a writer's transaction.",
        label: Some(("how", pm_infrastructure::keys::MADE)),
    },
    Metric {
        name: "pm_saga_recoveries_total",
        kind: Kind::Counter,
        help: "Saga recoveries: in-flight sessions restarted when this replica took the sagas over.",
        label: None,
    },
    Metric {
        name: "pm_processor_tail_lagged_total",
        kind: Kind::Counter,
        help: "Times a processor fell more than the log tail's buffer behind it (it then reads the store until it catches up).",
        label: None,
    },
    Metric {
        name: "pm_webhook_deliveries_total",
        kind: Kind::Counter,
        help: "Webhook delivery attempts, by outcome (delivered: a 2xx answer; failed: retried or paused).",
        label: Some(("outcome", &["delivered", "failed"])),
    },
    Metric {
        name: "pm_otlp_spans_exported_total",
        kind: Kind::Counter,
        help: "Spans the OTLP collector took (requests', turns' and tool calls'; zero unless OTEL_EXPORTER_OTLP_ENDPOINT is set).",
        label: None,
    },
    Metric {
        name: "pm_otlp_export_failures_total",
        kind: Kind::Counter,
        help: "OTLP exports the collector did not take (the turns' spans are exported again; requests' spans are lost).",
        label: None,
    },
    Metric {
        name: "pm_otlp_spans_dropped_total",
        kind: Kind::Counter,
        help: "Requests' spans dropped because the export queue was full.",
        label: None,
    },
    Metric {
        name: "pm_webhook_pauses_total",
        kind: Kind::Counter,
        help: "Webhook subscriptions paused because a delivery's retries ran out.",
        label: None,
    },
    Metric {
        name: "pm_webhooks_active",
        kind: Kind::Gauge,
        help: "Active webhook subscriptions being delivered by this replica (0 on the others).",
        label: None,
    },
    Metric {
        name: "pm_log_sightings_total",
        kind: Kind::Counter,
        help: "Reads of the log on PostgreSQL, by how they learned how far they may read: `gap_free` (the snapshot showed every position since the horizon) or `lock_table` (a gap: the floors of the appends in progress, from pg_locks).",
        label: Some(("horizon", pm_infrastructure::log::SIGHTINGS)),
    },
    Metric {
        name: "pm_log_tail_events_total",
        kind: Kind::Counter,
        help: "Events the process's log tail read and broadcast to its SSE streams.",
        label: None,
    },
    Metric {
        name: "pm_sse_catch_up_reads_total",
        kind: Kind::Counter,
        help: "Log reads of SSE streams behind the tail (resuming, or after a gap).",
        label: None,
    },
    Metric {
        name: "pm_sse_streams_lagged_total",
        kind: Kind::Counter,
        help: "SSE streams ended with event: lagged, having fallen too far behind the tail.",
        label: None,
    },
];

/// Describes every metric of the [`CATALOGUE`] and registers each at zero (for each known
/// label value). Call once, after the recorder is installed.
pub fn register() {
    for metric in CATALOGUE {
        describe(metric);
        match metric.label {
            // HTTP metrics have no known label values: their series come with requests.
            None if metric.name.starts_with("http_") => {}
            None => register_series(metric, Vec::new()),
            Some((label, values)) => {
                for value in values {
                    register_series(metric, vec![::metrics::Label::new(label, *value)]);
                }
            }
        }
    }
}

fn describe(metric: &Metric) {
    let (name, help) = (metric.name, metric.help);
    match metric.kind {
        Kind::Counter => ::metrics::describe_counter!(name, help),
        Kind::Gauge => ::metrics::describe_gauge!(name, help),
        Kind::Histogram => ::metrics::describe_histogram!(name, help),
    }
}

fn register_series(metric: &Metric, labels: Vec<::metrics::Label>) {
    let name = metric.name;
    match metric.kind {
        Kind::Counter => ::metrics::counter!(name, labels).increment(0),
        Kind::Gauge => ::metrics::gauge!(name, labels).set(0.0),
        // A registered histogram without samples renders its buckets at zero.
        Kind::Histogram => drop(::metrics::histogram!(name, labels)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_conventional() {
        let mut names: Vec<_> = CATALOGUE.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOGUE.len());
        for m in CATALOGUE {
            assert_eq!(
                m.name.ends_with("_total"),
                m.kind == Kind::Counter,
                "{}",
                m.name
            );
        }
    }
}
