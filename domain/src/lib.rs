//! # pm-domain — the project-manager domain of TRANSITIONS.md
//!
//! Aggregates ([`actor::Actor`], [`conversation::Conversation`],
//! [`checkpoint::ConversationCheckpoint`], [`task::Task`], [`message::Message`]), their
//! commands, and the `project_manager.*` facts they emit, with exactly the field lists of
//! TRANSITIONS.md. The crate does no I/O: cross-aggregate preconditions go through the
//! [`lookup::Lookup`] port, time comes in on the commands. The [`saga`] module holds the
//! session, agent, turn, autonomy-loop and tool call machines driven by those facts.

// First, so that its `wire_enum!` macro is in scope for the modules below.
#[macro_use]
pub mod types;

pub mod actor;
pub mod aggregate;
pub mod catalogue;
pub mod checkpoint;
pub mod conversation;
pub mod error;
pub mod forgetting;
pub mod ids;
pub mod limits;
pub mod lookup;
pub mod message;
pub mod personal;
pub mod principal;
pub mod saga;
pub mod task;
pub mod text;
pub mod time;
pub mod tool_policy;

#[cfg(test)]
pub(crate) mod testing;

pub use aggregate::PmAggregate;
pub use error::DomainError;
pub use lookup::{CheckpointInfo, Entity, Lookup, LookupError, Services, TaskInfo};
pub use text::{Label, NonEmptyText};

/// The `event_version` of every fact this crate emits.
pub const EVENT_VERSION: &str = "1.0";
