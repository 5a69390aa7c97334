//! One wiring function: [`Application::build`] connects and migrates the store, wires the
//! use cases and binds the listener (port 0 works: tests read [`Application::port`]);
//! [`Application::run_until`] serves until a shutdown signal, then lets in-flight
//! requests finish and closes event streams.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use pm_application::bus::CommandBus;
use pm_application::clock::{Clock, SystemClock};
use pm_application::commands::Commands;
use pm_application::idempotency::Idempotency;
use pm_application::log::tail::LogTail;
use pm_application::log::LogReader;
use pm_application::processor::{ProcessorRunner, ProcessorStore, RunnerOptions};
use pm_application::queries::Queries;
use pm_application::sagas::snapshot::SnapshotPolicy;
use pm_application::sagas::{DeadlineScheduler, SagaEngine, SagaProcessor, SAGAS};
use pm_domain::Services;
use pm_infrastructure::append::Appender;
use pm_infrastructure::idempotency::DbIdempotencyStore;
use pm_infrastructure::log::DbLogReader;
use pm_infrastructure::lookup::{KnownEntities, StoreLookup};
use pm_infrastructure::processor::liveness::{new_replica_id, DbReplicaLiveness};
use pm_infrastructure::processor::DbProcessorStore;
use pm_infrastructure::read_model::query::ReadModel;
use pm_infrastructure::read_model::rebuild::ensure_schema;
use pm_infrastructure::read_model::ReadModelProjection;
use pm_infrastructure::read_model::READ_MODEL;
use pm_infrastructure::sagas::{DbSagaStore, SagaReads};
use pm_infrastructure::store::PmStore;
use pm_infrastructure::{Database, DbError};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ConfigError};
use crate::routes;
use crate::state::{AppState, Shared};

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A bad setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database.
    #[error(transparent)]
    Database(#[from] DbError),
    /// The store answered a start-up step with an error.
    #[error("cannot start the processors: {0}")]
    Store(#[source] pm_application::AppError),
    /// The listener.
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, #[source] std::io::Error),
    /// The OTLP endpoint or an `OTEL_*` setting is not usable.
    #[error(transparent)]
    Otlp(pm_infrastructure::otlp::OtlpError),
    /// `PM_NATS_URL` is not a NATS address.
    #[error("PM_NATS_URL: {0}")]
    Nats(#[source] async_nats::ConnectError),
    /// The webhooks' HTTP client.
    #[error("webhooks: {0}")]
    Webhooks(String),
    /// The principals file or the identity provider's key set.
    #[error("principals: {0}")]
    Principals(String),
    /// The keys of personal data cannot be opened (a master key missing or wrong).
    #[error(transparent)]
    Keys(#[from] pm_infrastructure::keys::KeyError),
}

/// How often a replica confirms it still owns its processors and tries to take over the
/// others (a replica that dies hands its processors over within about this long).
const OWNERSHIP_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// How often the deadline scheduler looks for due deadlines.
const DEADLINE_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// The read-model runner of this replica.
type ReadModelRunner = ProcessorRunner<ReadModelProjection, DbProcessorStore, DbLogReader>;

/// The saga runner of this replica.
type SagaRunner = ProcessorRunner<SagaProcessor<DbSagaStore>, DbProcessorStore, DbLogReader>;
type RelayRunner =
    ProcessorRunner<pm_infrastructure::relay::NatsRelay, DbProcessorStore, DbLogReader>;
type AgentSpansRunner = ProcessorRunner<
    pm_infrastructure::otlp::agent_spans::AgentSpans,
    DbProcessorStore,
    DbLogReader,
>;

/// The OTLP export's parts, when an endpoint is set.
struct Tracing {
    /// The turns' and tool calls' spans, from the log.
    runner: AgentSpansRunner,
    /// The requests' spans' exporting task, and what stops it (after the last request).
    live: (tokio::task::JoinHandle<()>, CancellationToken),
}

/// Test hooks: failure injection for the black-box tests.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    /// While set, every projection batch fails after applying and before committing.
    pub fail_projection_before_commit: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// The clock of the commands and the sagas' deadlines (the system clock without it).
    pub clock: Option<Arc<dyn Clock>>,
}

/// A built, bound, not yet serving service.
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    state: AppState,
    limits: crate::serve::Limits,
    runner: ReadModelRunner,
    sagas: (SagaRunner, DeadlineScheduler<DbSagaStore, DbLogReader>),
    doorbell: (
        tokio::sync::watch::Receiver<u64>,
        tokio::sync::watch::Sender<u64>,
    ),
    /// NATS, when `PM_NATS_URL` is set: the agents' wakeup doorbells ring on it.
    nats: Option<async_nats::Client>,
    /// The JetStream relay's runner, and the relay whose stream it keeps, when
    /// `PM_NATS_URL` is set.
    relay: Option<(RelayRunner, Arc<pm_infrastructure::relay::NatsRelay>)>,
    /// The webhooks' dispatcher.
    webhooks: crate::webhooks::WebhookDispatcher,
    /// Spans over OTLP, when an endpoint is set.
    tracing: Option<Tracing>,
    /// The keys of personal data (the pass sealing an older log's texts uses them).
    keys: Arc<pm_infrastructure::keys::KeyStore>,
}

/// The process-wide Prometheus recorder (installed once, shared by every application in
/// the process — tests run several), with the [metrics catalogue](crate::metrics)
/// registered in it.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let buckets = [
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ];
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Suffix("_batch_events".into()),
                        &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0],
                    )
                })
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
            }
            crate::metrics::register();
            handle
        })
        .clone()
}

impl Application {
    /// Connects, migrates, wires and binds.
    ///
    /// # Errors
    /// [`StartError`] naming what failed.
    pub async fn build(config: &Config) -> Result<Self, StartError> {
        Self::build_with(config, Hooks::default()).await
    }

    /// [`Application::build`] with test hooks.
    ///
    /// # Errors
    /// [`StartError`] naming what failed.
    pub async fn build_with(config: &Config, hooks: Hooks) -> Result<Self, StartError> {
        let tokens = config.validate()?;
        let (master_key, previous_master_key) = config.master_keys()?;
        let per_principal = usize::try_from(config.max_streams_per_principal).unwrap_or(usize::MAX);
        let jwt = match config.jwt()? {
            Some(settings) => Some(
                crate::auth::jwt::JwtVerifier::new(settings)
                    .await
                    .map_err(StartError::Principals)?,
            ),
            None => None,
        };
        let auth = Arc::new(
            crate::auth::Authenticator::new(tokens, config.principals_file.clone(), jwt)
                .map_err(StartError::Principals)?,
        );
        let db = Database::connect(
            config.database_url(),
            config.db_pool_size,
            config.db_acquire_timeout(),
        )
        .await?;
        warn_about_capacity(&db).await;
        db.migrate().await?;
        ensure_schema(&db).await.map_err(DbError::Query)?;
        // Refuses to start on keys it could not open (a master key missing or wrong).
        let keys = Arc::new(
            pm_infrastructure::keys::KeyStore::open(
                &db,
                master_key,
                previous_master_key,
                config.caches().keys,
            )
            .await?,
        );
        // Appends ring `local`; the doorbell task forwards to `readers` (and across
        // replicas on PostgreSQL).
        let (local, local_rx) = tokio::sync::watch::channel(0u64);
        let (readers, readers_rx) = tokio::sync::watch::channel(0u64);
        let caches = config.caches();
        let known = Arc::new(KnownEntities::new(caches.entities));
        // The log's one writer: commands, the sagas and operators' controls append through it.
        let appender = Appender::new(db.clone(), keys.clone(), local);
        let store = PmStore::new(&db, appender.clone(), caches.aggregates, known.clone());
        let lookup = StoreLookup::new(db.clone(), known);
        let otlp = config
            .otlp()
            .map(|settings| {
                tracing::info!(url = %settings.traces_url, "exporting spans over OTLP");
                pm_infrastructure::otlp::Otlp::new(&settings, reqwest::Client::new())
            })
            .transpose()
            .map_err(StartError::Otlp)?;
        // The requests' and commands' spans: queued, sent by one task (stopped after the
        // last request).
        let live = otlp.clone().map(|otlp| {
            let stop = CancellationToken::new();
            let (spans, task) = pm_infrastructure::otlp::live::LiveSpans::start(otlp, stop.clone());
            (spans, (task, stop))
        });
        let sink = live.as_ref().map(|(spans, _)| {
            Arc::new(spans.clone()) as Arc<dyn pm_application::trace::genai::SpanSink>
        });
        let bus = CommandBus::new(
            store,
            Services::new(Arc::new(lookup.clone())),
            config.command_attempts,
        )
        .with_spans(sink.clone());
        let clock: Arc<dyn Clock> = hooks.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
        let commands = Commands::new(bus, clock.clone());
        let log = DbLogReader::new(db.clone(), keys.clone(), readers_rx);
        let owner = new_replica_id();
        let mut projection = ReadModelProjection::new(db.clone());
        if let Some(switch) = hooks.fail_projection_before_commit {
            projection = projection.with_failure_switch(switch);
        }
        // Take the projection now if nobody owns it, so the service is ready as soon as it
        // listens; the runner keeps it (or waits for the replica owning it to end). One
        // store, cloned: the replica owns every processor through one connection.
        let processors = DbProcessorStore::new(db.clone());
        for name in [READ_MODEL, SAGAS] {
            processors
                .claim(name, &owner)
                .await
                .map_err(StartError::Store)?;
        }
        // The process's one reader of the log's tail: SSE streams and the processors take
        // their events from it (each reads the store itself only while behind it).
        let tail = LogTail::new();
        let (runner, processor_status) = ProcessorRunner::new(
            Arc::new(projection),
            processors.clone(),
            log.clone(),
            runner_options(
                config,
                &owner,
                std::time::Duration::from_millis(config.projection_linger_ms),
            ),
        );
        let runner = runner.with_tail(tail.clone());
        let engine = Arc::new(
            SagaEngine::new(
                DbSagaStore::new(db.clone(), appender),
                config.sagas(),
                clock,
            )
            .with_cache_limits(caches.conversations, caches.actor_kinds)
            .with_snapshots(SnapshotPolicy {
                every: config.saga_snapshot_runes,
            })
            .with_spans(sink),
        );
        let (saga_runner, saga_status) = ProcessorRunner::new(
            Arc::new(SagaProcessor::new(engine.clone())),
            processors.clone(),
            log.clone(),
            // A human message becomes a dispatched turn at once.
            runner_options(config, &owner, std::time::Duration::ZERO),
        );
        let saga_runner = saga_runner.with_tail(tail.clone());
        let scheduler = DeadlineScheduler::new(
            engine.clone(),
            saga_status.clone(),
            log.clone(),
            DEADLINE_TICK,
        );
        let nats = match &config.nats_url {
            Some(url) => Some(
                crate::doorbells::connect(url)
                    .await
                    .map_err(StartError::Nats)?,
            ),
            None => None,
        };
        let relay = nats.clone().map(|nats| {
            let relay = pm_infrastructure::relay::NatsRelay::new(
                db.clone(),
                nats,
                pm_infrastructure::relay::RelaySettings {
                    stream: config.nats_stream.clone(),
                    prefix: config.nats_subject_prefix.clone(),
                },
            );
            let runner = ProcessorRunner::new(
                relay.clone(),
                processors.clone(),
                log.clone(),
                runner_options(config, &owner, std::time::Duration::ZERO),
            )
            .0
            .with_tail(tail.clone());
            (runner, relay)
        });
        let (tracing, spans) = match otlp.zip(live) {
            Some((otlp, (spans, live))) => {
                pm_infrastructure::otlp::agent_spans::AgentSpans::start_at_head(&db, &log)
                    .await
                    .map_err(StartError::Store)?;
                let runner = ProcessorRunner::new(
                    pm_infrastructure::otlp::agent_spans::AgentSpans::new(
                        db.clone(),
                        log.clone(),
                        otlp,
                    ),
                    processors.clone(),
                    log.clone(),
                    runner_options(config, &owner, std::time::Duration::ZERO),
                )
                .0
                .with_tail(tail.clone());
                (Some(Tracing { runner, live }), Some(spans))
            }
            None => (None, None),
        };
        let (webhooks, webhook_admin) = crate::webhooks::build(
            config,
            &db,
            processors.clone(),
            log.clone(),
            &owner,
            OWNERSHIP_CHECK,
        )?;
        let state = AppState::new(Shared {
            commands: Arc::new(commands),
            log: log.clone(),
            tail,
            queries: Queries::new(
                ReadModel::new(db.clone()),
                SagaReads::new(db.clone()),
                processors.clone(),
                log.clone(),
            )
            .with_local_runner(READ_MODEL, processor_status.clone())
            .with_local_runner(SAGAS, saga_status.clone()),
            owners: pm_infrastructure::owners::DbOwners::new(db.clone()),
            lookup,
            policies: pm_infrastructure::tool_policies::DbToolPolicies::new(db.clone()),
            tool_default_action: config.tool_default_action,
            processors,
            processor_status,
            saga_status,
            workers: pm_application::workers::Workers::new(
                engine.clone(),
                pm_application::workers::ClaimBell::new(),
            ),
            webhooks: webhook_admin,
            console_session_secs: config.console_session_secs,
            console_signouts: pm_infrastructure::console_signouts::DbConsoleSignouts::new(
                db.clone(),
            ),
            console_secure_cookie: !config.bind.ip().is_loopback(),
            turn_lease_ms: config.turn_lease_ms,
            sagas: engine,
            idempotency: Idempotency::new(
                DbIdempotencyStore::new(db.clone()),
                DbReplicaLiveness::new(db.clone()),
                log.clone(),
                owner.clone(),
            ),
            owner,
            db,
            auth,
            throttle: crate::auth::Throttle::default(),
            streams: crate::per_principal::PerPrincipal::new(
                "event streams",
                crate::metrics::refusal::STREAMS,
                per_principal,
            ),
            waiting_claims: crate::per_principal::PerPrincipal::new(
                "waiting claims",
                crate::metrics::refusal::WAITING_CLAIMS,
                per_principal,
            ),
            metrics: metrics_handle(),
            shutdown: CancellationToken::new(),
            log_poll: config.log_poll(),
            max_body_bytes: config.max_body_bytes,
            body_read_timeout: std::time::Duration::from_millis(config.body_read_timeout_ms),
            mcp: config.mcp(),
            spans,
        });
        let listener = bind(config.bind).map_err(|e| StartError::Bind(config.bind, e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| StartError::Bind(config.bind, e))?;
        Ok(Self {
            listener,
            addr,
            state,
            limits: crate::serve::Limits {
                max_connections: config.max_connections,
                header_read_timeout: config.header_read_timeout(),
                shutdown_grace: std::time::Duration::from_secs(config.shutdown_grace_secs),
            },
            runner,
            sagas: (saga_runner, scheduler),
            doorbell: (local_rx, readers),
            nats,
            relay,
            webhooks,
            tracing,
            keys,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The database in use.
    pub fn database(&self) -> &Database {
        &self.state.db
    }

    /// Serves until `shutdown` completes; then stops accepting, closes event streams,
    /// lets in-flight requests finish and closes the pool.
    ///
    /// # Errors
    /// An I/O error of the server.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let token = self.state.shutdown.clone();
        let db = self.state.db.clone();
        let purge = spawn_idempotency_purge(self.state.idempotency.store().clone(), token.clone());
        let upkeep = spawn_metrics_upkeep(self.state.metrics.clone(), token.clone());
        let monitor = spawn_log_monitor(self.state.log.clone(), token.clone());
        let tail = tokio::spawn(self.state.tail.clone().run(
            self.state.log.clone(),
            self.state.log_poll,
            token.clone(),
        ));
        let bell = spawn_claim_bell(&self.state, token.clone());
        let reload = spawn_principals_reload(self.state.auth.clone(), token.clone());
        let doorbells = self
            .nats
            .clone()
            .map(|nats| crate::doorbells::spawn(&self.state, nats, token.clone()));
        let relay = self.relay.map(|(runner, relay)| {
            // The stream is there before the first event, and again when NATS comes back.
            tokio::spawn(relay.keep_stream(token.clone()));
            tokio::spawn(runner.run(token.clone()))
        });
        let webhooks = tokio::spawn(self.webhooks.run(token.clone()));
        let (agent_spans, live_spans) = match self.tracing {
            Some(parts) => (
                Some(tokio::spawn(parts.runner.run(token.clone()))),
                Some(parts.live),
            ),
            None => (None, None),
        };
        let runner = tokio::spawn(self.runner.run(token.clone()));
        let (saga_runner, scheduler) = self.sagas;
        let saga_runner = tokio::spawn(saga_runner.run(token.clone()));
        let scheduler = tokio::spawn(scheduler.run(token.clone()));
        let (local, readers) = self.doorbell;
        pm_infrastructure::doorbell::spawn(
            db.clone(),
            self.keys.clone(),
            local,
            readers,
            token.clone(),
        );
        let old_texts = spawn_sealing_old_texts(db.clone(), self.keys, token.clone());
        let router = routes::router(self.state);
        tracing::info!(addr = %self.addr, store = db.kind(), "project-manager listening");
        let signal_token = token.clone();
        tokio::spawn(async move {
            shutdown.await;
            tracing::info!("shutting down: finishing in-flight requests");
            signal_token.cancel();
        });
        let served = crate::serve::serve(self.listener, router, self.limits, token.clone()).await;
        token.cancel();
        purge.abort();
        old_texts.abort();
        upkeep.abort();
        monitor.abort();
        tail.abort();
        bell.abort();
        reload.abort();
        if let Some(doorbells) = doorbells {
            doorbells.abort();
        }
        if let Some(relay) = relay {
            if let Err(e) = relay.await {
                tracing::error!(error = %e, "the NATS relay failed");
            }
        }
        if let Some(agent_spans) = agent_spans {
            if let Err(e) = agent_spans.await {
                tracing::error!(error = %e, "the OTLP span exporter failed");
            }
        }
        // Every request has ended: the last requests' spans go out.
        if let Some((task, stop)) = live_spans {
            stop.cancel();
            if let Err(e) = task.await {
                tracing::error!(error = %e, "the OTLP request span exporter failed");
            }
        }
        for (task, name) in [
            (runner, "read-model processor"),
            (saga_runner, "saga processor"),
            (scheduler, "deadline scheduler"),
            (webhooks, "webhook dispatcher"),
        ] {
            if let Err(e) = task.await {
                tracing::error!(error = %e, task = name, "a background task failed");
            }
        }
        db.close().await;
        served
    }
}

/// A processor runner's options on this replica: batches of 500, the log's poll interval,
/// the ownership check; `linger` is how long a runner waits to fill a batch.
fn runner_options(config: &Config, owner: &str, linger: std::time::Duration) -> RunnerOptions {
    RunnerOptions {
        batch_size: 500,
        poll_interval: config.log_poll(),
        ownership_check: OWNERSHIP_CHECK,
        owner: owner.to_string(),
        linger,
    }
}

/// Says how many replicas of this pool size fit PostgreSQL's `max_connections`, and warns
/// when fewer than two do (a second replica, or a rolling restart, would run out).
async fn warn_about_capacity(db: &Database) {
    match db.capacity().await {
        Ok(Some(c)) if c.replicas < 2 => tracing::warn!(
            max_connections = c.max_connections,
            reserved = c.reserved,
            per_replica = c.per_replica,
            "PostgreSQL's max_connections ({}) minus {} reserved fits {} replica(s) holding {} \
             connections each (PM_DB_POOL_SIZE + 2): lower PM_DB_POOL_SIZE or raise max_connections",
            c.max_connections,
            c.reserved,
            c.replicas,
            c.per_replica
        ),
        Ok(Some(c)) => tracing::info!(
            max_connections = c.max_connections,
            per_replica = c.per_replica,
            replicas_that_fit = c.replicas,
            "database connection capacity"
        ),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "could not read PostgreSQL's max_connections"),
    }
}

/// A listener with a backlog deep enough for bursts of new connections (the default 128
/// drops SYNs under a burst, and each drop costs its client a one-second retransmit).
fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}

/// Reads the principals file again on each `SIGHUP` (TRUST.md): a removed token is refused
/// from the next request on; a bad file keeps the principals as they were and says why.
fn spawn_principals_reload(
    auth: Arc<crate::auth::Authenticator>,
    token: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut hangups = match signal(SignalKind::hangup()) {
                Ok(hangups) => hangups,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGHUP: the principals file is read only at start");
                    return;
                }
            };
            loop {
                tokio::select! {
                    () = token.cancelled() => return,
                    got = hangups.recv() => if got.is_none() { return },
                }
                match auth.reload() {
                    Ok(tokens) => tracing::info!(tokens, "SIGHUP: principals reloaded"),
                    Err(e) => {
                        tracing::error!(error = %e, "SIGHUP: the principals file is not valid; the principals stay as they were")
                    }
                }
            }
        }
        #[cfg(not(unix))]
        token.cancelled().await;
    })
}

fn spawn_idempotency_purge(
    store: DbIdempotencyStore,
    token: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                _ = tick.tick() => {
                    if let Err(e) = store.purge_expired().await {
                        tracing::warn!(error = %e, "could not purge expired idempotency keys");
                    }
                }
            }
        }
    })
}

/// Seals the texts an earlier version wrote in the clear, beside the service (readers open
/// clear and sealed texts alike); a store error retries it from where it stood.
fn spawn_sealing_old_texts(
    db: Database,
    keys: Arc<pm_infrastructure::keys::KeyStore>,
    token: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match pm_infrastructure::keys::old_texts::seal_old_texts(&db, &keys).await {
                Ok(sealed) => {
                    if sealed.events > 0 || sealed.left > 0 {
                        tracing::info!(
                            sealed = sealed.events,
                            left_in_the_clear = sealed.left,
                            done = sealed.done,
                            "sealed the texts an earlier version wrote in the clear"
                        );
                    }
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "sealing older texts failed; retrying");
                    tokio::select! {
                        _ = token.cancelled() => break,
                        _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
                    }
                }
            }
        }
    })
}

/// Publishes the log's head and how long an append has held the log back, every second
/// (`pm_log_head_position`, `pm_log_held_back_seconds`).
fn spawn_log_monitor(log: DbLogReader, token: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                _ = tick.tick() => {
                    if let Ok(head) = log.head().await {
                        metrics::gauge!("pm_log_head_position").set(head.value() as f64);
                    }
                    if let Ok(held) = log.held_back().await {
                        let seconds = held.map_or(0.0, |d| d.as_secs_f64());
                        metrics::gauge!("pm_log_held_back_seconds").set(seconds);
                    }
                }
            }
        }
    })
}

/// Drains recorded histogram samples into their buckets every few seconds, so memory stays
/// flat when nobody scrapes `/metrics`.
fn spawn_metrics_upkeep(
    handle: PrometheusHandle,
    token: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                _ = tick.tick() => handle.run_upkeep(),
            }
        }
    })
}

/// Rings the workers' claim bell whenever the log's tail shows a rune that may have made a
/// turn claimable (on any replica: the tail reads the shared log), so long-polling
/// claimants wake within milliseconds without polling the database each. It follows the
/// tail only while claimants wait (the tail reads nothing but the head otherwise).
fn spawn_claim_bell(state: &AppState, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    use tokio::sync::broadcast::error::RecvError;
    let bell = state.workers.bell().clone();
    let tail = state.tail.clone();
    // On shutdown, waiting claims are answered at once (TRUST.md: nothing holds a
    // SIGTERM longer than it must).
    let stopping = (bell.clone(), shutdown.clone());
    tokio::spawn(async move {
        stopping.1.cancelled().await;
        stopping.0.stop();
    });
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = bell.wanted() => {}
            }
            let mut batches = tail.subscribe();
            bell.set_armed(true);
            loop {
                if bell.waiting() == 0 {
                    // Disarm first: a claimant entering from here on waits for the next
                    // arming; one that entered before is counted by the look that follows.
                    bell.set_armed(false);
                    if bell.waiting() == 0 {
                        break;
                    }
                    bell.set_armed(true);
                }
                let batch = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    batch = batches.recv() => batch,
                    // Look again whether anyone still waits.
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => continue,
                };
                match batch {
                    Ok(batch) => {
                        let types = batch.events.iter().map(|e| e.event_type.as_str());
                        if pm_application::workers::ClaimBell::rings_for(types) {
                            bell.ring();
                        }
                    }
                    // Behind: whatever was missed may have made turns claimable.
                    Err(RecvError::Lagged(_)) => bell.ring(),
                    Err(RecvError::Closed) => return,
                }
            }
        }
    })
}
