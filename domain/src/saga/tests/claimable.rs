//! WORKERS.md's claimable, stated once ([`claimable`], [`CLAIMABLE_STATES`],
//! [`LEASED_STATE`]), and the runes after which a turn may have become claimable
//! ([`CLAIMABLE_AFTER`]; invariant (j) checks every step of every test against it).

use super::support::*;
use crate::saga::rune::agent::AgentRune;
use crate::saga::rune::session::SessionRune;
use crate::saga::rune::turn::TurnRune;
use crate::saga::*;

#[test]
fn given_each_turn_state_when_leased_or_not_then_claimable_only_dispatched_or_streaming_unleased() {
    for &state in TurnState::ALL {
        for leased in [false, true] {
            let expected = match state {
                TurnState::Dispatched => true,
                TurnState::Streaming => !leased,
                _ => false,
            };
            assert_eq!(
                claimable(state, leased),
                expected,
                "{state}, leased {leased}"
            );
        }
    }
}

#[test]
fn given_the_claimable_states_then_the_leased_state_is_one_of_them_and_each_is_named_once() {
    assert!(CLAIMABLE_STATES.contains(&LEASED_STATE));
    let mut names: Vec<&str> = CLAIMABLE_STATES.iter().map(|s| s.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names, ["dispatched", "streaming"]);
}

#[test]
fn given_claimable_after_then_each_is_a_rune_of_a_turn_agent_or_session_named_once() {
    for rune in CLAIMABLE_AFTER {
        let known = [AgentRune::NAMES, TurnRune::NAMES, SessionRune::NAMES]
            .iter()
            .any(|names| names.contains(&rune));
        assert!(known, "{rune} is not a rune");
        let times = CLAIMABLE_AFTER.iter().filter(|r| **r == rune).count();
        assert_eq!(times, 1, "{rune} listed {times} times");
    }
}

#[test]
fn given_a_human_message_when_its_turn_is_dispatched_then_claimable_on_machine_and_row_and_the_step_rings(
) {
    let mut w = World::started();
    let (_, out) = w.human_says();
    let turn = w.active(w.root()).expect("dispatched");
    let runes: Vec<&str> = out.runes.iter().map(Recorded::event_type).collect();
    assert!(runes.contains(&rune::AGENT_TURN_DISPATCHED), "{runes:?}");
    assert!(CLAIMABLE_AFTER.contains(&rune::AGENT_TURN_DISPATCHED));
    let row = w.sagas.turn_view(turn, w.now).expect("a turn row");
    assert!(w.turn(turn).is_claimable());
    assert!(claimable(row.state, row.lease.is_some()));
}

#[test]
fn given_a_dispatched_turn_when_claimed_then_neither_machine_nor_row_says_claimable() {
    let mut w = World::started();
    w.human_says();
    let turn = w.active(w.root()).expect("dispatched");
    w.claim(turn);
    let row = w.sagas.turn_view(turn, w.now).expect("a turn row");
    assert!(!w.turn(turn).is_claimable());
    assert!(!claimable(row.state, row.lease.is_some()));
}
