//! Deadlines are data: a row (instance, kind, due_at, epoch) written with the transition
//! that arms it; a due row comes back as [`super::Input::DeadlineDue`] and does nothing
//! when its epoch no longer matches the instance's (CAS gating, L0 §3.2).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::rune::{Instance, Recorded};

wire_enum! {
    /// What a deadline guards.
    DeadlineKind {
        /// A session waiting for the user auto-decides (FCMP §3); epoch = its wait epoch.
        SessionTimeout = "session_timeout",
        /// The turn watchdog (L0 §3.6, §8); epoch = the turn's watchdog epoch.
        TurnTimeout = "turn_timeout",
    }
}

/// A deadline row. There is at most one per (instance, kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadline {
    /// The instance it fires at.
    pub instance: Instance,
    /// What it guards.
    pub kind: DeadlineKind,
    /// When it falls due.
    #[serde(with = "crate::time")]
    pub due_at: DateTime<Utc>,
    /// The instance's epoch when it was armed.
    pub epoch: i64,
}

/// A change to the deadline rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum DeadlineOp {
    /// Write the row, replacing the one of the same (instance, kind).
    Arm(Deadline),
    /// Delete the row of (instance, kind), if any.
    Disarm {
        /// The instance.
        instance: Instance,
        /// The kind.
        kind: DeadlineKind,
    },
}

impl DeadlineOp {
    /// The row it concerns.
    pub fn key(&self) -> (Instance, DeadlineKind) {
        match self {
            Self::Arm(d) => (d.instance, d.kind),
            Self::Disarm { instance, kind } => (*instance, *kind),
        }
    }
}

/// What one input did: the runes to record, in order, and the deadline operations (at
/// most one per row: the last decision wins).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Runes, in the order they were emitted (and applied).
    pub runes: Vec<Recorded>,
    /// Deadline operations, at most one per (instance, kind).
    pub deadlines: Vec<DeadlineOp>,
}

impl Outcome {
    /// Whether the input changed nothing.
    pub fn is_empty(&self) -> bool {
        self.runes.is_empty() && self.deadlines.is_empty()
    }

    /// Adds a deadline operation, replacing an earlier one for the same row.
    pub(crate) fn push_deadline(&mut self, op: DeadlineOp) {
        let key = op.key();
        self.deadlines.retain(|d| d.key() != key);
        self.deadlines.push(op);
    }
}
