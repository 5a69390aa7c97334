//! The `Idempotency-Key` policy as a pure state machine: given what is known so far of a
//! request and its key, the next thing to do. No I/O and no clock: the use case
//! ([`super::Idempotency`]) performs each [`Action`] and feeds what came of it back in.
//!
//! | known | action |
//! |---|---|
//! | arrived, the key runs here | 409 in use |
//! | arrived | run at once, unclaimed (the append writes the key's row) |
//! | ran unclaimed: appended, or failed (5xx) | answer (nothing to keep) |
//! | ran unclaimed: answered without a fact | record the answer |
//! | ran unclaimed: key taken | claim |
//! | recorded: written / the key had a row | answer / claim |
//! | claimed: no row before | run under the claim |
//! | claimed: row of another request | 422 reused |
//! | claimed: done | replay |
//! | claimed: pending, the key runs here | 409 in use |
//! | claimed: pending, older than the timeout or without owner | take over |
//! | claimed: pending on this replica, its request ended | take over |
//! | claimed: pending on another replica | ask whether it is alive |
//! | liveness: alive / gone | 409 in use / take over |
//! | take-over won | run under the claim |
//! | take-over lost, or the row vanished: again, up to [`MAX_CLAIMS`] claims | claim / 409 in use |
//! | ran claimed: appended / answered / failed | answer / complete / release |
//! | ran claimed: key taken (the claim was taken over meanwhile) | 409 in use |

use chrono::{DateTime, Utc};

use super::ports::{KeyRow, KeyState};
use super::{StoredResponse, CLAIM_TIMEOUT};

/// How many times one request claims a key before it answers `409` (each further claim
/// follows a lost race, which only another live request can cause).
pub const MAX_CLAIMS: u32 = 3;

/// What a command run said about its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunSaid {
    /// It appended a fact: its append wrote (or completed) the key's row.
    Appended,
    /// It answered without writing a fact: the answer is to be kept.
    Answered,
    /// Its append found the unclaimed key already has a row; nothing was written.
    KeyTaken,
    /// It failed without an answer worth keeping (5xx): a retry runs it again.
    Failed,
}

/// What is known at a step of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// The request has arrived; `running_here` when a request with its key runs on this
    /// replica.
    Arrived {
        /// Whether a request with the key runs here.
        running_here: bool,
    },
    /// The command ran without a claim.
    RanUnclaimed(RunSaid),
    /// Recording an unclaimed answer wrote the row (`true`) or found one (`false`).
    Recorded(bool),
    /// The claim inserted the key's row: the key is this request's.
    ClaimedNow,
    /// The claim found the key's row.
    Found {
        /// The row.
        row: KeyRow,
        /// Whether a request with the key runs on this replica.
        running_here: bool,
    },
    /// Whether the replica `owner` holding the pending claim is alive.
    Liveness {
        /// The claim's holder.
        owner: String,
        /// Its liveness.
        alive: bool,
    },
    /// Whether the take-over won; `claims` is how many claims this request made.
    TookOver {
        /// Won the compare-and-set.
        won: bool,
        /// Claims made so far.
        claims: u32,
    },
    /// The row vanished between claim and read; `claims` made so far.
    Vanished {
        /// Claims made so far.
        claims: u32,
    },
    /// The command ran under the claim.
    RanClaimed(RunSaid),
}

/// The next thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run the command at once without a claim.
    RunUnclaimed,
    /// Answer what the command answered; nothing more to do.
    Answer,
    /// Record the command's answer as the key's (an unclaimed key).
    Record,
    /// Claim the key (or read its row).
    Claim,
    /// Run the command under the claim this request holds.
    RunClaimed,
    /// Ask whether the replica holding the claim is alive.
    AskLiveness(String),
    /// Take over the abandoned claim held by `from`.
    TakeOver {
        /// The claim's holder.
        from: Option<String>,
    },
    /// Store the answer in the claimed row, then answer it.
    Complete,
    /// Give the claim up, then answer.
    Release,
    /// Replay the key's stored answer.
    Replay(StoredResponse),
    /// `422 idempotency_key_reused`.
    Reused,
    /// `409 idempotency_key_in_use`.
    InUse,
}

/// The next action given what is `known`, for a request whose hash is `request_hash`,
/// run by replica `replica`, at `now`.
pub fn decide(known: &Known, request_hash: &str, replica: &str, now: DateTime<Utc>) -> Action {
    match known {
        Known::Arrived { running_here: true } => Action::InUse,
        Known::Arrived {
            running_here: false,
        } => Action::RunUnclaimed,
        Known::RanUnclaimed(said) => match said {
            RunSaid::Appended | RunSaid::Failed => Action::Answer,
            RunSaid::Answered => Action::Record,
            RunSaid::KeyTaken => Action::Claim,
        },
        Known::Recorded(true) => Action::Answer,
        Known::Recorded(false) => Action::Claim,
        Known::ClaimedNow => Action::RunClaimed,
        Known::Found { row, running_here } => found(row, *running_here, request_hash, replica, now),
        Known::Liveness { alive: true, .. } => Action::InUse,
        Known::Liveness {
            owner,
            alive: false,
        } => Action::TakeOver {
            from: Some(owner.clone()),
        },
        Known::TookOver { won: true, .. } => Action::RunClaimed,
        Known::TookOver { won: false, claims } | Known::Vanished { claims } => {
            if *claims < MAX_CLAIMS {
                Action::Claim
            } else {
                Action::InUse
            }
        }
        Known::RanClaimed(said) => match said {
            RunSaid::Appended => Action::Answer,
            RunSaid::Answered => Action::Complete,
            RunSaid::Failed => Action::Release,
            RunSaid::KeyTaken => Action::InUse,
        },
    }
}

/// What to make of a key's row found by a claim.
fn found(
    row: &KeyRow,
    running_here: bool,
    request_hash: &str,
    replica: &str,
    now: DateTime<Utc>,
) -> Action {
    if row.request_hash != request_hash {
        return Action::Reused;
    }
    let (owner, claimed_at) = match &row.state {
        KeyState::Done(answer) => return Action::Replay(answer.clone()),
        KeyState::Pending { owner, claimed_at } => (owner, claimed_at),
    };
    if running_here {
        return Action::InUse;
    }
    let timeout = chrono::Duration::from_std(CLAIM_TIMEOUT).unwrap_or(chrono::Duration::MAX);
    let too_old = claimed_at.is_none_or(|at| now - at > timeout);
    match owner {
        // Abandoned: too old, written without an owner, or this replica's own claim whose
        // request has ended (it is not running here).
        _ if too_old => Action::TakeOver {
            from: owner.clone(),
        },
        None => Action::TakeOver { from: None },
        Some(o) if o == replica => Action::TakeOver {
            from: owner.clone(),
        },
        Some(o) => Action::AskLiveness(o.clone()),
    }
}

#[cfg(test)]
mod tests;
