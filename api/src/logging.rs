//! Logs: to stderr, filtered by `RUST_LOG`, as human-readable text (in colour only when
//! stderr is a terminal and `NO_COLOR` is unset) or as one JSON object per line
//! (`PM_LOG_FORMAT=json`). Lines logged while a request is served carry its `request`
//! span, whose `correlation_id` field is the request's correlation id.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The filter without `RUST_LOG`.
const DEFAULT_FILTER: &str = "info,sqlx::postgres::notice=warn";

/// How log lines are written (`PM_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (with
    /// `message`), and the enclosing `span` and `spans` with their fields.
    Json,
}

/// Installs the global subscriber. Call once, before anything logs.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(colour()).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

/// Whether text logs use colours: only on a terminal, and not with `NO_COLOR` set.
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
