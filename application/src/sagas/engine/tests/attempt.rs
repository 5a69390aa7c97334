//! The loop's one conflict policy ([`Hold`], [`SagaEngine::run`]): a commit that conflicts
//! is decided again on reloaded machines up to the attempts, then stops as contended —
//! which each entry point answers its own way; nothing else is ever retried.

use pm_domain::saga::{ControlError, WorkerOp, TURN_FENCED};

use super::super::attempt::{Answered, Decided, Failure, Hold, Stopped};
use super::super::ATTEMPTS;
use super::*;
use crate::processor::BatchError;

fn conflict() -> CommitError {
    CommitError::Conflict {
        conversations: Vec::new(),
    }
}

fn cursor_moved() -> CommitError {
    CommitError::CursorMoved
}

fn lease_gone() -> CommitError {
    CommitError::LeaseGone {
        turn_id: Uuid::nil(),
        turn_epoch: 1,
    }
}

fn store_down() -> CommitError {
    CommitError::Store(AppError::Unavailable("the database is down".into()))
}

/// `n` conflicts, then whatever the store decides.
fn conflicts(n: u32) -> Vec<fn() -> CommitError> {
    vec![conflict as fn() -> CommitError; n as usize]
}

impl World {
    /// The next commits answer `answers`, in order.
    fn script(&self, answers: Vec<fn() -> CommitError>) {
        self.store.with(|s| s.scripted = answers);
    }

    fn commits(&self) -> usize {
        self.store.with(|s| s.commits)
    }

    /// Scripted answers no commit has taken yet.
    fn unanswered(&self) -> usize {
        self.store.with(|s| s.scripted.len())
    }

    /// Runs the loop with a decision that decides nothing of its own; answers what the
    /// loop answered and how many times it decided.
    async fn run(&self, hold: Hold) -> (Result<Answered<()>, Stopped<AppError>>, u32) {
        let mut decisions = 0;
        let ran = self
            .engine
            .run(hold, None, |_, _| {
                decisions += 1;
                Ok(Decided::Write(()))
            })
            .await;
        (ran, decisions)
    }
}

#[tokio::test]
async fn given_commits_that_conflict_fewer_times_than_the_attempts_when_the_loop_runs_then_it_decides_again_on_reloaded_machines_and_commits(
) {
    let (world, a) = World::active().await;
    let (loads, commits) = (world.store.loads(a), world.commits());
    world.script(conflicts(ATTEMPTS - 1));

    let (ran, decisions) = world.run(Hold::one(a)).await;

    assert!(ran.is_ok(), "{ran:?}");
    assert_eq!(decisions, ATTEMPTS);
    // In memory at the first attempt; read again after each conflict.
    assert_eq!(world.store.loads(a), loads + ATTEMPTS as usize - 1);
    assert_eq!(world.commits(), commits + 1);
}

#[tokio::test]
async fn given_commits_that_always_conflict_when_the_loop_runs_then_it_stops_contended_after_every_attempt(
) {
    let (world, a) = World::active().await;
    let commits = world.commits();
    world.script(conflicts(ATTEMPTS + 1));

    let (ran, decisions) = world.run(Hold::one(a)).await;

    assert!(matches!(ran, Err(Stopped::Contended)), "{ran:?}");
    assert_eq!(decisions, ATTEMPTS);
    assert_eq!(world.unanswered(), 1, "no commit after the last attempt");
    assert_eq!(world.commits(), commits);
}

#[tokio::test]
async fn given_a_hold_decided_once_when_its_commit_conflicts_then_the_loop_stops_contended_at_once()
{
    let (world, a) = World::active().await;
    world.script(conflicts(1));

    let (ran, decisions) = world.run(Hold::one(a).once()).await;

    assert!(matches!(ran, Err(Stopped::Contended)), "{ran:?}");
    assert_eq!(decisions, 1);
}

#[tokio::test]
async fn given_a_commit_that_fails_otherwise_than_by_a_conflict_when_the_loop_runs_then_it_stops_at_once(
) {
    let (world, a) = World::active().await;
    for answer in [cursor_moved, lease_gone, store_down] {
        world.script(vec![answer, conflict]);

        let (ran, decisions) = world.run(Hold::one(a)).await;

        assert_eq!(decisions, 1, "{ran:?} was decided again");
        let failure = match ran {
            Err(Stopped::Failed(failure)) => failure,
            other => panic!("{other:?}"),
        };
        assert_eq!(failure.to_string(), answer().to_string());
        match failure {
            Failure::CursorMoved => assert!(matches!(answer(), CommitError::CursorMoved)),
            Failure::LeaseGone { .. } => assert!(matches!(answer(), CommitError::LeaseGone { .. })),
            Failure::Store(_) => assert!(matches!(answer(), CommitError::Store(_))),
        }
    }
}

#[tokio::test]
async fn given_a_decision_that_fails_when_the_loop_runs_then_it_stops_at_once_and_the_next_writer_reloads(
) {
    let (world, a) = World::active().await;
    let (loads, commits) = (world.store.loads(a), world.commits());
    let mut decisions = 0;

    let ran = world
        .engine
        .run(Hold::one(a), None, |_, _| {
            decisions += 1;
            Err::<Decided<()>, _>(AppError::Internal("a decision failed".into()))
        })
        .await;

    assert!(
        matches!(ran, Err(Stopped::Decision(AppError::Internal(_)))),
        "{ran:?}"
    );
    assert_eq!(decisions, 1);
    assert_eq!(world.commits(), commits);
    // The machines may hold part of the failed decision: not kept.
    let (ran, _) = world.run(Hold::one(a)).await;
    assert!(ran.is_ok(), "{ran:?}");
    assert_eq!(world.store.loads(a), loads + 1);
}

#[tokio::test]
async fn given_a_batch_whose_commits_always_conflict_when_applied_then_it_is_transient_and_a_moved_cursor_is_not_retried(
) {
    let (mut world, a) = World::active().await;
    let message = vec![world.log.human_says(a)];
    world.script(conflicts(ATTEMPTS));

    let contended = world.engine.apply_batch(world.cursor, &message).await;

    assert!(
        matches!(contended, Err(BatchError::Transient(_))),
        "{contended:?}"
    );
    assert_eq!(world.unanswered(), 0);

    world.script(vec![cursor_moved, conflict]);
    let moved = world.engine.apply_batch(world.cursor, &message).await;
    assert_eq!(moved, Err(BatchError::CursorMoved));
    assert_eq!(world.unanswered(), 1, "decided once");
}

#[tokio::test]
async fn given_due_deadlines_whose_commit_conflicts_when_fired_then_none_fired_and_they_are_tried_once(
) {
    let config = SagaConfig {
        turn_timeout: chrono::Duration::zero(),
        ..SagaConfig::default()
    };
    let a = Uuid::new_v4();
    let mut world = World::new(config);
    world.started(&[a]).await;
    let message = vec![world.log.human_says(a)];
    world.apply(message).await;
    world.script(conflicts(2));

    let fired = world.engine.fire_due(10).await;

    assert_eq!(fired.ok(), Some(0));
    assert_eq!(world.unanswered(), 1, "one commit for the one conversation");
    let fired = world.engine.fire_due(10).await.expect("fired");
    assert_eq!(fired, 0, "the second conflict");
    let fired = world.engine.fire_due(10).await.expect("fired");
    assert!(fired > 0, "still due, fired at the next call");
}

/// A turn the sagas dispatched in `conversation`.
fn dispatched(world: &World, conversation: Uuid) -> Uuid {
    world
        .store
        .with(|s| {
            s.runes.iter().find_map(|(c, r)| match r.recorded.instance {
                Instance::Turn(id) if *c == conversation => Some(id),
                _ => None,
            })
        })
        .expect("a turn was dispatched")
}

#[tokio::test]
async fn given_a_claim_whose_lease_is_gone_at_commit_when_a_worker_asks_then_it_is_fenced_and_not_retried(
) {
    let (world, a) = World::active().await;
    let turn = dispatched(&world, a);
    let seen = Some((a, world.store.with(|s| s.versions[&a])));
    let claim = WorkerOp::Claim {
        worker: "w".into(),
        lease: chrono::Duration::seconds(30),
    };
    world.script(vec![lease_gone, conflict]);

    let fenced = world
        .engine
        .worker(turn, seen, claim.clone(), metadata())
        .await
        .expect("stored");

    assert!(
        matches!(fenced, Err(ControlError::NotAllowed { code, .. }) if code == TURN_FENCED),
        "{fenced:?}"
    );
    assert_eq!(world.unanswered(), 1, "decided once");

    world.script(conflicts(ATTEMPTS));
    let contended = world.engine.worker(turn, seen, claim, metadata()).await;
    assert!(
        matches!(
            contended,
            Err(AppError::ConcurrencyConflict { attempts: ATTEMPTS })
        ),
        "{contended:?}"
    );
}
