//! The Plan aggregate: the ECHS autonomy loop of a conversation, folded from its runes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::rune::plan::PlanRune;
use super::types::{PlanState, PlanTaskStatus, Verdict};
use super::{ids, saga_aggregate, Machine, SagaError, PLAN_TYPE};

/// The ECHS edges `plan.state.changed` records, with their labels; the other edges have
/// their own runes (`plan.created`: goal_received → planning, `plan.goal_met`: reviewing →
/// goal_met, `plan.stopped`: planning | executing | blocked → stopped).
pub fn plan_edge_triggers(from: PlanState, to: PlanState) -> &'static [&'static str] {
    use PlanState::*;
    match (from, to) {
        (Planning, Executing) => &["plan_approved", "auto_start"],
        (Planning, GoalReceived) => &["plan_rejected"],
        (Executing, Reviewing) => &["all_tasks_terminal"],
        (Executing, Blocked) => &["all_runnable_blocked"],
        (Reviewing, Executing) => &["critique_found_issues"],
        (Reviewing, Planning) => &["needs_replan"],
        (Blocked, Executing) => &["dependency_resolved"],
        _ => &[],
    }
}

/// A task as the plan knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanTask {
    /// The assignee's agent.
    pub agent_id: Option<Uuid>,
    /// Its progress.
    pub status: PlanTaskStatus,
}

/// A conversation's autonomy loop (id = the conversation id).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    conversation_id: Option<Uuid>,
    plan_id: Option<Uuid>,
    goal_description: Option<String>,
    state: Option<PlanState>,
    tasks: BTreeMap<Uuid, PlanTask>,
    anomalies: u32,
}

impl Plan {
    /// The plan id, from `plan.created`.
    pub fn plan_id(&self) -> Option<Uuid> {
        self.plan_id
    }
    /// The goal (the conversation's title).
    pub fn goal_description(&self) -> Option<&str> {
        self.goal_description.as_deref()
    }
    /// Its state; `None` before `plan.goal_received`.
    pub fn state(&self) -> Option<PlanState> {
        self.state
    }
    /// Its tasks.
    pub fn tasks(&self) -> &BTreeMap<Uuid, PlanTask> {
        &self.tasks
    }
    /// `saga.anomaly` runes recorded on the plan.
    pub fn anomalies(&self) -> u32 {
        self.anomalies
    }
    /// Whether it has tasks and each is completed or approved (`all_tasks_terminal`).
    pub fn all_tasks_done(&self) -> bool {
        !self.tasks.is_empty()
            && self.tasks.values().all(|t| {
                matches!(
                    t.status,
                    PlanTaskStatus::Completed | PlanTaskStatus::Approved
                )
            })
    }
    /// Whether it has tasks and each is approved.
    pub fn all_tasks_approved(&self) -> bool {
        !self.tasks.is_empty()
            && self
                .tasks
                .values()
                .all(|t| t.status == PlanTaskStatus::Approved)
    }
    /// The state's name, `none` before `plan.goal_received`.
    pub fn state_name(&self) -> String {
        self.state.map_or("none", PlanState::as_str).to_string()
    }

    fn known(&self, rune: &PlanRune, task_ids: &[Uuid]) -> Result<(), SagaError> {
        match task_ids.iter().find(|t| !self.tasks.contains_key(t)) {
            Some(t) => Err(SagaError::Guard {
                rune: rune.name(),
                reason: format!("task {t} is not in the plan"),
            }),
            None => Ok(()),
        }
    }

    fn same_plan(&self, rune: &PlanRune, plan_id: Uuid) -> Result<(), SagaError> {
        let expected = self.conversation_id.map(ids::plan_id);
        match expected {
            Some(expected) if expected != plan_id => Err(SagaError::WrongInstance {
                rune: rune.name(),
                expected,
                got: plan_id,
            }),
            _ => Ok(()),
        }
    }
}

impl Machine for Plan {
    type Rune = PlanRune;

    fn check(&self, rune: &PlanRune) -> Result<(), SagaError> {
        use PlanRune as R;
        use PlanState::*;
        let st = self.state;
        let edge = match rune {
            R::GoalReceived(_) => st.is_none(),
            R::Created(r) => {
                self.same_plan(rune, r.plan_id)?;
                st == Some(GoalReceived)
            }
            R::Updated(r) => {
                self.same_plan(rune, r.plan_id)?;
                let added = &r.changes.added_tasks;
                if let Some(t) = added.iter().find(|t| self.tasks.contains_key(t)) {
                    return Err(SagaError::Guard {
                        rune: rune.name(),
                        reason: format!("task {t} is already in the plan"),
                    });
                }
                matches!(st, Some(Planning | Executing))
            }
            R::TaskAssigned(r) => {
                self.known(rune, &[r.task_id])?;
                st == Some(Executing)
            }
            R::TaskStarted(r) => {
                self.known(rune, &[r.task_id])?;
                st == Some(Executing)
            }
            R::TaskCompleted(r) => {
                self.known(rune, &[r.task_id])?;
                st == Some(Executing)
            }
            R::Critique(r) => {
                self.same_plan(rune, r.plan_id)?;
                let tasks: Vec<Uuid> = r.findings.iter().map(|f| f.task_id).collect();
                self.known(rune, &tasks)?;
                matches!(st, Some(Executing | Reviewing))
            }
            R::GoalMet(r) => {
                self.same_plan(rune, r.plan_id)?;
                st == Some(Reviewing)
            }
            R::Stopped(_) => matches!(st, Some(Planning | Executing | Blocked)),
            R::StateChanged(r) => {
                st == Some(r.from) && plan_edge_triggers(r.from, r.to).contains(&r.trigger.as_str())
            }
            R::Anomaly(_) => true,
        };
        if edge {
            Ok(())
        } else {
            Err(SagaError::NoEdge {
                machine: PLAN_TYPE,
                state: self.state_name(),
                rune: rune.name(),
            })
        }
    }

    fn fold(&mut self, rune: PlanRune) {
        use PlanRune as R;
        match rune {
            R::TaskStarted(r) => self.set(r.task_id, PlanTaskStatus::Started),
            R::TaskCompleted(r) => self.set(r.task_id, PlanTaskStatus::Completed),
            R::Critique(r) => {
                for f in r.findings {
                    let status = match f.verdict {
                        Verdict::Approved => PlanTaskStatus::Approved,
                        Verdict::Rejected => PlanTaskStatus::Rejected,
                    };
                    self.set(f.task_id, status);
                }
            }
            R::GoalReceived(r) => {
                self.conversation_id = Some(r.conversation_id);
                self.goal_description = Some(r.goal_description);
                self.state = Some(PlanState::GoalReceived);
            }
            R::Created(r) => {
                self.plan_id = Some(r.plan_id);
                self.add(r.tasks);
                self.state = Some(PlanState::Planning);
            }
            R::Updated(r) => self.add(r.changes.added_tasks),
            R::TaskAssigned(r) => {
                if let Some(t) = self.tasks.get_mut(&r.task_id) {
                    t.agent_id = Some(r.agent_id);
                    t.status = PlanTaskStatus::Assigned;
                }
            }
            R::GoalMet(_) => self.state = Some(PlanState::GoalMet),
            R::Stopped(_) => self.state = Some(PlanState::Stopped),
            R::StateChanged(r) => self.state = Some(r.to),
            R::Anomaly(_) => self.anomalies += 1,
        }
    }
}

impl Plan {
    fn set(&mut self, task: Uuid, status: PlanTaskStatus) {
        if let Some(t) = self.tasks.get_mut(&task) {
            t.status = status;
        }
    }

    fn add(&mut self, tasks: Vec<Uuid>) {
        for task in tasks {
            self.tasks.entry(task).or_insert(PlanTask {
                agent_id: None,
                status: PlanTaskStatus::Pending,
            });
        }
    }
}

saga_aggregate!(Plan, PlanRune, PLAN_TYPE);
