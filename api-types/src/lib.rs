//! # pm-api-types — the wire types of project-manager's HTTP API
//!
//! What the service serializes and pm-client reads back, in one place, so that the client
//! does not depend on the service's application layer (its command bus, caches and
//! storage formats) to reuse them:
//!
//! - [`commands`]: the request bodies of the command API.
//! - [`views`]: what the query side answers (pages, conversations, tasks, statistics,
//!   the sagas' rows, processors).
//! - [`fact`]: logged events read back as the domain facts they record.
//! - [`webhooks`]: subscriptions as the admin API shows them, and the Standard Webhooks
//!   [`signature`](webhooks::signature) the service signs with and receivers verify.
//!
//! With the `openapi` feature the types derive `utoipa::ToSchema`: the service's OpenAPI
//! document describes exactly these types.

pub mod commands;
pub mod fact;
pub mod views;
pub mod webhooks;
