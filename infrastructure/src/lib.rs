//! # pm-infrastructure — PostgreSQL and SQLite adapters
//!
//! - [`db`]: connecting to `postgres://…` or `sqlite://…` and migrating the schema.
//! - [`store`]: the cqrs-es event store ([`store::PmStore`]): loads through postgres-es /
//!   sqlite-es, appends each command's facts in one statement, serializes commands per
//!   aggregate in-process and keeps recently used aggregates in memory.
//! - [`doorbell`]: wakes log readers after appends, across replicas on PostgreSQL.
//! - [`lookup`]: the domain's lookup port over the event store.
//! - [`log`]: the global log reader (commit-safe order on PostgreSQL).
//! - [`idempotency`]: the `Idempotency-Key` store.
//! - [`read_model`]: the analysts' read tables, the projection that maintains them,
//!   processor leases and cursors, queries, and blue-green rebuilds.
//! - [`sql`]: one SQL text for both databases.

pub mod db;
pub mod doorbell;
pub mod idempotency;
pub mod log;
pub mod lookup;
pub mod read_model;
pub mod sql;
pub mod store;

pub use db::{Database, DbError};
