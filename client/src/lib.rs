//! # pm-client — the Rust client of project-manager
//!
//! One [`Client`] (cheap to clone) per service and token gives:
//!
//! - **Commands** — the six of the API, taking the service's own request bodies
//!   ([`RegisterActorInput`], …) and answering a [`Written`] domain fact with its log
//!   [`Position`]. Every call carries an `Idempotency-Key` (generated, or yours via
//!   [`CommandRequest::idempotency_key`]), the same on every retry, so a command runs at
//!   most once. Failures are retried with backoff and jitter only when that is safe and
//!   useful (`502`/`503`/`504`, connection failures, timeouts; honouring `Retry-After`),
//!   never on a `4xx` ([`RetryPolicy`]).
//! - **Reads** — every query of the API, typed ([`Reader`]), the sagas' sessions, agents,
//!   turns and anomalies included, with filters, pages and
//!   [`Reader::walk`] over all pages; read-your-writes with [`Client::after`] /
//!   [`Client::at`].
//! - **The log** — JSON pages ([`Client::events`]) and a follower over Server-Sent
//!   Events ([`Client::follow`]) that resumes with `Last-Event-ID` after a dropped
//!   connection, never yielding an event twice or skipping one. Events are typed
//!   ([`LogEvent`], [`EventContent`]).
//! - **Workers** — [`Worker`]: long-polls claims of turns and hands each out as a
//!   [`TurnHandle`] that renews its lease in the background, sends commands fenced by the
//!   claim (`PM-Turn-Id`, `PM-Turn-Epoch`) and fails fast once the claim is gone (`409
//!   turn_fenced`); shutdown releases held turns. The calls beneath it are
//!   [`Client::claim`], [`Client::heartbeat`], [`Client::release`],
//!   [`Client::report_error`], [`Client::report_usage`] and [`CommandRequest::fenced`].
//! - **Tool calls** — a claimed turn hands itself over to the model's tool calls
//!   ([`TurnHandle::report_tool_calls`]; its claim ends) and comes back, under a new
//!   claim, with every call's result ([`TurnHandle::tool_calls`]). Approvers follow the
//!   calls waiting for them and approve or deny ([`Client::approvals`], [`Approvals`]);
//!   an [`Executor`] runs the executing calls with your handler, reporting progress and
//!   results, each call once, and stops like a worker. The calls beneath:
//!   [`Client::report_tool_calls`], [`Client::approve_tool_call`],
//!   [`Client::deny_tool_call`], [`Client::report_tool_progress`],
//!   [`Client::report_tool_result`], [`Reader::tool_call`], [`Reader::tool_calls`].
//! - **Webhooks** — subscriptions ([`Client::create_webhook`], [`Client::webhooks`],
//!   [`Client::resume_webhook`], …) and, for a receiver, [`verify_webhook`]: a
//!   delivery's Standard Webhooks signature checked in one call.
//! - **Operator controls** — pause, resume, archive a session, kill an agent, interrupt a
//!   turn ([`Client::pause_session`], …, [`Client::interrupt_turn`]).
//! - **Who am I** — [`Client::me`]: the principal, roles and organizations the service
//!   takes this client's credential for.
//! - **Ids offline** — [`ids`]: the UUIDv5 derivations of external identities.
//! - **Errors** — one [`Error`]; the service's refusals carry its stable
//!   [`code`](Error::code) ([`codes`]).
//!
//! Configure with [`Client::builder`], or [`Client::from_env`] (`PM_URL`, `PM_TOKEN`).
//! The programs in `client/examples/` (`ingress`, `llm_service`, `approver`, `analyst`)
//! are complete versions of the sketches below (`llm_service` of the worker's and the
//! executor's).
//!
//! ## An ingress service (role `ingress`)
//!
//! Registers people, starts conversations and posts their messages. Deliveries are
//! retried upstream, so everything is keyed by external identities: a redelivery lands on
//! the same ids and writes nothing new.
//!
//! ```no_run
//! use pm_client::{label, text, ActorKind, AddMessageInput, Client, RegisterActorInput, StartConversationInput};
//!
//! # async fn run() -> Result<(), pm_client::Error> {
//! let client = Client::from_env()?;
//! let alice = client
//!     .register_actor(RegisterActorInput {
//!         kind: ActorKind::Human,
//!         display_name: text("Alice")?,
//!         external_identity: Some(label("github:alice")?),
//!     })
//!     .await?;
//! let conversation = client
//!     .start_conversation(StartConversationInput {
//!         actor_ids: vec![alice.entity.id],
//!         title: text("Fix the login bug")?,
//!         external_id: Some(label("org/repo#42")?),
//!         external_source: Some(label("github")?),
//!         status: None,
//!         organization: Some(label("acme")?),
//!     })
//!     .await?;
//! assert_eq!(conversation.entity.id, pm_client::ids::conversation_id("github", "org/repo#42"));
//! let message = client
//!     .add_message(conversation.entity.id, AddMessageInput {
//!         actor_id: alice.entity.id,
//!         content: text("Login fails with a 500")?,
//!         task_id: None,
//!         external_identity: Some(label("github-comment-991")?),
//!         time: None,
//!     })
//!     .idempotency_key("delivery-5f1c") // the upstream delivery id
//!     .await?;
//! println!("message {} ({:?})", message.entity.id, message.status);
//! # Ok(()) }
//! ```
//!
//! ## A worker (role `llm`)
//!
//! Claims the turns the sagas dispatch, one at a time per [`Worker`] (run several for
//! parallelism), and answers each with commands fenced by its claim: a conversation turn
//! ends with a checkpoint, a task turn with `WORK_COMPLETED`. The lease is renewed in the
//! background; a turn taken away (lease expired, interrupted) fails with `turn_fenced`.
//!
//! ```no_run
//! use pm_client::{codes, text, CheckpointType, Client, CreateConversationCheckpointInput,
//!     CreateTaskCheckpointInput, TaskCheckpointType, TurnHandle, Worker};
//!
//! async fn answer(turn: &TurnHandle) -> Result<(), pm_client::Error> {
//!     // … call the model with turn.context(), post its reply with turn.add_message(…) …
//!     match turn.turn().task_id {
//!         Some(task) => turn.create_task_checkpoint(task, CreateTaskCheckpointInput {
//!             checkpoint_type: TaskCheckpointType::WorkCompleted,
//!         }).await.map(drop),
//!         None => turn.create_conversation_checkpoint(CreateConversationCheckpointInput {
//!             checkpoint_type: CheckpointType::BeginWork,
//!             summary: text("Plan agreed")?,
//!         }).await.map(drop),
//!     }
//! }
//!
//! # async fn run() -> Result<(), pm_client::Error> {
//! let worker = Worker::builder(Client::from_env()?, "llm-1").build()?;
//! let stop = worker.clone();
//! tokio::spawn(async move {
//!     let _ = tokio::signal::ctrl_c().await;
//!     stop.shutdown().await; // next() answers None; held turns are released
//! });
//! while let Some(turn) = worker.next().await? {
//!     match answer(&turn).await {
//!         Ok(()) => turn.finish(),
//!         Err(e) if e.code() == Some(codes::TURN_FENCED) => {} // not ours any more
//!         Err(e) => drop(turn.report_error("worker_error", &e.to_string()).await),
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! ## Tools that need a person's approval (roles `llm`; `admin` or `ingress`)
//!
//! The worker reports the model's tool call and drops the turn; a person approves it; an
//! executor (here in the worker's process) runs it; the turn comes back to some worker
//! with the call's result.
//!
//! ```no_run
//! use pm_client::{Client, Executor, ToolCall, ToolResult, TurnHandle};
//!
//! async fn work(turn: TurnHandle) -> Result<(), pm_client::Error> {
//!     if turn.tool_calls().is_empty() {
//!         let call = ToolCall::new("call-1", "shell", serde_json::json!({"cmd": "cargo test"}))
//!             .requires_approval("runs a shell command");
//!         turn.report_tool_calls(call).await?; // the claim ends here
//!         return Ok(());
//!     }
//!     // Resumed: turn.tool_calls() has every call with its result; answer and complete.
//!     Ok(())
//! }
//!
//! # async fn run() -> Result<(), pm_client::Error> {
//! // The executor (role llm), beside the workers:
//! let executor = Executor::builder(Client::from_env()?).tools(["shell"]).build()?;
//! tokio::spawn({
//!     let executor = executor.clone();
//!     async move {
//!         executor
//!             .run(|call, run| async move {
//!                 let _ = run.stdout("running\n").await;
//!                 ToolResult::success(serde_json::json!({"exit_code": 0, "args": call.arguments}))
//!             })
//!             .await
//!     }
//! });
//! // The approver (role admin, or an ingress relaying a person; a tool policy may name
//! // others). The service records the token's principal as the approver:
//! let approvals = pm_client::Client::from_env()?.approvals();
//! for call in approvals.pending().await? {
//!     let note = pm_client::ApprovalNote::default().with_comment("looks safe");
//!     approvals.approve(&call, &note).await?;
//! }
//! executor.shutdown().await; // running calls get their grace to report
//! # Ok(()) }
//! ```
//!
//! ## The LLM service without claims (role `llm`)
//!
//! A turn nobody claims still starts on its agent's first message, unfenced, so a simple
//! service can follow its work feed — the turns the sagas dispatch to agents — read what
//! each turn is for, and answer with the plain commands: a conversation turn (a human
//! message to answer) ends with a checkpoint, a task turn reports progress on its task.
//!
//! ```no_run
//! use futures::StreamExt;
//! use pm_client::{text, CheckpointType, Client, CreateConversationCheckpointInput,
//!     CreateTaskCheckpointInput, EventContent, EventQuery, TaskCheckpointType,
//!     TurnDispatched, TurnInput, AGENT_TURN_DISPATCHED};
//!
//! # async fn run() -> Result<(), pm_client::Error> {
//! let client = Client::from_env()?;
//! let mut feed = client.follow(EventQuery::new().with_type(AGENT_TURN_DISPATCHED));
//! while let Some(event) = feed.next().await {
//!     let event = event?;
//!     let EventContent::Other { data, .. } = &event.content else { continue };
//!     let dispatched: TurnDispatched = data.parse()?;
//!     let turn = client.at(event.position.clone()).turn(dispatched.turn_id).await?;
//!     match turn.input {
//!         TurnInput::Message { message_id } => {
//!             // … answer the message as the conversation's ai actor, then decide:
//!             client
//!                 .create_conversation_checkpoint(turn.conversation_id, CreateConversationCheckpointInput {
//!                     checkpoint_type: CheckpointType::BeginWork,
//!                     summary: text(format!("Working on message {message_id}"))?,
//!                 })
//!                 .idempotency_key(format!("decide-{}", turn.id))
//!                 .causation_id(event.id().unwrap_or_default())
//!                 .await?;
//!         }
//!         TurnInput::Task { task_id } => {
//!             let started = client
//!                 .create_task_checkpoint(task_id, CreateTaskCheckpointInput {
//!                     checkpoint_type: TaskCheckpointType::WorkStarted,
//!                 })
//!                 .idempotency_key(format!("start-{}", turn.id))
//!                 .await?;
//!             let view = client.after(&started).task(task_id).await?;
//!             println!("task {task_id} is {}", view.task.status);
//!         }
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! ## An analyst's tool (role `analyst`)
//!
//! Reads: tasks by status, conversations with their latest checkpoint, statistics,
//! walking every page.
//!
//! ```no_run
//! use futures::TryStreamExt;
//! use pm_client::{Client, ConversationQuery, StatsGroup, TaskQuery, TaskStatus, TaskStatsView};
//!
//! # async fn run() -> Result<(), pm_client::Error> {
//! let read = Client::from_env()?.read();
//! for status in TaskStatus::all() {
//!     let tasks: Vec<_> = read.walk(TaskQuery::new().status(status).limit(500)).try_collect().await?;
//!     println!("{status}: {}", tasks.len());
//! }
//! let mut conversations = read.walk(ConversationQuery::new().organization("acme"));
//! while let Some(c) = conversations.try_next().await? {
//!     let latest = c.latest_checkpoint.map(|l| l.checkpoint_type.to_string());
//!     println!("{}: {}", c.conversation.title.as_str(), latest.unwrap_or_else(|| "-".into()));
//! }
//! if let TaskStatsView::All(stats) = read.task_stats(StatsGroup::All).await? {
//!     println!("{} tasks, p50 cycle time {:?} s", stats.total, stats.cycle_time.p50_seconds);
//! }
//! # Ok(()) }
//! ```

mod admin;
mod client;
pub mod codes;
mod commands;
mod controls;
mod error;
mod events;
mod http;
pub mod ids;
mod me;
mod position;
mod reads;
mod retry;
mod tool_policies;
mod tools;
mod turns;
pub mod webhooks;
mod worker;

pub use client::{Client, ClientBuilder, DEFAULT_URL};
pub use commands::{CommandRequest, WriteStatus, Written};
pub use controls::Controlled;
pub use error::{BoxError, Error, Problem, TransportKind};
pub use events::{
    EventAttributes, EventContent, EventPage, EventQuery, LogEvent, RawJson, Snapshot,
};
pub use me::Me;
pub use position::{InvalidPosition, Position};
pub use reads::{
    AgentQuery, AnomalyQuery, CheckpointQuery, ConversationQuery, ConversationTaskQuery, ListQuery,
    MessageQuery, Paging, Reader, SessionQuery, Shown, TaskQuery, ToolCallQuery, TurnQuery,
};
pub use retry::{is_retryable, parse_retry_after, RetryPolicy};
pub use tools::{
    ApprovalNote, Approvals, Executor, ExecutorBuilder, ToolBatch, ToolCall, ToolResult, ToolRun,
};
pub use turns::{ClaimContext, ClaimRequest, ClaimedTurn, Heartbeat, TraceContext, TurnFence};
pub use webhooks::{verify_webhook, verify_webhook_at};
pub use worker::{TurnHandle, Worker, WorkerBuilder};

// The service's own types: request bodies, facts and views (pm-api-types), enumerations
// and facts' rows (pm-domain).
pub use pm_api_types::commands::{
    AddMessageInput, CreateConversationCheckpointInput, CreateTaskCheckpointInput, CreateTaskInput,
    RegisterActorInput, StartConversationInput, ToolPolicyInput,
};
pub use pm_api_types::fact::Fact;
pub use pm_api_types::views::{
    AgentView, AnomalyInstance, AnomalyView, LeaseView, SessionView, ToolCallView, ToolResultView,
    TurnView,
};
pub use pm_api_types::views::{
    ConversationView, CycleTime, GroupKey, LatestCheckpoint, Page, ParkedEvent, ProcessorLag,
    ProcessorRecord, ProcessorReport, ReplicaView, RunnerView, StatsGroup, TaskCheckpointView,
    TaskCounts, TaskDetail, TaskStats, TaskStatsGroup, TaskStatsView, TaskView,
};
pub use pm_domain::actor::ActorRegistered;
pub use pm_domain::checkpoint::ConversationCheckpointCreated;
pub use pm_domain::conversation::ConversationStarted;
pub use pm_domain::message::MessageAdded;
pub use pm_domain::saga::rune::agent::names::AGENT_TURN_DISPATCHED;
pub use pm_domain::saga::rune::agent::TurnDispatched;
pub use pm_domain::saga::{
    AgentRole, AgentState, ConversationState, HeadStatus, SessionState, ToolCallState, ToolStatus,
    ToolStream, TurnInput, TurnKind, TurnState,
};
pub use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
pub use pm_domain::tool_policy::{Approver, PolicyAction, ToolPolicySet};
pub use pm_domain::types::{ActorKind, CheckpointType, TaskCheckpointType, TaskStatus};
pub use pm_domain::{Label, NonEmptyText};
pub use uuid::Uuid;

/// Text for the inputs' [`NonEmptyText`] fields.
///
/// ```
/// assert_eq!(pm_client::text("Alice").expect("not empty").as_str(), "Alice");
/// assert!(pm_client::text("  ").is_err());
/// ```
///
/// # Errors
/// [`Error::InvalidInput`] for empty or blank text (the service would answer `422`).
pub fn text(raw: impl Into<String>) -> Result<NonEmptyText, Error> {
    Ok(NonEmptyText::parse(raw)?)
}

/// Text for the inputs' [`Label`] fields (external ids and sources, external identities,
/// statuses, organizations: at most 1024 bytes).
///
/// ```
/// assert_eq!(pm_client::label("github").expect("a label").as_str(), "github");
/// assert!(pm_client::label("x".repeat(2000)).is_err());
/// ```
///
/// # Errors
/// [`Error::InvalidInput`] for empty, blank or too long text, or text with NUL.
pub fn label(raw: impl Into<String>) -> Result<Label, Error> {
    Ok(Label::parse(raw)?)
}
