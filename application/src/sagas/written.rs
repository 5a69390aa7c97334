//! What a conversation's rows said when they were last written, as fingerprints, so that a
//! commit leaves out a session, agent, turn or tool call row its runes left as it was.
//!
//! A turn's commits (dispatch, claim, the worker's facts, completion) each touch the
//! conversation, and each used to rewrite its session and agent rows with nothing new but
//! `updated_at` — a third of a turn's row writes (docs/PERFORMANCE.md, issue 32). A row's
//! times are no part of its fingerprint: the views are fingerprinted as of one fixed time,
//! so `updated_at` now says when the row last changed, as the views document.
//!
//! Fingerprints live with the machines they were taken from: machines that fail to commit
//! are dropped with them, and machines loaded from the store start with none (their first
//! commit writes every row it touches, as before).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};

use chrono::{DateTime, Utc};
use pm_domain::saga::Instance;
use serde::Serialize;

/// The time rows are fingerprinted as of: any fixed one.
pub(super) const UNTIMED: DateTime<Utc> = DateTime::UNIX_EPOCH;

/// Fingerprints of the rows of one conversation's machines, by instance.
#[derive(Debug, Default)]
pub(super) struct Written {
    rows: HashMap<Instance, u64>,
}

impl Written {
    /// Whether `untimed` (a row built as of [`UNTIMED`]) differs from what was last
    /// written for `instance` — always when nothing was. It is then taken as written, to be
    /// remembered while `open` (a turn or tool call that ended is forgotten instead: it
    /// seldom changes again, and a long conversation's ended turns would pile up here).
    pub(super) fn changed<T: Serialize>(
        &mut self,
        instance: Instance,
        untimed: &T,
        open: bool,
    ) -> bool {
        let print = fingerprint(untimed);
        let changed = self.rows.get(&instance) != Some(&print);
        if open {
            self.rows.insert(instance, print);
        } else {
            self.rows.remove(&instance);
        }
        changed
    }
}

impl Written {
    /// The row `view` builds as of `time`, when it differs — times apart — from what was
    /// last written for `instance` ([`Written::changed`], remembered while `open` says so of
    /// it); `None` when it does not, or when there is no such row.
    pub(super) fn row<T: Serialize>(
        &mut self,
        instance: Instance,
        time: DateTime<Utc>,
        view: impl Fn(DateTime<Utc>) -> Option<T>,
        open: impl Fn(&T) -> bool,
    ) -> Option<T> {
        let untimed = view(UNTIMED)?;
        let open = open(&untimed);
        self.changed(instance, &untimed, open)
            .then(|| view(time))
            .flatten()
    }
}

/// The row's serialized form, hashed as it is written out.
fn fingerprint<T: Serialize>(row: &T) -> u64 {
    let mut hasher = Hashing(DefaultHasher::new());
    // A view always serializes; were one not to, an empty fingerprint only writes the row.
    let _ = serde_json::to_writer(&mut hasher, row);
    hasher.0.finish()
}

struct Hashing(DefaultHasher);

impl std::io::Write for Hashing {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn session() -> Instance {
        Instance::Session(Uuid::from_u128(1))
    }

    #[test]
    fn given_no_row_written_when_a_row_comes_then_it_changed() {
        let mut written = Written::default();
        assert!(written.changed(session(), &json!({"state": "active"}), true));
    }

    #[test]
    fn given_a_row_written_when_the_same_comes_again_then_it_did_not_change() {
        let mut written = Written::default();
        written.changed(session(), &json!({"state": "active"}), true);
        assert!(!written.changed(session(), &json!({"state": "active"}), true));
    }

    #[test]
    fn given_a_row_written_when_another_comes_then_it_changed_and_is_the_one_remembered() {
        let mut written = Written::default();
        written.changed(session(), &json!({"state": "active"}), true);
        assert!(written.changed(session(), &json!({"state": "paused"}), true));
        assert!(!written.changed(session(), &json!({"state": "paused"}), true));
        assert!(written.changed(session(), &json!({"state": "active"}), true));
    }

    #[test]
    fn given_a_row_that_ended_when_it_comes_again_then_it_is_written_again() {
        let mut written = Written::default();
        let turn = Instance::Turn(Uuid::from_u128(2));
        written.changed(turn, &json!({"state": "completed"}), false);
        assert!(written.changed(turn, &json!({"state": "completed"}), false));
    }

    #[test]
    fn given_rows_of_two_instances_then_each_is_compared_with_its_own() {
        let mut written = Written::default();
        let agent = Instance::Agent(Uuid::from_u128(1));
        written.changed(session(), &json!({"state": "active"}), true);
        assert!(written.changed(agent, &json!({"state": "active"}), true));
        assert!(!written.changed(session(), &json!({"state": "active"}), true));
    }
}
