//! The state every handler shares.

use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use pm_application::commands::Commands;
use pm_application::idempotency::Idempotency;
use pm_application::processor::ProcessorStatus;
use pm_application::queries::Queries;
use pm_application::sagas::SagaEngine;
use pm_infrastructure::idempotency::DbIdempotencyStore;
use pm_infrastructure::log::DbLogReader;
use pm_infrastructure::processor::liveness::DbReplicaLiveness;
use pm_infrastructure::processor::DbProcessorStore;
use pm_infrastructure::read_model::query::ReadModel;
use pm_infrastructure::sagas::{DbSagaStore, SagaReads};
use pm_infrastructure::store::PmStore;
use pm_infrastructure::Database;
use tokio_util::sync::CancellationToken;

use crate::auth::Authenticator;

/// Shared by all handlers; one `Arc` clone per use.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    /// Wraps the shared state.
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What every handler shares.
pub struct Shared {
    /// The command use cases.
    pub commands: Arc<Commands<PmStore>>,
    /// The global log.
    pub log: DbLogReader,
    /// The process's one reader of the log's tail, feeding every SSE stream.
    pub tail: pm_application::log::tail::LogTail,
    /// The `Idempotency-Key` use case (its store is purged hourly).
    pub idempotency: Idempotency<DbIdempotencyStore, DbReplicaLiveness, DbLogReader>,
    /// The database (health checks).
    pub db: Database,
    /// Every principal the service knows (reloaded on `SIGHUP`).
    pub auth: Arc<Authenticator>,
    /// Failed authentications per address.
    pub throttle: crate::auth::Throttle,
    /// Open event streams per principal.
    pub streams: Arc<crate::per_principal::PerPrincipal>,
    /// Waiting claims per principal.
    pub waiting_claims: Arc<crate::per_principal::PerPrincipal>,
    /// Prometheus rendering.
    pub metrics: PrometheusHandle,
    /// Cancelled at shutdown: long-lived streams end.
    pub shutdown: CancellationToken,
    /// How often idle event streams poll the log.
    pub log_poll: Duration,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// How long a request's body may take to arrive (`PM_BODY_READ_TIMEOUT_MS`).
    pub body_read_timeout: Duration,
    /// The MCP endpoint's `Host` and `Origin` checks.
    pub mcp: crate::mcp::McpSettings,
    /// The requests' spans' queue, when spans are exported (OTLP).
    pub spans: Option<pm_infrastructure::otlp::live::LiveSpans>,
    /// Queries over the read model and the saga rows, with read-your-writes.
    pub queries: Queries<ReadModel, SagaReads, DbProcessorStore, DbLogReader>,
    /// The organization of what a path names (TRUST.md "Organizations").
    pub owners: pm_infrastructure::owners::DbOwners,
    /// The commands' lookup (what a claim hands out, it remembers for the fenced commands
    /// that follow).
    pub lookup: pm_infrastructure::lookup::StoreLookup,
    /// The tool policies in force (TRUST.md "Tool policies").
    pub policies: pm_infrastructure::tool_policies::DbToolPolicies,
    /// `PM_TOOL_DEFAULT_ACTION`: what happens to a call no policy matches.
    pub tool_default_action: pm_domain::tool_policy::PolicyAction,
    /// Processor cursors, leases and parked events.
    pub processors: DbProcessorStore,
    /// The status of this replica's `read_model` runner.
    pub processor_status: tokio::sync::watch::Receiver<ProcessorStatus>,
    /// The status of this replica's `sagas` runner.
    pub saga_status: tokio::sync::watch::Receiver<ProcessorStatus>,
    /// The saga machines (operators' controls go through them).
    pub sagas: Arc<SagaEngine<DbSagaStore>>,
    /// This replica's id (processor owner, `Idempotency-Key` claimant).
    pub owner: String,
    /// How long a console sign-in lasts (`PM_CONSOLE_SESSION_SECS`).
    pub console_session_secs: u64,
    /// Console sessions signed out, on every replica.
    pub console_signouts: pm_infrastructure::console_signouts::DbConsoleSignouts,
    /// Whether the console's cookie is `Secure` (the service listens beyond loopback).
    pub console_secure_cookie: bool,
    /// Webhook subscriptions (admin).
    pub webhooks: crate::routes::webhooks::WebhookAdmin,
    /// The workers' claims and reports.
    pub workers: pm_application::workers::Workers<DbSagaStore>,
    /// `PM_TURN_LEASE_MS`.
    pub turn_lease_ms: u64,
}
