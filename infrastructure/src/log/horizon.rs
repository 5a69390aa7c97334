//! How far readers may read the log on PostgreSQL, now that appends do not wait for each
//! other (migration `0017_log_horizon.sql`).
//!
//! Positions are drawn when rows are inserted, not when they commit, so a later position
//! can become visible before an earlier one. What keeps a reader from skipping the earlier
//! one is this rule, which holds because every append takes the log's lock (shared) and
//! its transaction id *before* it draws a position, and keeps the lock to its end:
//!
//! > Let a statement's snapshot show `through` as the newest position, and let the
//! > statement then read which appends hold the lock (the *blockers*). Every position up
//! > to `through` that will ever be visible is visible to any later snapshot once none of
//! > the blockers holds the lock any more.
//!
//! (An earlier position was drawn before `through` was, so before the snapshot: its
//! append had ended by the snapshot — and is visible to it, or never — or was running
//! then, and so still held the lock when the statement read who did, or had ended by then.
//! A lock is released only after its transaction's commit is visible.) So a [`Sighting`]
//! makes every position up to `through` final once a later check finds none of its
//! blockers, and until then readers stop at the last final position: the [`Horizon`].
//! Appends that began after the snapshot are blockers too (they cannot be told apart):
//! they only make a sighting wait a little longer.
//!
//! Only transactions that append, in this database, can be blockers: a long report or
//! another database's batch job never holds readers back.

/// What one statement saw: the newest visible position and the appends holding the lock
/// after its snapshot was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// The newest visible position (0 on an empty log).
    pub through: i64,
    /// The transaction ids of those appends.
    pub blockers: Vec<i64>,
}

/// A sighting waiting for its blockers to end.
#[derive(Debug)]
struct Waiting {
    /// Sightings are numbered so that a check settles only those it asked about.
    id: u64,
    through: i64,
    blockers: Vec<i64>,
}

/// Sightings kept waiting at most; past it the newest is replaced (it waits on the same
/// long append as those before it, or it would have settled).
const WAITING: usize = 32;

/// The last final position and the sightings that will move it.
#[derive(Debug, Default)]
pub struct Horizon {
    final_through: i64,
    waiting: Vec<Waiting>,
    next_id: u64,
}

/// A check to run: the blockers to ask about, for the sightings numbered below `before`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    before: u64,
    /// Every waiting sighting's blockers, each once.
    pub blockers: Vec<i64>,
}

impl Horizon {
    /// The last position readers may read up to, as far as checks that have ended know.
    pub fn through(&self) -> i64 {
        self.final_through
    }

    /// What the next check must ask about.
    pub fn ask(&self) -> Ask {
        let mut blockers: Vec<i64> = self
            .waiting
            .iter()
            .flat_map(|w| w.blockers.iter().copied())
            .collect();
        blockers.sort_unstable();
        blockers.dedup();
        Ask {
            before: self.next_id,
            blockers,
        }
    }

    /// Takes in a check run for `asked`: of its blockers, `running` still hold the lock;
    /// `seen` is the statement's own sighting. Returns the position readers may read up to.
    ///
    /// Checks may run concurrently and settle in any order: a check settles only the
    /// sightings that were waiting when it was asked, and the horizon only grows.
    pub fn settle(&mut self, asked: &Ask, running: &[i64], seen: Sighting) -> i64 {
        for w in self.waiting.iter_mut().filter(|w| w.id < asked.before) {
            w.blockers.retain(|b| running.contains(b));
            if w.blockers.is_empty() {
                self.final_through = self.final_through.max(w.through);
            }
        }
        if seen.blockers.is_empty() {
            self.final_through = self.final_through.max(seen.through);
        }
        let final_through = self.final_through;
        self.waiting.retain(|w| w.through > final_through);
        let newest = self.waiting.last().map_or(final_through, |w| w.through);
        if seen.through > newest && !seen.blockers.is_empty() {
            if self.waiting.len() == WAITING {
                self.waiting.pop();
            }
            self.waiting.push(Waiting {
                id: self.next_id,
                through: seen.through,
                blockers: seen.blockers,
            });
            self.next_id += 1;
        }
        self.final_through
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(through: i64, blockers: &[i64]) -> Sighting {
        Sighting {
            through,
            blockers: blockers.to_vec(),
        }
    }

    #[test]
    fn given_no_append_in_progress_when_sighted_then_everything_visible_is_final() {
        let mut h = Horizon::default();
        let ask = h.ask();
        assert_eq!(h.settle(&ask, &[], seen(7, &[])), 7);
        assert_eq!(h.through(), 7);
        assert!(h.waiting.is_empty());
    }

    #[test]
    fn given_an_append_in_progress_when_sighted_then_the_horizon_waits_for_it() {
        let mut h = Horizon::default();
        let ask = h.ask();
        assert_eq!(h.settle(&ask, &[], seen(7, &[100])), 0);
        // Asked again while it still runs: nothing moves.
        let ask = h.ask();
        assert_eq!(ask.blockers, vec![100]);
        assert_eq!(h.settle(&ask, &[100], seen(9, &[100, 101])), 0);
        // It ended: the first sighting is final, the second waits for 101.
        let ask = h.ask();
        assert_eq!(ask.blockers, vec![100, 101]);
        assert_eq!(h.settle(&ask, &[101], seen(9, &[101])), 7);
        let ask = h.ask();
        assert_eq!(h.settle(&ask, &[], seen(12, &[])), 12);
        assert!(h.ask().blockers.is_empty());
    }

    #[test]
    fn given_a_sighting_taken_during_a_check_when_the_check_settles_then_it_is_not_settled_by_it() {
        let mut h = Horizon::default();
        let first = h.ask();
        // A concurrent check adds a sighting blocked by 5 after `first` was asked.
        let second = h.ask();
        assert_eq!(h.settle(&second, &[], seen(10, &[5])), 0);
        // `first` never asked about 5: its empty answer says nothing about it.
        assert_eq!(h.settle(&first, &[], seen(10, &[5])), 0);
        let third = h.ask();
        assert_eq!(h.settle(&third, &[], seen(11, &[6])), 10);
    }

    #[test]
    fn given_a_long_append_when_sightings_pile_up_then_they_are_bounded_and_it_still_settles() {
        let mut h = Horizon::default();
        for through in 1..=(WAITING as i64 * 3) {
            let ask = h.ask();
            h.settle(&ask, &[1], seen(through, &[1, through + 1]));
        }
        assert!(h.waiting.len() <= WAITING);
        let ask = h.ask();
        assert_eq!(h.settle(&ask, &[], seen(500, &[900])), WAITING as i64 * 3);
    }

    #[test]
    fn given_checks_settling_out_of_order_when_an_older_one_arrives_then_the_horizon_never_falls() {
        let mut h = Horizon::default();
        let ask = h.ask();
        assert_eq!(h.settle(&ask, &[], seen(20, &[])), 20);
        let ask = h.ask();
        // An older statement's sighting, settled late.
        assert_eq!(h.settle(&ask, &[], seen(15, &[])), 20);
        assert_eq!(h.settle(&ask, &[], seen(18, &[3])), 20);
        assert!(h.waiting.is_empty());
    }
}
