//! The isolation against a fake consumer that rejects any run holding a poison event,
//! with or without naming it: exhaustively over small runs and poison sets.

use std::collections::BTreeSet;

use super::*;
use crate::processor::tests::event;

/// What the fake did, in order.
#[derive(Debug, Clone, PartialEq)]
enum Done {
    Applied(i64),
    SetAside(i64),
}

#[derive(Default)]
struct Fake {
    poison: BTreeSet<i64>,
    names_culprit: bool,
    stop_after_runs: Option<usize>,
    runs: usize,
    done: Vec<Done>,
}

impl Isolation for Fake {
    type Error = &'static str;

    async fn apply(&mut self, events: &[LoggedEvent]) -> Result<(), Failure<Self::Error>> {
        self.runs += 1;
        if self.stop_after_runs.is_some_and(|n| self.runs > n) {
            return Err(Failure::Stop("database away"));
        }
        match events
            .iter()
            .position(|e| self.poison.contains(&e.position.0))
        {
            Some(index) if self.names_culprit => Err(Failure::Poison {
                index,
                reason: "unreadable".into(),
            }),
            Some(_) => Err(Failure::Rejected("a statement failed".into())),
            None => {
                let applied = events.iter().map(|e| Done::Applied(e.position.0));
                self.done.extend(applied);
                Ok(())
            }
        }
    }

    async fn set_aside(&mut self, event: &LoggedEvent, reason: &str) -> Result<(), Self::Error> {
        assert!(!reason.is_empty());
        self.done.push(Done::SetAside(event.position.0));
        Ok(())
    }
}

fn expected(n: i64, poison: &BTreeSet<i64>) -> Vec<Done> {
    (1..=n)
        .map(|p| {
            if poison.contains(&p) {
                Done::SetAside(p)
            } else {
                Done::Applied(p)
            }
        })
        .collect()
}

/// Every poison set of at most two events among `n`.
fn poison_sets(n: i64) -> Vec<BTreeSet<i64>> {
    let mut sets = vec![BTreeSet::new()];
    for a in 1..=n {
        sets.push(BTreeSet::from([a]));
        for b in a + 1..=n {
            sets.push(BTreeSet::from([a, b]));
        }
    }
    sets
}

#[tokio::test]
async fn given_a_clean_run_then_it_is_applied_at_once() {
    let events: Vec<_> = (1..=9).map(event).collect();
    let mut fake = Fake::default();
    apply_isolating(&mut fake, &events).await.expect("applied");
    assert_eq!(fake.runs, 1);
    assert_eq!(fake.done, expected(9, &BTreeSet::new()));
}

#[tokio::test]
async fn given_poison_events_then_each_is_set_aside_in_order_and_the_others_applied() {
    for names_culprit in [false, true] {
        for n in 1..=9 {
            let events: Vec<_> = (1..=n).map(event).collect();
            for poison in poison_sets(n) {
                let mut fake = Fake {
                    poison: poison.clone(),
                    names_culprit,
                    ..Fake::default()
                };
                apply_isolating(&mut fake, &events).await.expect("applied");
                assert_eq!(
                    fake.done,
                    expected(n, &poison),
                    "n {n}, poison {poison:?}, named {names_culprit}"
                );
            }
        }
    }
}

#[tokio::test]
async fn given_one_poison_event_among_many_then_bisection_takes_a_few_runs() {
    let events: Vec<_> = (1..=512).map(event).collect();
    let mut fake = Fake {
        poison: BTreeSet::from([300]),
        ..Fake::default()
    };
    apply_isolating(&mut fake, &events).await.expect("applied");
    assert!(fake.runs <= 2 * 10 + 1, "{} runs", fake.runs);
    assert_eq!(fake.done, expected(512, &fake.poison.clone()));
}

#[tokio::test]
async fn given_a_stop_while_isolating_then_it_ends_with_what_was_done_kept() {
    let events: Vec<_> = (1..=8).map(event).collect();
    let mut fake = Fake {
        poison: BTreeSet::from([7]),
        stop_after_runs: Some(2),
        ..Fake::default()
    };
    let stopped = apply_isolating(&mut fake, &events).await;
    assert_eq!(stopped, Err("database away"));
    // The whole run failed, its first half (1..=4) applied, then the stop.
    assert_eq!(fake.done, expected(4, &BTreeSet::new()));
}
