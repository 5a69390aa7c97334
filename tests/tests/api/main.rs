//! Black-box tests: the real service on port 0 against SQLite and a fresh PostgreSQL
//! database, driven over HTTP.

mod documented;
mod reads;
mod support;

mod analysts;
mod auth;
mod boundary;
mod commands;
mod concurrency;
mod doorbells;
mod durability;
mod edges;
mod errors;
mod events;
mod exactly_once;
mod idempotency;
mod jwt;
mod mcp;
mod openapi;
mod openapi_errors;
mod openapi_spec;
mod ops;
mod ops_conventions;
mod organizations;
mod pagination;
mod poison;
mod policies;
mod principals;
mod processors;
mod queries;
mod readme;
mod rebuild;
mod relay;
mod saga_deadlines;
mod sagas;
mod sessions;
mod speak_for;
mod sse;
mod sse_fanout;
mod stats;
mod status;
mod task_queries;
mod tools;
mod webhooks;
mod workers;
