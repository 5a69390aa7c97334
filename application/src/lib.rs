//! # pm-application — the use cases of project-manager
//!
//! - [`bus`]: the command bus — loads an aggregate through a cqrs-es [`EventStore`](cqrs_es::EventStore),
//!   lets it handle the command, commits the facts, and retries a bounded number of
//!   times when it loses an optimistic-concurrency race.
//! - [`commands`]: one method per use case of the command API ([`commands::Commands`]),
//!   minting ids (UUIDv7, or UUIDv5 from external identities).
//! - [`log`]: the global event log's model: positions, logged events, filters and the
//!   reader port.
//! - [`idempotency`]: the `Idempotency-Key` use case — a pure state machine and the
//!   decorator that runs a command under it, over its key-store and liveness ports.
//! - [`fact`]: logged events read back as domain facts.
//! - [`processor`]: the processor runtime — named consumers of the global log with a
//!   stored cursor, a lease, parking of poison events and lag metrics.
//! - [`read_model`]: the read model's pure batch planner.
//! - [`queries`]: the query side's port and read-your-writes; [`views`]: what it answers.
//! - [`sagas`]: the session, agent, turn, plan and tool call machines as a processor, with durable
//!   deadlines and operators' controls.
//! - [`scope`]: which organizations a principal may see — the rule every reader and
//!   writer applies.
//! - [`clock`]: the injected clock.
//! - [`trace`]: the W3C trace context every fact and rune records.
//! - [`webhooks`]: webhook subscriptions, their signatures, the SSRF policy and the
//!   dispatcher that delivers them.

pub mod bus;
pub mod clock;
pub mod commands;
pub mod error;
pub mod fact;
pub mod idempotency;
pub mod log;
pub mod processor;
pub mod queries;
pub mod read_model;
pub mod sagas;
pub mod scope;
pub mod slots;
pub mod speaker;
pub mod trace;
pub mod views;
pub mod webhooks;
pub mod workers;

pub use error::AppError;
