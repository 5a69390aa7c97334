//! # project-manager — the HTTP service
//!
//! The axum router of API.md (commands, the event log as JSON and SSE, operations), its
//! extractors, role-based auth, problem+json errors, metrics and OpenAPI document, and the
//! one wiring function [`app::Application::build`]. The `project-manager` binary is a thin
//! `main` over it.

pub mod app;
pub mod asyncapi;
pub mod auth;
pub mod body_deadline;
pub mod cli;
pub mod config;
pub mod console;
pub mod doorbells;
pub mod error;
pub mod extract;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod logging;
pub mod mcp;
pub mod metrics;
pub mod open_mode;
pub mod openapi;
pub mod per_principal;
pub mod routes;
pub mod serve;
pub mod state;
pub mod trace;
pub mod webhooks;

pub use app::Application;
pub use config::Config;
