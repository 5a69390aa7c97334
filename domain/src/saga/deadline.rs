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
        /// A worker's claim of a turn (WORKERS.md, L0 §8); epoch = the claim's `turn_epoch`.
        /// A heartbeat moves its `due_at` (no rune); firing it fences the claim off.
        TurnLease = "turn_lease",
        /// A tool call waits for its approver (`PM_TOOL_APPROVAL_TIMEOUT_SECS`); on a
        /// `tool_call` instance, epoch 0: it acts only while the call awaits approval.
        ToolApproval = "tool_approval",
        /// A tool call executes (its `timeout_ms`, or `PM_TOOL_TIMEOUT_SECS`); on a
        /// `tool_call` instance, epoch 0: it acts only while the call executes.
        ToolExecution = "tool_execution",
        /// A batch's `resume_deadline` (L0 §3.6); on the turn, epoch = the batch's number.
        ToolResume = "tool_resume",
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

/// A worker's lease that must still be stored when an outcome is written: the outcome was
/// decided on it, and only the store knows whether a heartbeat kept it alive or a fenced
/// command ended it meanwhile (WORKERS.md: a report races an expiry or an interrupt races
/// a completion, and exactly one of them lands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseHeld {
    /// The turn.
    pub turn_id: uuid::Uuid,
    /// The claim's epoch.
    pub turn_epoch: i64,
    /// When set, the lease must also be live at this time (a report); unset, it only
    /// must not have been ended by a fenced command (an interrupt).
    pub live_at: Option<DateTime<Utc>>,
}

/// What one input did: the runes to record, in order, and the deadline operations (at
/// most one per row: the last decision wins).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Runes, in the order they were emitted (and applied).
    pub runes: Vec<Recorded>,
    /// Deadline operations, at most one per (instance, kind).
    pub deadlines: Vec<DeadlineOp>,
    /// Leases the outcome was decided on (see [`LeaseHeld`]).
    pub leases: Vec<LeaseHeld>,
}

impl Outcome {
    /// Whether the input changed nothing.
    pub fn is_empty(&self) -> bool {
        self.runes.is_empty() && self.deadlines.is_empty() && self.leases.is_empty()
    }

    /// Adds a deadline operation, replacing an earlier one for the same row.
    pub(crate) fn push_deadline(&mut self, op: DeadlineOp) {
        let key = op.key();
        self.deadlines.retain(|d| d.key() != key);
        self.deadlines.push(op);
    }
}
