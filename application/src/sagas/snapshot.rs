//! Snapshots of a conversation's machines, so that loading a long conversation reads the
//! runes of its last stretch instead of its whole history (a conversation of 20,000
//! queued messages has 40,000 runes: reading and parsing them took 140 ms).
//!
//! A snapshot is the machines encoded as of a log position `P`: the fold of every rune of
//! the conversation at or before `P` and of none after it. The engine takes one right after
//! a commit, from the machines that commit left — the version check guarantees they hold
//! every rune of the conversation, and the log's positions follow commit order, so no
//! later rune can get a position at or below the commit's last one. Loading is the
//! snapshot plus the runes after `P`.
//!
//! The encoding is MessagePack of the domain's own serde shapes, structs as maps with
//! their field names (8.9 MB for 20,000 queued turns against JSON's 13.5 MB; 1.9 MB once
//! PostgreSQL compressed it). Not as arrays: the shapes skip absent optional fields, which
//! would shift an array's elements (a test shows it). [`FORMAT`] names it: a snapshot of another format is
//! not read (the conversation is folded from its runes and a new snapshot written), so a
//! release that changes how the machines fold or serialize bumps it — the golden test
//! below fails when the shape changes under it.
//!
//! When: a snapshot costs the size of the machines, so one is taken only once the runes
//! after the last one are at least [`SnapshotPolicy::every`] and a quarter of those it
//! covers. Writing is amortised to a constant per rune, and a load reads at most about a
//! fifth of a long history as runes.

use std::collections::HashMap;

use pm_domain::saga::{Instance, Sagas};
use serde::{Deserialize, Serialize};

/// The encoding of [`encode`]; see the module's documentation for when it changes.
pub const FORMAT: i32 = 3;

/// When the engine takes snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// Runes after the last snapshot before a new one is taken (0: never).
    pub every: u64,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        Self { every: 1_000 }
    }
}

impl SnapshotPolicy {
    /// Whether a conversation of `runes` runes, `covered` of which its last snapshot holds,
    /// is due a new one.
    pub fn due(self, runes: u64, covered: u64) -> bool {
        let after = runes.saturating_sub(covered);
        self.every > 0 && after >= self.every && after.saturating_mul(4) >= covered
    }
}

/// What a snapshot holds: the machines, the last sequence of each instance's stream (the
/// next rune's number) and how many runes they were folded from.
#[derive(Serialize)]
struct Encoding<'a> {
    sagas: &'a Sagas,
    streams: Vec<(&'a Instance, &'a i64)>,
    runes: u64,
}

#[derive(Deserialize)]
struct Decoding {
    sagas: Sagas,
    streams: Vec<(Instance, i64)>,
    runes: u64,
}

/// A conversation's machines as a snapshot's content.
pub struct Decoded {
    /// The machines.
    pub sagas: Sagas,
    /// The last sequence of each instance's stream.
    pub streams: HashMap<Instance, i64>,
    /// The runes they were folded from.
    pub runes: u64,
}

/// Encodes machines in [`FORMAT`].
///
/// # Errors
/// The encoder's message (not expected: every shape of the machines encodes).
pub fn encode(
    sagas: &Sagas,
    streams: &HashMap<Instance, i64>,
    runes: u64,
) -> Result<Vec<u8>, String> {
    let mut streams: Vec<_> = streams.iter().collect();
    // Sorted, so the same machines always give the same bytes.
    streams.sort_unstable();
    // Structs as maps with their field names, not as arrays: the domain's shapes skip
    // absent optional fields (`tool.result`'s `output`, …), which an array would shift.
    rmp_serde::to_vec_named(&Encoding {
        sagas,
        streams,
        runes,
    })
    .map_err(|e| e.to_string())
}

/// Decodes a snapshot of [`FORMAT`].
///
/// # Errors
/// The decoder's message, for bytes that are not such a snapshot.
pub fn decode(state: &[u8]) -> Result<Decoded, String> {
    let d: Decoding = rmp_serde::from_slice(state).map_err(|e| e.to_string())?;
    Ok(Decoded {
        sagas: d.sagas,
        streams: d.streams.into_iter().collect(),
        runes: d.runes,
    })
}

#[cfg(test)]
mod tests;
