//! Runes of a plan stream: the ECHS autonomy-loop runes plus `plan.state.changed`, the
//! one rune added for the state moves no ECHS rune tells (into `executing`, `reviewing`,
//! `blocked`, and back).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{rune_event, SagaAnomaly};
use crate::saga::types::{PlanState, Verdict};

/// The names of the plan runes.
pub mod names {
    /// `plan.goal_received` — `[*] → goal_received`.
    pub const PLAN_GOAL_RECEIVED: &str = "plan.goal_received";
    /// `plan.created` — `goal_received → planning` (decompose_goal).
    pub const PLAN_CREATED: &str = "plan.created";
    /// `plan.updated` — tasks added (planning, executing).
    pub const PLAN_UPDATED: &str = "plan.updated";
    /// `plan.task_assigned` (executing).
    pub const PLAN_TASK_ASSIGNED: &str = "plan.task_assigned";
    /// `plan.task_started` (executing).
    pub const PLAN_TASK_STARTED: &str = "plan.task_started";
    /// `plan.task_completed` (executing).
    pub const PLAN_TASK_COMPLETED: &str = "plan.task_completed";
    /// `plan.critique` — a task approved or rejected (executing, reviewing).
    pub const PLAN_CRITIQUE: &str = "plan.critique";
    /// `plan.goal_met` — `reviewing → goal_met` (critique_passed).
    pub const PLAN_GOAL_MET: &str = "plan.goal_met";
    /// `plan.stopped` — `planning | executing | blocked → stopped` (user_cancel).
    pub const PLAN_STOPPED: &str = "plan.stopped";
    /// `plan.state.changed` — the other edges (addition).
    pub const PLAN_STATE_CHANGED: &str = "plan.state.changed";
}

/// `plan.goal_received` {goal_description} + {conversation_id} (addition: the stream is
/// self-contained).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GoalReceived {
    /// The conversation (= the plan aggregate's id).
    pub conversation_id: Uuid,
    /// The conversation's title.
    pub goal_description: String,
}

/// `plan.created` {plan_id, tasks}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanCreated {
    /// [`crate::saga::ids::plan_id`].
    pub plan_id: Uuid,
    /// The tasks known when planning starts (none: tasks come with `task.created`).
    pub tasks: Vec<Uuid>,
}

/// `plan.updated`'s `changes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanChanges {
    /// Tasks added to the plan.
    pub added_tasks: Vec<Uuid>,
}

/// `plan.updated` {plan_id, changes}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanUpdated {
    /// The plan.
    pub plan_id: Uuid,
    /// What changed.
    pub changes: PlanChanges,
}

/// `plan.task_assigned` {task_id, agent_id}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskAssigned {
    /// The task.
    pub task_id: Uuid,
    /// The assignee's agent.
    pub agent_id: Uuid,
}

/// `plan.task_started` {task_id}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskStarted {
    /// The task.
    pub task_id: Uuid,
}

/// `plan.task_completed`'s `result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskResult {
    /// The `WORK_COMPLETED` checkpoint.
    pub task_checkpoint_id: Uuid,
    /// The task's turn it ended, if it had one.
    pub turn_id: Option<Uuid>,
}

/// `plan.task_completed` {task_id, result, evidence}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskCompleted {
    /// The task.
    pub task_id: Uuid,
    /// The checkpoint and the turn.
    pub result: TaskResult,
    /// The last message the task's turn produced, or null.
    pub evidence: Option<Uuid>,
}

/// One finding of a critique: a human's verdict on a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// The task.
    pub task_id: Uuid,
    /// The `WORK_APPROVED` / `WORK_REJECTED` checkpoint.
    pub task_checkpoint_id: Uuid,
    /// Approved or rejected.
    pub verdict: Verdict,
}

/// `plan.critique` {plan_id, findings}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Critique {
    /// The plan.
    pub plan_id: Uuid,
    /// The verdicts.
    pub findings: Vec<Finding>,
}

/// `plan.goal_met`'s `summary`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanSummary {
    /// `all_tasks_approved` or `work_completed`.
    pub cause: String,
    /// Tasks in the plan.
    pub tasks: u32,
    /// Of which approved.
    pub approved: u32,
}

/// `plan.goal_met` {plan_id, summary}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GoalMet {
    /// The plan.
    pub plan_id: Uuid,
    /// How it ended.
    pub summary: PlanSummary,
}

/// `plan.stopped` {reason}.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanStopped {
    /// `user_cancel`.
    pub reason: String,
}

/// `plan.state.changed` {from, to, trigger} (addition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanStateChanged {
    /// The state left.
    pub from: PlanState,
    /// The state entered.
    pub to: PlanState,
    /// The ECHS edge label (`auto_start`, `all_tasks_terminal`, ...).
    pub trigger: String,
}

/// The runes of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "rune")]
pub enum PlanRune {
    /// `plan.goal_received`
    #[serde(rename = "plan.goal_received")]
    GoalReceived(GoalReceived),
    /// `plan.created`
    #[serde(rename = "plan.created")]
    Created(PlanCreated),
    /// `plan.updated`
    #[serde(rename = "plan.updated")]
    Updated(PlanUpdated),
    /// `plan.task_assigned`
    #[serde(rename = "plan.task_assigned")]
    TaskAssigned(TaskAssigned),
    /// `plan.task_started`
    #[serde(rename = "plan.task_started")]
    TaskStarted(TaskStarted),
    /// `plan.task_completed`
    #[serde(rename = "plan.task_completed")]
    TaskCompleted(TaskCompleted),
    /// `plan.critique`
    #[serde(rename = "plan.critique")]
    Critique(Critique),
    /// `plan.goal_met`
    #[serde(rename = "plan.goal_met")]
    GoalMet(GoalMet),
    /// `plan.stopped`
    #[serde(rename = "plan.stopped")]
    Stopped(PlanStopped),
    /// `plan.state.changed`
    #[serde(rename = "plan.state.changed")]
    StateChanged(PlanStateChanged),
    /// `saga.anomaly`
    #[serde(rename = "saga.anomaly")]
    Anomaly(SagaAnomaly),
}

impl PlanRune {
    /// Every rune name of the stream, `saga.anomaly` last.
    pub const NAMES: &'static [&'static str] = &[
        names::PLAN_GOAL_RECEIVED,
        names::PLAN_CREATED,
        names::PLAN_UPDATED,
        names::PLAN_TASK_ASSIGNED,
        names::PLAN_TASK_STARTED,
        names::PLAN_TASK_COMPLETED,
        names::PLAN_CRITIQUE,
        names::PLAN_GOAL_MET,
        names::PLAN_STOPPED,
        names::PLAN_STATE_CHANGED,
        super::SAGA_ANOMALY,
    ];

    /// The rune's name.
    pub fn name(&self) -> &'static str {
        use names::*;
        match self {
            Self::GoalReceived(_) => PLAN_GOAL_RECEIVED,
            Self::Created(_) => PLAN_CREATED,
            Self::Updated(_) => PLAN_UPDATED,
            Self::TaskAssigned(_) => PLAN_TASK_ASSIGNED,
            Self::TaskStarted(_) => PLAN_TASK_STARTED,
            Self::TaskCompleted(_) => PLAN_TASK_COMPLETED,
            Self::Critique(_) => PLAN_CRITIQUE,
            Self::GoalMet(_) => PLAN_GOAL_MET,
            Self::Stopped(_) => PLAN_STOPPED,
            Self::StateChanged(_) => PLAN_STATE_CHANGED,
            Self::Anomaly(_) => super::SAGA_ANOMALY,
        }
    }
}

rune_event!(PlanRune);
