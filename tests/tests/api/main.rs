//! Black-box tests: the real service on port 0 against SQLite and a fresh PostgreSQL
//! database, driven over HTTP.

mod support;

mod auth;
mod commands;
mod concurrency;
mod durability;
mod edges;
mod errors;
mod events;
mod idempotency;
mod ops;
mod sse;
