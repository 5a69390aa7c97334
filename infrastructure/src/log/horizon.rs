//! How far readers may read the log on PostgreSQL, now that appends do not wait for each
//! other (migration `0017_log_horizon.sql`).
//!
//! Positions are drawn when rows are inserted, not when they commit, so a later position
//! can become visible before an earlier one. What keeps a reader from skipping the earlier
//! one is that every append statement, *before* it draws a position, reads how far the
//! position sequence has gone (its *floor*: each position it draws is above it) and takes a
//! shared advisory lock naming that floor, held to its transaction's end. Then:
//!
//! > Let a statement's snapshot show `through` as the newest position, and let the
//! > statement then read the floors of the locks held (the lowest: `floor`). Every
//! > position up to `min(through, floor)` that will ever be visible is visible to every
//! > snapshot taken after that read.
//!
//! A position `q ≤ through` missing from the snapshot was drawn before `through` was (the
//! sequence hands positions out in order), so before the snapshot, by an append that had
//! named its floor (below `q`) and had not committed by then. When the locks are read that
//! append has either ended — committed and visible to every later snapshot (a lock is
//! released only after its transaction's commit is visible), or rolled back and `q` never
//! visible — or still holds its lock, and then `q > floor`. An append that has not yet
//! named its floor has drawn nothing, and whatever it draws comes after `through`.
//!
//! So a [`Sighting`] makes positions final at once, for the *next* statement: a read
//! reads up to what earlier sightings made final ([`Horizon`]). Only appends in progress,
//! in this database, hold readers back; a long report or another database's batch job
//! never does.
//!
//! Reading the lock table holds every backend's locks for a moment, so the reader skips it
//! when it can: a statement whose snapshot shows *every* position after the horizon up to
//! its newest (no gap: none drawn by an append still in progress, none rolled back) may
//! read all of them at once, and they are final — the log's `SIGHTING`. A gap left by a
//! rollback is passed by the next sighting that reads the locks.

use std::sync::atomic::{AtomicI64, Ordering};

/// What one statement saw: the newest visible position, and the floors named by the locks
/// held after its snapshot was taken, as the lock table shows them (their low 31 bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// The newest visible position (0 on an empty log).
    pub through: i64,
    /// The low 31 bits of each floor (the lock's second key).
    pub floors: Vec<i64>,
}

/// The floors' keys keep 31 bits: a key is a signed 32-bit integer, kept non-negative.
const KEY_BITS: u32 = 31;

impl Sighting {
    /// The position up to which everything that will ever be visible is final.
    pub fn final_through(&self) -> i64 {
        self.floors
            .iter()
            .map(|low| floor_near(self.through, *low))
            .fold(self.through, i64::min)
    }
}

/// The floor whose low 31 bits are `low`, nearest to `through`: the floors of appends in
/// progress lie within a billion positions of the newest visible one.
fn floor_near(through: i64, low: i64) -> i64 {
    let span = 1i64 << KEY_BITS;
    let half = span / 2;
    let offset = (low - through).rem_euclid(span);
    let offset = if offset >= half {
        offset - span
    } else {
        offset
    };
    through + offset
}

/// The last final position, shared by a process's readers; it only grows.
#[derive(Debug, Default)]
pub struct Horizon(AtomicI64);

impl Horizon {
    /// The last position readers may read up to, as far as sightings that have ended know.
    pub fn through(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }

    /// Takes in a sighting; returns the position readers may now read up to.
    pub fn settle(&self, seen: &Sighting) -> i64 {
        let moved = seen.final_through();
        self.0.fetch_max(moved, Ordering::AcqRel).max(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(through: i64, floors: &[i64]) -> Sighting {
        Sighting {
            through,
            floors: floors.iter().map(|f| f & ((1 << KEY_BITS) - 1)).collect(),
        }
    }

    #[test]
    fn given_no_append_in_progress_when_sighted_then_everything_visible_is_final() {
        let h = Horizon::default();
        assert_eq!(h.settle(&seen(7, &[])), 7);
        assert_eq!(h.through(), 7);
    }

    #[test]
    fn given_an_append_drawing_above_a_floor_when_sighted_then_readers_stop_at_the_floor() {
        let h = Horizon::default();
        assert_eq!(h.settle(&seen(9, &[4, 6])), 4);
        // It committed: the next sighting sees no lock.
        assert_eq!(h.settle(&seen(12, &[])), 12);
    }

    #[test]
    fn given_an_append_that_named_its_floor_after_the_snapshot_when_sighted_then_it_holds_nothing_back(
    ) {
        let h = Horizon::default();
        assert_eq!(h.settle(&seen(9, &[9, 11])), 9);
    }

    #[test]
    fn given_sightings_settling_out_of_order_when_an_older_one_arrives_then_the_horizon_never_falls(
    ) {
        let h = Horizon::default();
        assert_eq!(h.settle(&seen(20, &[])), 20);
        assert_eq!(h.settle(&seen(18, &[3])), 20);
        assert_eq!(h.through(), 20);
    }

    #[test]
    fn given_positions_past_the_keys_31_bits_when_floors_are_read_back_then_they_are_the_floors_named(
    ) {
        let through = (5i64 << 31) + 10;
        // Below `through` across the wrap of the low bits, and just above it.
        assert_eq!(seen(through, &[through - 20]).final_through(), through - 20);
        assert_eq!(seen(through, &[through + 3]).final_through(), through);
        let low_wrap = (3i64 << 31) - 5;
        assert_eq!(
            seen(low_wrap + 8, &[low_wrap]).final_through(),
            low_wrap,
            "a floor whose low bits are near the top, below a position whose low bits wrapped"
        );
    }

    #[test]
    fn given_an_empty_log_when_an_append_is_in_progress_then_nothing_is_final() {
        assert_eq!(seen(0, &[0]).final_through(), 0);
    }
}
