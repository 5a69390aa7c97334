//! Poison isolation, written once for every consumer of the log: a run of events that
//! cannot be applied, for a reason retrying will not fix, is split until the culprit is
//! alone; the events before it are applied, it is set aside with its error, and the
//! events after it are applied in turn.
//!
//! The consumer applies runs its fast way (the read model: a few multi-row statements per
//! run), so finding the culprit costs a handful of runs — halves, quarters, … — rather than
//! a second, per-event way of applying. Used by the [processor runner](super) (the live
//! read model, the sagas) and by the read model's rebuild.

use std::future::Future;
use std::ops::Range;

use crate::log::LoggedEvent;

/// Why a run of events was not applied; nothing of the run took effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure<E> {
    /// The consumer knows the culprit: event `index` of the run.
    Poison {
        /// Its index in the run.
        index: usize,
        /// Why it cannot be applied.
        reason: String,
    },
    /// The run cannot be applied and retrying will not help, but the consumer cannot tell
    /// which event is at fault (a multi-row statement failed): split the run.
    Rejected(String),
    /// Anything else (the database went away, another owner moved the cursor): stop.
    Stop(E),
}

/// A consumer whose runs of events can be isolated.
pub trait Isolation: Send {
    /// What stops the isolation.
    type Error: Send;

    /// Applies `events` as a whole (all or nothing), after what was applied or set aside
    /// before.
    fn apply(
        &mut self,
        events: &[LoggedEvent],
    ) -> impl Future<Output = Result<(), Failure<Self::Error>>> + Send;

    /// Sets the culprit `event` aside with `reason` (parks or skips it) and moves past it.
    fn set_aside(
        &mut self,
        event: &LoggedEvent,
        reason: &str,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// What is left to do, first at the end (a stack).
enum Step {
    Apply(Range<usize>),
    SetAside(usize, String),
}

/// Applies `events` through `target`, in order, setting aside every event that cannot be
/// applied: a run that fails with [`Failure::Rejected`] is split in halves, a run that
/// names its culprit ([`Failure::Poison`]) is split around it, and a single rejected event
/// is the culprit. Applying costs one run when nothing is wrong.
///
/// # Errors
/// The first [`Failure::Stop`] or failed [`Isolation::set_aside`]: what came before it
/// took effect, the rest did not.
pub async fn apply_isolating<T: Isolation>(
    target: &mut T,
    events: &[LoggedEvent],
) -> Result<(), T::Error> {
    let mut todo = vec![Step::Apply(0..events.len())];
    while let Some(step) = todo.pop() {
        let run = match step {
            Step::Apply(run) if run.is_empty() => continue,
            Step::Apply(run) => run,
            Step::SetAside(at, reason) => {
                target.set_aside(&events[at], &reason).await?;
                continue;
            }
        };
        let culprit = match target.apply(&events[run.clone()]).await {
            Ok(()) => continue,
            Err(Failure::Stop(e)) => return Err(e),
            Err(Failure::Poison { index, reason }) if index < run.len() => {
                Some((run.start + index, reason))
            }
            Err(Failure::Poison { reason, .. } | Failure::Rejected(reason)) => {
                (run.len() == 1).then_some((run.start, reason))
            }
        };
        match culprit {
            Some((at, reason)) => {
                todo.push(Step::Apply(at + 1..run.end));
                todo.push(Step::SetAside(at, reason));
                todo.push(Step::Apply(run.start..at));
            }
            None => {
                let middle = run.start + run.len() / 2;
                todo.push(Step::Apply(middle..run.end));
                todo.push(Step::Apply(run.start..middle));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
