//! Autonomy-loop moves: each follows ECHS edges only, one rune per edge. An input that has
//! no edge from the plan's state is not a plan input there (no rune, no anomaly): the plan
//! is a view of the facts, which are authoritative.

use uuid::Uuid;

use super::Step;
use crate::saga::ids;
use crate::saga::rune::plan::{GoalMet, PlanCreated, PlanRune, PlanStateChanged, PlanSummary};
use crate::saga::types::{PlanState, PlanTaskStatus};

/// What new work does to a plan in `reviewing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Review {
    /// New work (BEGIN_WORK, a new task): `reviewing → planning` (needs_replan), then
    /// `planning → executing`.
    Replan,
    /// A task is worked again: `reviewing → executing` (critique_found_issues).
    Retry,
    /// Not a plan input in `reviewing`.
    Stay,
}

impl Step<'_> {
    pub(super) fn plan_state(&self) -> Option<PlanState> {
        self.s.plan().and_then(|p| p.state())
    }

    pub(super) fn plan_id(&self) -> Uuid {
        ids::plan_id(self.conv)
    }

    pub(super) fn plan_has_task(&self, task_id: Uuid) -> bool {
        self.s
            .plan()
            .is_some_and(|p| p.tasks().contains_key(&task_id))
    }

    /// Whether the plan holds `task_id` as started already: another `WORK_STARTED` (a
    /// resumption after `WORK_PAUSED`, a repeat) moves it nowhere, so it records no
    /// `plan.task_started` (a rune is an edge of the plan's view, and there is none).
    pub(super) fn plan_task_started(&self, task_id: Uuid) -> bool {
        self.s
            .plan()
            .and_then(|p| p.tasks().get(&task_id))
            .is_some_and(|t| t.status == PlanTaskStatus::Started)
    }

    /// `plan.state.changed` along an ECHS edge.
    pub(super) fn plan_move(&mut self, to: PlanState, trigger: &str) {
        if let Some(from) = self.plan_state() {
            self.plan(PlanRune::StateChanged(PlanStateChanged {
                from,
                to,
                trigger: trigger.into(),
            }));
        }
    }

    /// `goal_received → planning` (decompose_goal): `plan.created` with no tasks yet.
    pub(super) fn plan_decompose(&mut self) {
        if self.plan_state() == Some(PlanState::GoalReceived) {
            let plan_id = self.plan_id();
            self.plan(PlanRune::Created(PlanCreated {
                plan_id,
                tasks: Vec::new(),
            }));
        }
    }

    /// `blocked → executing` (dependency_resolved): the user answered, or it auto-decided.
    pub(super) fn plan_unblock(&mut self) {
        if self.plan_state() == Some(PlanState::Blocked) {
            self.plan_move(PlanState::Executing, "dependency_resolved");
        }
    }

    /// Brings the loop to `executing` along ECHS edges; `start` labels `planning →
    /// executing` (`plan_approved` or `auto_start`). Whether it is executing now.
    pub(super) fn plan_execute(&mut self, start: &str, review: Review) -> bool {
        use PlanState::*;
        match self.plan_state() {
            Some(GoalReceived) => {
                self.plan_decompose();
                self.plan_move(Executing, start);
            }
            Some(Planning) => self.plan_move(Executing, start),
            Some(Blocked) => self.plan_move(Executing, "dependency_resolved"),
            Some(Reviewing) => match review {
                Review::Replan => {
                    self.plan_move(Planning, "needs_replan");
                    self.plan_move(Executing, start);
                }
                Review::Retry => self.plan_move(Executing, "critique_found_issues"),
                Review::Stay => return false,
            },
            Some(Executing) => {}
            Some(GoalMet | Stopped) | None => return false,
        }
        true
    }

    /// To `goal_met` through `reviewing` (critique_passed), recording every edge.
    pub(super) fn plan_goal_met(&mut self, cause: &str) {
        if self.plan_state() != Some(PlanState::Reviewing) {
            if !self.plan_execute("auto_start", Review::Stay) {
                return;
            }
            self.plan_move(PlanState::Reviewing, "all_tasks_terminal");
        }
        let tasks = self.s.plan().map_or(0, |p| p.tasks().len());
        let approved = self.s.plan().map_or(0, |p| {
            let approved = |t: &&crate::saga::PlanTask| t.status == PlanTaskStatus::Approved;
            p.tasks().values().filter(approved).count()
        });
        let summary = PlanSummary {
            cause: cause.into(),
            tasks: u32::try_from(tasks).unwrap_or(u32::MAX),
            approved: u32::try_from(approved).unwrap_or(u32::MAX),
        };
        let plan_id = self.plan_id();
        self.plan(PlanRune::GoalMet(GoalMet { plan_id, summary }));
    }
}
