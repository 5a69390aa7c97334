//! One given/when/then per row of the state machine's table.

use chrono::{DateTime, Duration, Utc};

use super::*;
use crate::idempotency::StoredAnswer;
use crate::log::LogPosition;

const HASH: &str = "hash-of-this-request";
const ME: &str = "1-me";
const OTHER: &str = "2-other";

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default()
}

fn when(known: Known) -> Action {
    decide(&known, HASH, ME, now())
}

fn pending(owner: Option<&str>, age_secs: i64) -> KeyRow {
    KeyRow {
        request_hash: HASH.into(),
        state: KeyState::Pending {
            owner: owner.map(str::to_string),
            claimed_at: Some(now() - Duration::seconds(age_secs)),
        },
    }
}

fn found(row: &KeyRow) -> Known {
    Known::Found {
        row: row.clone(),
        running_here: false,
    }
}

fn answer() -> StoredAnswer {
    StoredAnswer {
        status: 404,
        body: "{}".into(),
        location: None,
    }
}

#[test]
fn given_a_request_whose_key_runs_here_when_it_arrives_then_in_use() {
    assert_eq!(when(Known::Arrived { running_here: true }), Action::InUse);
}

#[test]
fn given_a_new_request_when_it_arrives_then_it_runs_at_once_without_a_claim() {
    assert_eq!(
        when(Known::Arrived {
            running_here: false
        }),
        Action::RunUnclaimed
    );
}

#[test]
fn given_an_unclaimed_run_when_it_appended_or_failed_then_its_answer_stands() {
    assert_eq!(when(Known::RanUnclaimed(RunSaid::Appended)), Action::Answer);
    assert_eq!(when(Known::RanUnclaimed(RunSaid::Failed)), Action::Answer);
}

#[test]
fn given_an_unclaimed_run_when_it_answered_without_a_fact_then_the_answer_is_recorded() {
    assert_eq!(when(Known::RanUnclaimed(RunSaid::Answered)), Action::Record);
}

#[test]
fn given_an_unclaimed_run_when_the_key_was_taken_then_the_key_is_claimed() {
    assert_eq!(when(Known::RanUnclaimed(RunSaid::KeyTaken)), Action::Claim);
}

#[test]
fn given_an_answer_to_record_when_written_then_answered_and_when_the_key_had_a_row_then_claimed() {
    assert_eq!(when(Known::Recorded(true)), Action::Answer);
    assert_eq!(when(Known::Recorded(false)), Action::Claim);
}

#[test]
fn given_no_row_when_claimed_then_the_command_runs_under_the_claim() {
    assert_eq!(when(Known::ClaimedNow), Action::RunClaimed);
}

#[test]
fn given_a_row_of_another_request_when_claimed_then_reused_whatever_its_state() {
    let mut row = pending(Some(OTHER), 1);
    row.request_hash = "another".into();
    assert_eq!(when(found(&row)), Action::Reused);
    row.state = KeyState::Done(StoredResponse::Appended(LogPosition(7)));
    assert_eq!(when(found(&row)), Action::Reused);
}

#[test]
fn given_a_row_done_with_a_position_when_claimed_then_replayed() {
    let done = StoredResponse::Appended(LogPosition(7));
    let row = KeyRow {
        request_hash: HASH.into(),
        state: KeyState::Done(done.clone()),
    };
    assert_eq!(when(found(&row)), Action::Replay(done));
}

#[test]
fn given_a_row_done_with_a_stored_answer_when_claimed_then_replayed_even_while_running_here() {
    let done = StoredResponse::Answer(answer());
    let row = KeyRow {
        request_hash: HASH.into(),
        state: KeyState::Done(done.clone()),
    };
    let known = Known::Found {
        row: row.clone(),
        running_here: true,
    };
    assert_eq!(when(known), Action::Replay(done));
}

#[test]
fn given_a_pending_row_whose_key_runs_here_when_claimed_then_in_use_even_if_too_old() {
    for row in [pending(Some(ME), 1), pending(Some(OTHER), 3600)] {
        let known = Known::Found {
            row: row.clone(),
            running_here: true,
        };
        assert_eq!(when(known), Action::InUse);
    }
}

#[test]
fn given_a_pending_row_older_than_the_timeout_when_claimed_then_taken_over_without_asking() {
    let row = pending(Some(OTHER), 61);
    assert_eq!(
        when(found(&row)),
        Action::TakeOver {
            from: Some(OTHER.into())
        }
    );
    let row = KeyRow {
        request_hash: HASH.into(),
        state: KeyState::Pending {
            owner: Some(OTHER.into()),
            claimed_at: None,
        },
    };
    assert_eq!(
        when(found(&row)),
        Action::TakeOver {
            from: Some(OTHER.into())
        }
    );
}

#[test]
fn given_a_pending_row_without_owner_when_claimed_then_taken_over() {
    let row = pending(None, 1);
    assert_eq!(when(found(&row)), Action::TakeOver { from: None });
}

#[test]
fn given_a_pending_row_of_this_replica_whose_request_ended_when_claimed_then_taken_over() {
    let row = pending(Some(ME), 1);
    assert_eq!(
        when(found(&row)),
        Action::TakeOver {
            from: Some(ME.into())
        }
    );
}

#[test]
fn given_a_young_pending_row_of_another_replica_when_claimed_then_its_liveness_is_asked() {
    let row = pending(Some(OTHER), 59);
    assert_eq!(when(found(&row)), Action::AskLiveness(OTHER.into()));
}

#[test]
fn given_the_holder_alive_then_in_use_and_given_it_gone_then_taken_over() {
    let alive = Known::Liveness {
        owner: OTHER.into(),
        alive: true,
    };
    assert_eq!(when(alive), Action::InUse);
    let gone = Known::Liveness {
        owner: OTHER.into(),
        alive: false,
    };
    assert_eq!(
        when(gone),
        Action::TakeOver {
            from: Some(OTHER.into())
        }
    );
}

#[test]
fn given_a_take_over_won_then_the_command_runs_under_the_claim() {
    let known = Known::TookOver {
        won: true,
        claims: 1,
    };
    assert_eq!(when(known), Action::RunClaimed);
}

#[test]
fn given_a_take_over_lost_or_a_vanished_row_then_claimed_again_up_to_the_limit() {
    for claims in 1..MAX_CLAIMS {
        assert_eq!(when(Known::TookOver { won: false, claims }), Action::Claim);
        assert_eq!(when(Known::Vanished { claims }), Action::Claim);
    }
    let claims = MAX_CLAIMS;
    assert_eq!(when(Known::TookOver { won: false, claims }), Action::InUse);
    assert_eq!(when(Known::Vanished { claims }), Action::InUse);
}

#[test]
fn given_a_claimed_run_then_appended_answers_answered_completes_failed_releases() {
    assert_eq!(when(Known::RanClaimed(RunSaid::Appended)), Action::Answer);
    assert_eq!(when(Known::RanClaimed(RunSaid::Answered)), Action::Complete);
    assert_eq!(when(Known::RanClaimed(RunSaid::Failed)), Action::Release);
}

#[test]
fn given_a_claimed_run_when_the_key_was_taken_over_meanwhile_then_in_use_and_nothing_kept() {
    assert_eq!(when(Known::RanClaimed(RunSaid::KeyTaken)), Action::InUse);
}
