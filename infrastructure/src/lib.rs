//! # pm-infrastructure — PostgreSQL and SQLite adapters
//!
//! - [`db`]: connecting to `postgres://…` or `sqlite://…` and migrating the schema.
//! - [`store`]: the cqrs-es event store ([`store::PmStore`]): loads through postgres-es /
//!   sqlite-es, appends each command's facts in one statement, serializes commands per
//!   aggregate in-process and keeps recently used aggregates in memory.
//! - [`doorbell`]: wakes log readers after appends, across replicas on PostgreSQL.
//! - [`lookup`]: the domain's lookup port over the event store.
//! - [`log`]: the global log reader (commit-safe order on PostgreSQL).
//! - [`owners`]: the organization of what a path names, and the SQL form of a scope.
//! - [`idempotency`]: the `Idempotency-Key` store.
//! - [`processor`]: processors' cursors, leases and parked events (every processor's
//!   storage).
//! - [`read_model`]: the analysts' read tables, the projection that maintains them,
//!   queries, and blue-green rebuilds.
//! - [`analysts`]: PostgreSQL roles of analysts who may read one organization's rows of the
//!   read schema (row-level security).
//! - [`sagas`]: the sagas' runes, read rows and durable deadlines, and their queries.
//! - [`sql`]: the two SQL dialects, and statements written once per dialect where they differ.
//! - [`relay`]: the JetStream relay; [`webhooks`]: webhook subscriptions and their HTTP
//!   deliveries.
//! - [`otlp`]: spans exported over OTLP/HTTP — requests as they end, turns and tool calls
//!   from the log once they ended.

pub mod analysts;
pub mod append;
pub mod console_signouts;
pub mod db;
pub mod doorbell;
pub mod forgetting;
pub mod idempotency;
pub mod keys;
pub mod log;
pub mod lookup;
pub mod otlp;
pub mod owners;
pub mod processor;
pub mod read_model;
pub mod relay;
pub mod sagas;
pub mod sql;
pub mod store;
pub mod tool_policies;
pub mod webhooks;

pub use db::{Database, DbError};

/// An error and its causes on one line: reqwest's and sqlx's own messages are only the
/// outermost ("error sending request"), and an operator needs the cause.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
