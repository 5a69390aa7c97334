//! Typed configuration: environment variables with matching command-line flags. A bad
//! setting stops the start with a message naming it.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::auth::Tokens;

/// project-manager: an event-sourced CQRS service for conversations, checkpoints, tasks
/// and messages.
#[derive(Debug, Clone, Parser)]
#[command(name = "project-manager", version, about)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "PM_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,

    /// `postgres://…` or `sqlite://…`; without it an embedded SQLite file
    /// `data/project-manager.db` is used (created on first start).
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,

    /// Bearer tokens per role: `role:token,role:token,…` (roles ingress, llm, analyst,
    /// admin). Without tokens the service runs open, on a loopback address only.
    #[arg(
        long,
        env = "PM_AUTH_TOKENS",
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub auth_tokens: String,

    /// Largest accepted request body in bytes.
    #[arg(long, env = "PM_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Database connections in the pool.
    #[arg(long, env = "PM_DB_POOL_SIZE", default_value_t = 32)]
    pub db_pool_size: u32,

    /// How many times a command that loses an optimistic-concurrency race is tried.
    #[arg(long, env = "PM_COMMAND_ATTEMPTS", default_value_t = 8)]
    pub command_attempts: u32,

    /// Milliseconds between polls of the log by idle event streams (the in-process
    /// doorbell wakes them sooner for this replica's own writes).
    #[arg(long, env = "PM_LOG_POLL_MS", default_value_t = 250)]
    pub log_poll_ms: u64,

    /// Milliseconds the read-model projection waits after a partial batch before reading
    /// again: larger batches under load, at most this much extra read latency.
    #[arg(long, env = "PM_PROJECTION_LINGER_MS", default_value_t = 20)]
    pub projection_linger_ms: u64,

    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Run the HTTP service (the default).
    Serve,
    /// Migrate the database schema and exit.
    Migrate,
    /// Rebuild a projection from the start of the log into fresh tables, then swap them in
    /// (blue-green: running services keep serving the old tables meanwhile), and exit.
    Rebuild {
        /// The projection (`read_model`).
        name: String,
    },
}

/// A setting that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `PM_AUTH_TOKENS` does not parse.
    #[error("PM_AUTH_TOKENS: {0}")]
    Tokens(String),
    /// Open mode on a non-loopback address.
    #[error(
        "PM_BIND={0}: no PM_AUTH_TOKENS are configured, so the service runs open and \
         refuses to listen on anything but a loopback address; configure tokens or bind to 127.0.0.1"
    )]
    OpenOnNonLoopback(SocketAddr),
    /// `PM_MAX_BODY_BYTES` is zero.
    #[error("PM_MAX_BODY_BYTES must be at least 1")]
    BodyLimit,
    /// `DATABASE_URL` has an unsupported scheme.
    #[error("DATABASE_URL must start with postgres://, postgresql:// or sqlite: (got {0:?})")]
    DatabaseUrl(String),
}

impl Config {
    /// A configuration with every default (for tests and embedding).
    pub fn defaults() -> Self {
        Self::parse_from(["project-manager"])
    }

    /// The database URL in effect.
    pub fn database_url(&self) -> &str {
        self.database_url
            .as_deref()
            .filter(|u| !u.is_empty())
            .unwrap_or(pm_infrastructure::db::DEFAULT_SQLITE_URL)
    }

    /// The poll interval of idle event streams.
    pub fn log_poll(&self) -> Duration {
        Duration::from_millis(self.log_poll_ms.max(10))
    }

    /// Checks the settings and parses the tokens.
    ///
    /// # Errors
    /// The first bad setting.
    pub fn validate(&self) -> Result<Tokens, ConfigError> {
        let tokens = Tokens::parse(&self.auth_tokens).map_err(ConfigError::Tokens)?;
        if tokens.is_open() && !self.bind.ip().is_loopback() {
            return Err(ConfigError::OpenOnNonLoopback(self.bind));
        }
        if self.max_body_bytes == 0 {
            return Err(ConfigError::BodyLimit);
        }
        let url = self.database_url();
        if !(url.starts_with("postgres://")
            || url.starts_with("postgresql://")
            || url.starts_with("sqlite:"))
        {
            return Err(ConfigError::DatabaseUrl(url.to_string()));
        }
        Ok(tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_mode_refuses_non_loopback_addresses() {
        let mut c = Config::defaults();
        assert!(c.validate().is_ok());
        c.bind = "0.0.0.0:8080".parse().expect("addr");
        assert!(matches!(
            c.validate(),
            Err(ConfigError::OpenOnNonLoopback(_))
        ));
        c.auth_tokens = "admin:0123456789".into();
        assert!(c.validate().is_ok());
    }

    #[test]
    fn bad_settings_are_named() {
        let mut c = Config::defaults();
        c.database_url = Some("mysql://x".into());
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("DATABASE_URL"));
        let mut c = Config::defaults();
        c.auth_tokens = "root:0123456789".into();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("PM_AUTH_TOKENS"));
    }
}
