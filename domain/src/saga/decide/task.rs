//! `task.created` and `task.checkpoint.created`: task turns of the assignee's agent and
//! the plan's view of the task. A task without an assignee has no turns, so its
//! checkpoints move no agent.

use uuid::Uuid;

use super::plan::Review;
use super::Step;
use crate::saga::ids::{self, TurnCause};
use crate::saga::input::{TASK_CHECKPOINT_CREATED, TASK_CREATED};
use crate::saga::rune::plan::{
    Critique, Finding, PlanChanges, PlanRune, PlanUpdated, TaskAssigned, TaskCompleted, TaskResult,
    TaskStarted,
};
use crate::saga::rune::turn::{FinalOutput, TurnInput};
use crate::saga::rune::Instance;
use crate::saga::types::{AgentRole, PlanState, TurnState, Verdict};
use crate::saga::Turn;
use crate::task::{TaskCheckpointCreated, TaskCreated};
use crate::types::TaskCheckpointType as T;

impl Step<'_> {
    /// The plan learns the task; an assigned task gets a turn (spawning the assignee's
    /// agent the first time).
    pub(super) fn task_created(&mut self, fact: &TaskCreated) {
        let task_id = fact.id;
        let state = self.session_state();
        let Some(_) = state.filter(|s| s.is_open()) else {
            let state = state.map_or("no", |s| s.as_str());
            let reason = format!("task {task_id} created on a {state} session");
            return self.anomaly(Instance::Session(self.conv), TASK_CREATED, reason);
        };
        let agent_id = fact.assigned_to.map(|a| ids::agent_id(self.conv, Some(a)));
        if !self.plan_has_task(task_id) && self.plan_execute("auto_start", Review::Replan) {
            let plan_id = self.plan_id();
            let changes = PlanChanges {
                added_tasks: vec![task_id],
            };
            self.plan(PlanRune::Updated(PlanUpdated { plan_id, changes }));
            if let Some(agent_id) = agent_id {
                self.plan(PlanRune::TaskAssigned(TaskAssigned { task_id, agent_id }));
            }
        }
        let (Some(actor), Some(agent_id)) = (fact.assigned_to, agent_id) else {
            return;
        };
        if self
            .s
            .agents()
            .get(&agent_id)
            .and_then(|a| a.state())
            .is_none()
        {
            let parent = self.root_id();
            self.spawn(Some(actor), AgentRole::Worker, parent);
        }
        let input = TurnInput::Task { task_id };
        self.enqueue(
            agent_id,
            TurnCause::Task(task_id),
            Some(task_id),
            input,
            TASK_CREATED,
        );
    }

    /// A task checkpoint: the task's turn and the plan move by its type.
    pub(super) fn task_checkpoint(&mut self, fact: &TaskCheckpointCreated) {
        if self.session_state().is_none() {
            let reason = format!("task checkpoint {}: no session", fact.id);
            return self.anomaly(
                Instance::Session(self.conv),
                TASK_CHECKPOINT_CREATED,
                reason,
            );
        }
        let task_id = fact.task_id;
        let last = self.s.task_turns(task_id).last().copied();
        // The assignee's own checkpoints move its task turn: fenced, only the turn named,
        // and only while it is open. A review verdict is the reviewer's (the root LLM's)
        // and moves no task turn, so its fence has nothing to say here.
        let assignees = matches!(
            fact.checkpoint_type,
            T::WorkStarted | T::WorkCompleted | T::WorkPaused
        );
        if let Some(turn_id) = self.fence.filter(|_| assignees) {
            let open = self
                .s
                .turns()
                .get(&turn_id)
                .and_then(Turn::state)
                .is_some_and(|s| !s.is_terminal() && s != TurnState::Queued);
            if Some(turn_id) != last || !open {
                let reason = format!(
                    "{} {} fenced to turn {turn_id}, which is not task {task_id}'s open turn",
                    fact.checkpoint_type, fact.id
                );
                return self.fenced_anomaly(turn_id, TASK_CHECKPOINT_CREATED, reason);
            }
        }
        let last_turn = last.and_then(|t| self.s.turns().get(&t));
        let agent_id = last_turn.and_then(Turn::agent_id);
        let state = last_turn.and_then(Turn::state);
        let kind = fact.checkpoint_type;
        let report = |reason: &str| format!("{kind} {} for task {task_id}: {reason}", fact.id);
        match (kind, last, state) {
            (T::WorkStarted, _, _) => {
                if self.plan_has_task(task_id)
                    && self.plan_execute("auto_start", Review::Retry)
                    && !self.plan_task_started(task_id)
                {
                    self.plan(PlanRune::TaskStarted(TaskStarted { task_id }));
                }
                match (last, state, agent_id) {
                    (Some(turn), Some(TurnState::Queued), _) => {
                        let reason = report("its turn is queued behind the agent's active turn");
                        self.anomaly(Instance::Turn(turn), TASK_CHECKPOINT_CREATED, reason);
                    }
                    (Some(turn), Some(TurnState::Dispatched), _) => self.start(turn),
                    (Some(_), Some(s), Some(agent)) if s.is_terminal() => {
                        let input = TurnInput::TaskResume {
                            task_id,
                            task_checkpoint_id: fact.id,
                        };
                        let cause = TurnCause::TaskCheckpoint(fact.id);
                        self.enqueue(agent, cause, Some(task_id), input, TASK_CHECKPOINT_CREATED);
                    }
                    _ => {}
                }
            }
            (T::WorkCompleted | T::WorkPaused, Some(turn), Some(s))
                if s == TurnState::Queued || s.is_terminal() =>
            {
                let why = if s == TurnState::Queued {
                    "its turn is not dispatched"
                } else {
                    "the task has no open turn"
                };
                let reason = report(&format!("{why} (turn {turn} is {s})"));
                self.anomaly(Instance::Turn(turn), TASK_CHECKPOINT_CREATED, reason);
                if kind == T::WorkCompleted {
                    self.plan_task_completed(fact.id, task_id, last);
                }
            }
            (T::WorkCompleted, _, _) => {
                if let (Some(turn), Some(state)) = (last, state) {
                    if state == TurnState::Dispatched {
                        self.start(turn);
                    }
                    let output = FinalOutput::TaskCheckpoint {
                        task_checkpoint_id: fact.id,
                        checkpoint_type: kind,
                    };
                    self.complete(turn, output);
                }
                self.plan_task_completed(fact.id, task_id, last);
            }
            (T::WorkPaused, Some(turn), Some(_)) => self.interrupt(turn, "work_paused"),
            (T::WorkPaused, _, _) => {}
            (T::WorkRejected, _, _) => {
                self.plan_critique(fact.id, task_id, Verdict::Rejected);
                if let (Some(agent), Some(true)) = (agent_id, state.map(TurnState::is_terminal)) {
                    let input = TurnInput::TaskRetry {
                        task_id,
                        task_checkpoint_id: fact.id,
                    };
                    let cause = TurnCause::TaskCheckpoint(fact.id);
                    self.enqueue(agent, cause, Some(task_id), input, TASK_CHECKPOINT_CREATED);
                }
            }
            (T::WorkApproved, _, _) => self.plan_critique(fact.id, task_id, Verdict::Approved),
        }
    }

    /// `plan.task_completed` (unless the plan is past it), then `executing → reviewing`
    /// when every task is completed or approved.
    fn plan_task_completed(&mut self, checkpoint_id: Uuid, task_id: Uuid, turn_id: Option<Uuid>) {
        if !self.plan_has_task(task_id) || !self.plan_execute("auto_start", Review::Stay) {
            return;
        }
        let evidence = turn_id
            .and_then(|t| self.s.turns().get(&t))
            .and_then(Turn::last_message_id);
        let result = TaskResult {
            task_checkpoint_id: checkpoint_id,
            turn_id,
        };
        self.plan(PlanRune::TaskCompleted(TaskCompleted {
            task_id,
            result,
            evidence,
        }));
        if self.s.plan().is_some_and(|p| p.all_tasks_done()) {
            self.plan_move(PlanState::Reviewing, "all_tasks_terminal");
        }
    }

    /// `plan.critique` with one finding; a rejection sends `reviewing → executing`
    /// (critique_found_issues), the last approval ends the loop (`goal_met`).
    fn plan_critique(&mut self, checkpoint_id: Uuid, task_id: Uuid, verdict: Verdict) {
        if !self.plan_has_task(task_id) {
            return;
        }
        self.plan_unblock();
        if !matches!(
            self.plan_state(),
            Some(PlanState::Executing | PlanState::Reviewing)
        ) {
            return;
        }
        let plan_id = self.plan_id();
        let findings = vec![Finding {
            task_id,
            task_checkpoint_id: checkpoint_id,
            verdict,
        }];
        self.plan(PlanRune::Critique(Critique { plan_id, findings }));
        let reviewing = self.plan_state() == Some(PlanState::Reviewing);
        match verdict {
            Verdict::Rejected if reviewing => {
                self.plan_move(PlanState::Executing, "critique_found_issues");
            }
            Verdict::Approved if self.s.plan().is_some_and(|p| p.all_tasks_approved()) => {
                self.plan_goal_met("all_tasks_approved");
            }
            _ => {}
        }
    }
}
