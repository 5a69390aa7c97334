//! The read model's pure logic: how a batch of facts becomes the rows to insert and the
//! summed changes per task and conversation ([`plan`]). The SQL that applies a plan, and
//! the per-event path it is checked against, live in the infrastructure crate.

pub mod plan;

/// The name of the read-model projection (and of its processor).
pub const READ_MODEL: &str = "read_model";
