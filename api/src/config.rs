//! Typed configuration: environment variables with matching command-line flags. A bad
//! setting stops the start with a message naming it.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::auth::Tokens;
use crate::logging::LogFormat;

/// The largest saga setting (seconds, or errors): about three years.
const MAX_SAGA_SETTING: u64 = 100_000_000;

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

    /// The master key of personal data (TRUST.md "Forgetting a person"): 32 bytes in
    /// standard base64 (`openssl rand -base64 32`) that wrap every actor's and
    /// conversation's data key in the database. Once set, the service refuses to start
    /// without it, or with another one.
    #[arg(long, env = "PM_MASTER_KEY", hide_env_values = true)]
    pub master_key: Option<String>,

    /// The master key before a rotation: with the new one in `PM_MASTER_KEY`, one start
    /// rewraps every data key with the new one; then this setting can go.
    #[arg(long, env = "PM_MASTER_KEY_PREVIOUS", hide_env_values = true)]
    pub master_key_previous: Option<String>,

    /// A principals file (TRUST.md): `{"principals": [{"name", "token_sha256", "roles",
    /// "organizations", "actors"?}]}`, read at start and again on `SIGHUP`.
    #[arg(long, env = "PM_PRINCIPALS_FILE")]
    pub principals_file: Option<std::path::PathBuf>,

    /// The identity provider's key set (JWKS) by URL: JWT bearer tokens are accepted.
    #[arg(long, env = "PM_JWT_JWKS_URL", conflicts_with = "jwt_jwks_file")]
    pub jwt_jwks_url: Option<String>,

    /// The identity provider's key set (JWKS) as a file, read again for a token whose key
    /// it does not hold.
    #[arg(long, env = "PM_JWT_JWKS_FILE")]
    pub jwt_jwks_file: Option<std::path::PathBuf>,

    /// The `iss` every JWT must carry (required with a key set).
    #[arg(long, env = "PM_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,

    /// The `aud` every JWT must carry (required with a key set).
    #[arg(long, env = "PM_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,

    /// Largest accepted request body in bytes.
    #[arg(long, env = "PM_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// NATS (`nats://127.0.0.1:4222`): agents' wakeup doorbells are published on it
    /// (`cmd.agent.<agent_id>.wakeup`, DELIVERY.md). Unset: off.
    #[arg(long, env = "PM_NATS_URL")]
    pub nats_url: Option<String>,

    /// The JetStream stream every fact and rune is relayed to (created when missing).
    #[arg(long, env = "PM_NATS_STREAM", default_value = "PROJECT_MANAGER")]
    pub nats_stream: String,

    /// The relay's subjects: `<prefix>.<event type>` (the stream covers `<prefix>.>`).
    #[arg(long, env = "PM_NATS_SUBJECT_PREFIX", default_value = "pm")]
    pub nats_subject_prefix: String,

    /// OTLP/HTTP (protobuf) collector base URL (`http://127.0.0.1:4318`): spans are exported
    /// to `<url>/v1/traces` — requests, and each turn (`invoke_agent`) and tool call
    /// (`execute_tool`) once it ended. Unset (with the next): no export, no cost. The
    /// exporter also reads `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`, and
    /// the resource `OTEL_RESOURCE_ATTRIBUTES`.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otel_exporter_otlp_endpoint: Option<String>,

    /// The traces URL itself, used as given (overrides the endpoint above for traces).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")]
    pub otel_exporter_otlp_traces_endpoint: Option<String>,

    /// The exported spans' `service.name`.
    #[arg(long, env = "OTEL_SERVICE_NAME", default_value = "project-manager")]
    pub otel_service_name: String,

    /// How long a sign-in to the operator console (`/console`) lasts, in seconds.
    #[arg(long, env = "PM_CONSOLE_SESSION_SECS", default_value_t = 28_800,
          value_parser = clap::value_parser!(u64).range(1..=2_592_000))]
    pub console_session_secs: u64,

    /// Where webhooks may be delivered, comma-separated host names, addresses and CIDR
    /// networks (then only those); empty: public addresses only (no loopback, private,
    /// link-local or other internal addresses).
    #[arg(long, env = "PM_WEBHOOK_ALLOWED_HOSTS", default_value = "")]
    pub webhook_allowed_hosts: String,

    /// Attempts of one webhook delivery before its subscription pauses.
    #[arg(long, env = "PM_WEBHOOK_MAX_ATTEMPTS", default_value_t = 12,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub webhook_max_attempts: u32,

    /// Milliseconds before the first retry of a failed webhook delivery; the wait
    /// doubles with each further failure.
    #[arg(long, env = "PM_WEBHOOK_RETRY_BASE_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub webhook_retry_base_ms: u64,

    /// The longest wait between two attempts of a webhook delivery, in seconds.
    #[arg(long, env = "PM_WEBHOOK_RETRY_MAX_SECS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub webhook_retry_max_secs: u64,

    /// Seconds a webhook receiver has to answer.
    #[arg(long, env = "PM_WEBHOOK_TIMEOUT_SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub webhook_timeout_secs: u64,

    /// `Host` names (or `host:port`) the MCP endpoint `/mcp` accepts, comma-separated
    /// (DNS-rebinding protection); empty: loopback only (`localhost`, `127.0.0.1`, `::1`).
    #[arg(
        long,
        env = "PM_MCP_ALLOWED_HOSTS",
        default_value = "",
        hide_default_value = true
    )]
    pub mcp_allowed_hosts: String,

    /// Browser origins `/mcp` accepts (`https://app.example.com:443`, `http://localhost:*`),
    /// comma-separated; empty: requests carrying `Origin` are not checked.
    #[arg(
        long,
        env = "PM_MCP_ALLOWED_ORIGINS",
        default_value = "",
        hide_default_value = true
    )]
    pub mcp_allowed_origins: String,

    /// MCP sessions (`Mcp-Session-Id`) one principal may hold open at once; one more
    /// `initialize` is answered `429 too_many_requests`.
    #[arg(long, env = "PM_MCP_SESSIONS_PER_PRINCIPAL", default_value_t = 16,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub mcp_sessions_per_principal: u64,

    /// Seconds an MCP session may go without a request before it ends.
    #[arg(long, env = "PM_MCP_SESSION_IDLE_SECS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub mcp_session_idle_secs: u64,

    /// Database connections in the pool. Each replica holds this many plus 2 (processor
    /// ownership, the LISTEN doorbell); replicas × (pool + 2) must stay below PostgreSQL's
    /// `max_connections` minus its reserved ones (a warning at start says how many fit).
    #[arg(long, env = "PM_DB_POOL_SIZE", default_value_t = 16)]
    pub db_pool_size: u32,

    /// HTTP connections open at once; one more is answered `503` and closed.
    #[arg(long, env = "PM_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,

    /// Milliseconds a connection may take to send a request's headers once it waits for
    /// one: closes slow-header (slowloris) connections, and keep-alive connections idle
    /// that long.
    #[arg(long, env = "PM_HEADER_READ_TIMEOUT_MS", default_value_t = 5_000)]
    pub header_read_timeout_ms: u64,

    /// Milliseconds a request's whole body may take to arrive once its headers have:
    /// beyond, `408 request_timeout` and the connection closes.
    #[arg(long, env = "PM_BODY_READ_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub body_read_timeout_ms: u64,

    /// Event streams one principal may hold open at once, and as many waiting claims:
    /// beyond, `429 too_many_requests`.
    #[arg(long, env = "PM_MAX_STREAMS_PER_PRINCIPAL", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_streams_per_principal: u64,

    /// Seconds requests in flight get to finish after SIGTERM; then every connection is
    /// closed and the process exits.
    #[arg(long, env = "PM_SHUTDOWN_GRACE_SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub shutdown_grace_secs: u64,

    /// Milliseconds a request waits for a database connection before answering `503`:
    /// short, so an outage answers at once (with `Retry-After`) instead of queueing.
    #[arg(long, env = "PM_DB_ACQUIRE_TIMEOUT_MS", default_value_t = 500)]
    pub db_acquire_timeout_ms: u64,

    /// How many times a command that loses an optimistic-concurrency race is tried.
    #[arg(long, env = "PM_COMMAND_ATTEMPTS", default_value_t = 8)]
    pub command_attempts: u32,

    /// Milliseconds between polls of the log by idle event streams (the in-process
    /// doorbell wakes them sooner for this replica's own writes).
    #[arg(long, env = "PM_LOG_POLL_MS", default_value_t = 250)]
    pub log_poll_ms: u64,

    /// Milliseconds the read-model projection waits after a partial batch before reading
    /// again: larger batches under load, at most this much extra read latency.
    #[arg(long, env = "PM_PROJECTION_LINGER_MS", default_value_t = 5)]
    pub projection_linger_ms: u64,

    /// Seconds a session waiting for the user (after a `NEED_INFORMATION` checkpoint)
    /// waits before it auto-decides: a turn `{kind: auto_decide}` for the root agent.
    #[arg(long, env = "PM_SESSION_TIMEOUT_SECS", default_value_t = 300)]
    pub session_timeout_secs: u64,

    /// Seconds a dispatched or streaming turn may go without progress before the watchdog
    /// ends it with `turn.error {error_type: timeout}`.
    #[arg(long, env = "PM_TURN_TIMEOUT_SECS", default_value_t = 600)]
    pub turn_timeout_secs: u64,

    /// Consecutive turn errors that suspend an active session (FCMP `failed`).
    #[arg(long, env = "PM_SESSION_ERROR_THRESHOLD", default_value_t = 3)]
    pub session_error_threshold: u32,

    /// A worker's lease on a claimed turn when the claim or heartbeat names none, in
    /// milliseconds (1000–600000).
    #[arg(long, env = "PM_TURN_LEASE_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(pm_domain::limits::LEASE_MS))]
    pub turn_lease_ms: u64,

    /// Tokens each new session may spend (workers report usage); reaching it suspends
    /// the session (`budget_exhausted`) until an operator adds budget. Unset: unlimited.
    #[arg(long, env = "PM_SESSION_TOKEN_BUDGET",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub session_token_budget: Option<u64>,

    /// Seconds a tool call waits for an approver before it times out (`tool.result`
    /// `timeout`, reason `approval_timeout`).
    #[arg(long, env = "PM_TOOL_APPROVAL_TIMEOUT_SECS", default_value_t = 300)]
    pub tool_approval_timeout_secs: u64,

    /// Seconds a tool call may execute when the worker gave it no `timeout_ms` (then
    /// `tool.result` `timeout`, reason `execution_timeout`).
    #[arg(long, env = "PM_TOOL_TIMEOUT_SECS", default_value_t = 600)]
    pub tool_timeout_secs: u64,

    /// What happens to a tool call no tool policy matches (TRUST.md "Tool policies"):
    /// `allow` (the worker's `requires_approval` decides), `require_approval` or `deny`.
    #[arg(long, env = "PM_TOOL_DEFAULT_ACTION", value_parser = tool_action,
          default_value = "require_approval")]
    pub tool_default_action: pm_domain::tool_policy::PolicyAction,

    /// Claims of one turn that may expire before the turn ends in `turn.error`
    /// (`lease_expired`).
    #[arg(long, env = "PM_TURN_MAX_CLAIMS", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub turn_max_claims: u32,

    /// The actor the root agent acts for in conversations without an `ai` participant
    /// (its messages then speak for the root agent); unset, any `ai` author does.
    #[arg(long, env = "PM_DEFAULT_LLM_ACTOR")]
    pub default_llm_actor: Option<uuid::Uuid>,

    /// Memory for the in-process caches, in MiB: half for aggregates (state and lock per
    /// aggregate, for commands), an eighth for known entity ids (existence checks), an
    /// eighth for actors' kinds (the sagas'), a quarter for conversations' saga machines.
    /// Sized by per-entry estimates (see [`Caches`]). A full cache drops its least recently
    /// used entries (never one in use), never everything at once.
    #[arg(long, env = "PM_CACHE_MB", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub cache_mb: u64,

    /// Runes a conversation gains before its saga machines are snapshotted again (and at
    /// least a quarter of those the last snapshot holds): a conversation is loaded from its
    /// snapshot and the runes after it. `0` takes no new ones (those already stored are
    /// still loaded).
    #[arg(long, env = "PM_SAGA_SNAPSHOT_RUNES", default_value_t = 1_000)]
    pub saga_snapshot_runes: u64,

    /// Log format on stderr: `text` (human-readable) or `json` (one object per line).
    #[arg(long, env = "PM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

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
    /// Create or update the PostgreSQL role `pm_analyst_<ORGANIZATION>` (NOLOGIN: grant it
    /// to a login role) that may SELECT the read schema's views and sees only that
    /// organization's rows (row-level security), nothing of the log or the operational
    /// tables; migrates first, and exits. SQLite is single-tenant: refused there.
    AnalystRole {
        /// The organization, as conversations name it (at most 52 bytes: the role name
        /// must fit PostgreSQL's 63).
        organization: String,
    },
}

/// Entry limits of the in-process caches, from one budget in MiB.
///
/// The per-entry costs are estimates of the heap an entry holds with its map overhead,
/// on the generous side: an aggregate 1 KiB (a task with its checkpoints, a message
/// with its text), a known entity id 96 bytes, a conversation's saga machines 4 KiB (a
/// session, its agents, turns and plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caches {
    /// Aggregates kept between commands.
    pub aggregates: usize,
    /// Entity ids known to exist.
    pub entities: usize,
    /// Conversations whose saga machines are kept.
    pub conversations: usize,
    /// Actors whose kind the sagas keep.
    pub actor_kinds: usize,
    /// Data keys of personal data kept open.
    pub keys: usize,
}

impl Caches {
    /// Estimated bytes of a cached aggregate.
    pub const AGGREGATE_BYTES: u64 = 1024;
    /// Estimated bytes of a known entity id.
    pub const ENTITY_BYTES: u64 = 96;
    /// Estimated bytes of a conversation's saga machines.
    pub const CONVERSATION_BYTES: u64 = 4096;
    /// Estimated bytes of an actor's kind.
    pub const ACTOR_KIND_BYTES: u64 = 64;
    /// Estimated bytes of an open data key (the key, its id, the cache's own share).
    pub const KEY_BYTES: u64 = 128;

    /// The limits for `mib` MiB: half aggregates, a quarter conversations, an eighth
    /// entities, a sixteenth each actor kinds and data keys.
    pub fn of_mib(mib: u64) -> Self {
        let bytes = mib.saturating_mul(1 << 20);
        let count =
            |share: u64, each: u64| usize::try_from(share / each).unwrap_or(usize::MAX).max(16);
        Self {
            aggregates: count(bytes / 2, Self::AGGREGATE_BYTES),
            entities: count(bytes / 8, Self::ENTITY_BYTES),
            conversations: count(bytes / 4, Self::CONVERSATION_BYTES),
            actor_kinds: count(bytes / 16, Self::ACTOR_KIND_BYTES),
            keys: count(bytes / 16, Self::KEY_BYTES),
        }
    }
}

/// A setting that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `PM_AUTH_TOKENS` does not parse.
    #[error("PM_AUTH_TOKENS: {0}")]
    Tokens(String),
    /// JWT settings that cannot work.
    #[error("{0}")]
    Jwt(String),
    /// Open mode on a non-loopback address.
    #[error(
        "PM_BIND={0}: no PM_AUTH_TOKENS, PM_PRINCIPALS_FILE or PM_JWT_* are configured, so the \
         service runs open and refuses to listen on anything but a loopback address; configure \
         principals or bind to 127.0.0.1"
    )]
    OpenOnNonLoopback(SocketAddr),
    /// `PM_MAX_BODY_BYTES` is zero.
    #[error("PM_MAX_BODY_BYTES must be at least 1")]
    BodyLimit,
    /// A saga setting out of range.
    #[error("{0} must be between 1 and 100000000")]
    SagaSetting(&'static str),
    /// `DATABASE_URL` has an unsupported scheme.
    #[error("DATABASE_URL must start with postgres://, postgresql:// or sqlite: (got {0:?})")]
    DatabaseUrl(String),
    /// A master key setting is not 32 bytes of base64.
    #[error("{0}")]
    MasterKey(String),
    /// `PM_WEBHOOK_ALLOWED_HOSTS` does not parse.
    #[error(transparent)]
    WebhookHosts(#[from] pm_application::webhooks::policy::PolicyError),
}

/// The webhooks' settings (`PM_WEBHOOK_*`).
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Where deliveries may go.
    pub policy: pm_application::webhooks::policy::HostPolicy,
    /// How failed deliveries are retried.
    pub retry: pm_application::webhooks::dispatch::RetryPolicy,
    /// How long a receiver has to answer.
    pub timeout: Duration,
}

impl Config {
    /// A configuration with every default (for tests and embedding).
    pub fn defaults() -> Self {
        Self::parse_from(["project-manager"])
    }

    /// Where spans go, when an OTLP endpoint is set.
    pub fn otlp(&self) -> Option<pm_infrastructure::otlp::OtlpSettings> {
        pm_infrastructure::otlp::OtlpSettings::of(
            self.otel_exporter_otlp_endpoint.as_deref(),
            self.otel_exporter_otlp_traces_endpoint.as_deref(),
            &self.otel_service_name,
        )
    }

    /// The database URL in effect.
    pub fn database_url(&self) -> &str {
        self.database_url
            .as_deref()
            .filter(|u| !u.is_empty())
            .unwrap_or(pm_infrastructure::db::DEFAULT_SQLITE_URL)
    }

    /// The header-read (and keep-alive idle) timeout.
    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms.max(100))
    }

    /// How long a request waits for a database connection.
    pub fn db_acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.db_acquire_timeout_ms.max(50))
    }

    /// The poll interval of idle event streams.
    pub fn log_poll(&self) -> Duration {
        Duration::from_millis(self.log_poll_ms.max(10))
    }

    /// The MCP endpoint's `Host` and `Origin` checks.
    pub fn mcp(&self) -> crate::mcp::McpSettings {
        let list = |raw: &str| {
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        };
        crate::mcp::McpSettings {
            allowed_hosts: list(&self.mcp_allowed_hosts),
            allowed_origins: list(&self.mcp_allowed_origins),
            sessions_per_principal: usize::try_from(self.mcp_sessions_per_principal)
                .unwrap_or(usize::MAX),
            session_idle: Duration::from_secs(self.mcp_session_idle_secs),
        }
    }

    /// The settings the saga machines decide with.
    pub fn sagas(&self) -> pm_domain::saga::SagaConfig {
        let seconds = |s: u64| chrono::Duration::seconds(i64::try_from(s).unwrap_or(i64::MAX));
        pm_domain::saga::SagaConfig {
            default_llm_actor: self.default_llm_actor,
            session_timeout: seconds(self.session_timeout_secs),
            turn_timeout: seconds(self.turn_timeout_secs),
            error_threshold: self.session_error_threshold,
            max_claims: self.turn_max_claims,
            token_budget: self.session_token_budget,
            tool_approval_timeout: seconds(self.tool_approval_timeout_secs),
            tool_timeout: seconds(self.tool_timeout_secs),
        }
    }

    /// Where webhooks may go, how they are retried and how long a receiver has.
    ///
    /// # Errors
    /// [`ConfigError::WebhookHosts`] for a bad `PM_WEBHOOK_ALLOWED_HOSTS`.
    pub fn webhooks(&self) -> Result<WebhookSettings, ConfigError> {
        Ok(WebhookSettings {
            policy: pm_application::webhooks::policy::HostPolicy::parse(
                &self.webhook_allowed_hosts,
            )?,
            retry: pm_application::webhooks::dispatch::RetryPolicy {
                max_attempts: self.webhook_max_attempts,
                base: Duration::from_millis(self.webhook_retry_base_ms),
                cap: Duration::from_secs(self.webhook_retry_max_secs),
            },
            timeout: Duration::from_secs(self.webhook_timeout_secs),
        })
    }

    /// `PM_MASTER_KEY` and `PM_MASTER_KEY_PREVIOUS`, parsed.
    ///
    /// # Errors
    /// [`ConfigError::MasterKey`] naming the setting that is not 32 bytes of base64.
    pub fn master_keys(
        &self,
    ) -> Result<
        (
            Option<pm_infrastructure::keys::MasterKey>,
            Option<pm_infrastructure::keys::MasterKey>,
        ),
        ConfigError,
    > {
        use pm_infrastructure::keys::MasterKey;
        let parse = |setting, value: &Option<String>| {
            value
                .as_deref()
                .filter(|v| !v.trim().is_empty())
                .map(|v| MasterKey::parse(setting, v))
                .transpose()
                .map_err(|e| ConfigError::MasterKey(e.to_string()))
        };
        Ok((
            parse("PM_MASTER_KEY", &self.master_key)?,
            parse("PM_MASTER_KEY_PREVIOUS", &self.master_key_previous)?,
        ))
    }

    /// The entry limits of the caches that `PM_CACHE_MB` pays for.
    pub fn caches(&self) -> Caches {
        Caches::of_mib(self.cache_mb)
    }

    /// The identity provider's settings, when JWTs are accepted.
    ///
    /// # Errors
    /// [`ConfigError::Jwt`] when a key set lacks its issuer or audience, or they lack it.
    pub fn jwt(&self) -> Result<Option<crate::auth::jwt::JwtSettings>, ConfigError> {
        use crate::auth::jwt::{JwksSource, JwtSettings};
        let jwks = match (&self.jwt_jwks_url, &self.jwt_jwks_file) {
            (Some(url), _) => Some(JwksSource::Url(url.clone())),
            (None, Some(path)) => Some(JwksSource::File(path.clone())),
            (None, None) => None,
        };
        match (jwks, &self.jwt_issuer, &self.jwt_audience) {
            (Some(jwks), Some(issuer), Some(audience)) => Ok(Some(JwtSettings {
                jwks,
                issuer: issuer.clone(),
                audience: audience.clone(),
            })),
            (None, None, None) => Ok(None),
            (Some(_), _, _) => Err(ConfigError::Jwt(
                "PM_JWT_ISSUER and PM_JWT_AUDIENCE are required with PM_JWT_JWKS_URL or PM_JWT_JWKS_FILE".into(),
            )),
            (None, _, _) => Err(ConfigError::Jwt(
                "PM_JWT_ISSUER and PM_JWT_AUDIENCE need PM_JWT_JWKS_URL or PM_JWT_JWKS_FILE".into(),
            )),
        }
    }

    /// Checks the settings and parses the tokens.
    ///
    /// # Errors
    /// The first bad setting.
    pub fn validate(&self) -> Result<Tokens, ConfigError> {
        let tokens = Tokens::parse(&self.auth_tokens).map_err(ConfigError::Tokens)?;
        let jwt = self.jwt()?;
        let open = tokens.is_empty() && self.principals_file.is_none() && jwt.is_none();
        if open && !self.bind.ip().is_loopback() {
            return Err(ConfigError::OpenOnNonLoopback(self.bind));
        }
        if self.max_body_bytes == 0 {
            return Err(ConfigError::BodyLimit);
        }
        let sagas = [
            ("PM_SESSION_TIMEOUT_SECS", self.session_timeout_secs),
            ("PM_TURN_TIMEOUT_SECS", self.turn_timeout_secs),
            (
                "PM_TOOL_APPROVAL_TIMEOUT_SECS",
                self.tool_approval_timeout_secs,
            ),
            ("PM_TOOL_TIMEOUT_SECS", self.tool_timeout_secs),
            (
                "PM_SESSION_ERROR_THRESHOLD",
                u64::from(self.session_error_threshold),
            ),
        ];
        if let Some((name, _)) = sagas.iter().find(|(_, v)| *v == 0 || *v > MAX_SAGA_SETTING) {
            return Err(ConfigError::SagaSetting(name));
        }
        let url = self.database_url();
        if !(url.starts_with("postgres://")
            || url.starts_with("postgresql://")
            || url.starts_with("sqlite:"))
        {
            return Err(ConfigError::DatabaseUrl(pm_infrastructure::db::redacted(
                url,
            )));
        }
        self.webhooks()?;
        Ok(tokens)
    }
}

/// `PM_TOOL_DEFAULT_ACTION`: the domain's own action, by its wire name.
fn tool_action(raw: &str) -> Result<pm_domain::tool_policy::PolicyAction, String> {
    use pm_domain::tool_policy::PolicyAction;
    PolicyAction::parse(raw).ok_or_else(|| {
        let names: Vec<&str> = PolicyAction::ALL.iter().map(|a| a.as_str()).collect();
        format!("{raw:?} is not one of {}", names.join(", "))
    })
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
    fn the_cache_budget_is_split_by_estimated_entry_sizes() {
        let c = Config::defaults();
        assert_eq!(c.cache_mb, 64);
        assert_eq!(
            c.caches(),
            Caches {
                aggregates: 32_768,
                entities: 87_381,
                conversations: 4_096,
                actor_kinds: 65_536,
                keys: 32_768,
            }
        );
        let tiny = Caches::of_mib(1);
        assert_eq!((tiny.aggregates, tiny.conversations), (512, 64));
        let refused = Config::try_parse_from(["project-manager", "--cache-mb", "0"]);
        assert!(refused.is_err());
    }

    #[test]
    fn tool_default_action_is_require_approval_and_takes_the_wire_names() {
        use pm_domain::tool_policy::PolicyAction;
        assert_eq!(
            Config::defaults().tool_default_action,
            PolicyAction::RequireApproval
        );
        let deny = Config::try_parse_from(["project-manager", "--tool-default-action", "deny"]);
        assert_eq!(
            deny.map(|c| c.tool_default_action).ok(),
            Some(PolicyAction::Deny)
        );
        let bad = Config::try_parse_from(["project-manager", "--tool-default-action", "maybe"]);
        assert!(bad.is_err_and(|e| e.to_string().contains("require_approval")));
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
        c.webhook_allowed_hosts = "10.0.0.0/8, not a host".into();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("PM_WEBHOOK_ALLOWED_HOSTS"));
        let mut c = Config::defaults();
        c.auth_tokens = "root:0123456789".into();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("PM_AUTH_TOKENS"));
    }
}
