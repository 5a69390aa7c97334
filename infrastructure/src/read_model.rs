//! The analysts' read model: relational tables derived from the global log by the
//! `read_model` projection, on PostgreSQL and SQLite alike.
//!
//! Tables live in generations (`rm_g<N>_<table>`); plain views (`conversations`, `tasks`,
//! …) point at the current generation, and the API and analysts read the views. A rebuild
//! replays the log into generation N+1 while N keeps serving, then swaps the views in one
//! transaction (blue-green). The supported SQL read schema is documented in
//! `docs/READ_MODEL.md`; on PostgreSQL, analysts of one organization read it through
//! row-level security ([`crate::analysts`]), which every start and rebuild re-applies.

mod batch;
mod error;
mod forget;
mod projection;
pub mod query;
pub mod rebuild;
pub mod schema;
mod skipping;
mod upgrade;

pub use projection::ReadModelProjection;

pub use pm_application::read_model::READ_MODEL;
