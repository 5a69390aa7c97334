//! Reading an [`Outcome`] in assertions: rune names, runes of one instance, deadline ops.

use uuid::Uuid;

use crate::saga::rune::turn::TurnRune;
use crate::saga::*;

/// The runes' names, in order.
pub fn names(out: &Outcome) -> Vec<&'static str> {
    out.runes.iter().map(Recorded::event_type).collect()
}

/// The names of the runes on one instance, in order.
pub fn names_on(out: &Outcome, instance: Instance) -> Vec<&'static str> {
    out.runes
        .iter()
        .filter(|r| r.instance == instance)
        .map(Recorded::event_type)
        .collect()
}

/// The first turn rune named `name`.
pub fn turn_rune<'a>(out: &'a Outcome, name: &str) -> &'a TurnRune {
    out.runes
        .iter()
        .find_map(|r| match &r.rune {
            Rune::Turn(t) if t.name() == name => Some(t),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {name} in {:?}", names(out)))
}

/// The operation on the row of (instance, kind), if any.
pub fn op(out: &Outcome, instance: Instance, kind: DeadlineKind) -> Option<DeadlineOp> {
    out.deadlines
        .iter()
        .copied()
        .find(|op| op.key() == (instance, kind))
}

/// The id of the turn a rune of `out` named `turn.queued` created (the n-th one).
pub fn queued(out: &Outcome, n: usize) -> Uuid {
    out.runes
        .iter()
        .filter_map(|r| match (&r.instance, &r.rune) {
            (Instance::Turn(id), Rune::Turn(TurnRune::Queued(_))) => Some(*id),
            _ => None,
        })
        .nth(n)
        .unwrap_or_else(|| panic!("no turn.queued #{n} in {:?}", names(out)))
}
