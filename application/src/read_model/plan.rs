//! The planner of the projection's fast path: a batch of logged events becomes the rows
//! to insert and the summed deltas per task and conversation, so the whole batch is
//! applied with a few multi-row statements. Pure: no I/O.

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::forgetting::Party;
use pm_domain::message::MessageAdded;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use pm_domain::types::{TaskCheckpointType, TaskStatus};
use uuid::Uuid;

use crate::fact::{Fact, FactError};
use crate::log::{LogPosition, LoggedEvent};

/// Summed changes to one conversation row.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ConversationDelta {
    /// Messages added.
    pub messages: i64,
    /// Checkpoints added.
    pub checkpoints: i64,
    /// Tasks added.
    pub tasks: i64,
    /// Change of the task count per status, indexed by [`TaskStatus::index`].
    pub statuses: [i64; TaskStatus::COUNT],
    /// The batch's latest checkpoint of the conversation.
    pub latest: Option<ConversationCheckpointCreated>,
    /// Whether that checkpoint's summary could not be read (its party forgotten).
    pub latest_forgotten: bool,
    /// The newest server time among the batch's facts of the conversation.
    pub updated_at: Option<DateTime<Utc>>,
}

impl ConversationDelta {
    fn touch(&mut self, at: DateTime<Utc>) {
        if self.updated_at.is_none_or(|cur| cur < at) {
            self.updated_at = Some(at);
        }
    }
}

/// One task's state after the batch.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    /// Its conversation.
    pub conversation_id: Uuid,
    /// Its derived status.
    pub status: TaskStatus,
    /// The stream sequence of the fact that set the status.
    pub status_sequence: i64,
    /// When the status changed in this batch (`None`: it did not).
    pub status_changed_at: Option<DateTime<Utc>>,
    /// The batch's first `WORK_STARTED` (a stored earlier one wins when applied).
    pub first_started: Option<DateTime<Utc>>,
    /// The latest `WORK_COMPLETED` that became the status in this batch.
    pub last_completed: Option<DateTime<Utc>>,
    /// Checkpoints added in this batch.
    pub added_checkpoints: i64,
    /// Whether the batch checkpoints the task.
    pub touched: bool,
}

impl TaskState {
    /// A task as stored before the batch.
    pub fn stored(conversation_id: Uuid, status: TaskStatus, status_sequence: i64) -> Self {
        Self {
            conversation_id,
            status,
            status_sequence,
            status_changed_at: None,
            first_started: None,
            last_completed: None,
            added_checkpoints: 0,
            touched: false,
        }
    }
}

/// An event the fast path cannot plan: the caller falls back to the per-event path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unplannable(pub String);

/// A fact read from the log, and whether some of its texts could not be read (its party
/// forgotten: they hold [`pm_domain::personal::STAND_IN`], and are stored as NULL with
/// the row's `forgotten` set).
pub type ReadFact<'a> = (&'a LoggedEvent, Fact, bool);

/// Rows to insert and deltas to apply for one batch. Each row to insert carries whether
/// its fact's texts were unreadable (see [`ReadFact`]).
#[derive(Debug, Default)]
pub struct Plan<'a> {
    /// Actors to insert.
    pub actors: Vec<(&'a ActorRegistered, bool)>,
    /// Conversations to insert, with their `updated_at` (the fact's server time).
    pub started: Vec<(&'a ConversationStarted, DateTime<Utc>, bool)>,
    /// Conversation members: (conversation, actor, ordinal).
    pub members: Vec<(Uuid, Uuid, i64)>,
    /// Conversation checkpoints with their log positions.
    pub checkpoints: Vec<(&'a ConversationCheckpointCreated, LogPosition, bool)>,
    /// Tasks to insert with their creation stream sequence.
    pub new_tasks: Vec<(&'a TaskCreated, i64, bool)>,
    /// Task checkpoints with their stream sequence.
    pub task_checkpoints: Vec<(&'a TaskCheckpointCreated, i64)>,
    /// Messages with their log positions.
    pub messages: Vec<(&'a MessageAdded, LogPosition, bool)>,
    /// Every task the batch creates or checkpoints, in its state after the batch.
    pub tasks: HashMap<Uuid, TaskState>,
    /// Tasks created in this batch.
    pub created_here: HashSet<Uuid>,
    /// Deltas per conversation.
    pub conversations: HashMap<Uuid, ConversationDelta>,
    /// The parties forgotten in this batch, in log order: applied after the batch's rows
    /// (a fact logged after a forgetting reads its texts unreadable already, so only the
    /// rows before it have texts to clear).
    pub forgotten: Vec<(Party, Uuid)>,
}

/// Reads a batch's facts (skipping events that are not facts, e.g. runes), texts that
/// cannot be read included ([`Fact::from_logged_unreadable`]).
///
/// # Errors
/// [`Unplannable`] for a fact whose payload does not parse.
pub fn read(events: &[LoggedEvent]) -> Result<Vec<ReadFact<'_>>, Unplannable> {
    let mut facts = Vec::with_capacity(events.len());
    for e in events {
        match Fact::from_logged_unreadable(e) {
            Ok((f, unreadable)) => facts.push((e, f, unreadable)),
            Err(FactError::Unknown(_)) => {}
            Err(err) => return Err(Unplannable(err.to_string())),
        }
    }
    Ok(facts)
}

/// The tasks created before this batch that it checkpoints: their stored state must be
/// loaded and passed to [`plan`].
pub fn earlier_tasks(facts: &[ReadFact<'_>]) -> Vec<Uuid> {
    let created: HashSet<Uuid> = facts
        .iter()
        .filter_map(|(_, f, _)| match f {
            Fact::TaskCreated(t) => Some(t.id),
            _ => None,
        })
        .collect();
    facts
        .iter()
        .filter_map(|(_, f, _)| match f {
            Fact::TaskCheckpointCreated(c) if !created.contains(&c.task_id) => Some(c.task_id),
            _ => None,
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Plans `facts` given the stored state of [`earlier_tasks`].
///
/// # Errors
/// [`Unplannable`] when a task checkpoint names a task the read model does not have.
pub fn plan<'a>(
    facts: &'a [ReadFact<'_>],
    preloaded: HashMap<Uuid, TaskState>,
) -> Result<Plan<'a>, Unplannable> {
    let mut p = Plan {
        tasks: preloaded,
        ..Plan::default()
    };
    for (e, fact, unreadable) in facts {
        let unreadable = *unreadable;
        match fact {
            Fact::ActorRegistered(f) => p.actors.push((f, unreadable)),
            Fact::ActorForgotten(f) => p.forgotten.push((Party::Actor, f.id)),
            Fact::ConversationForgotten(f) => p.forgotten.push((Party::Conversation, f.id)),
            Fact::ConversationStarted(f) => {
                for (ordinal, actor) in f.actor_ids.iter().enumerate() {
                    p.members.push((f.id, *actor, ordinal as i64));
                }
                p.started
                    .push((f, e.recorded_at().unwrap_or(f.created_at), unreadable));
            }
            Fact::ConversationCheckpointCreated(f) => {
                let c = p.conversations.entry(f.conversation_id).or_default();
                c.checkpoints += 1;
                c.latest = Some(f.clone());
                c.latest_forgotten = unreadable;
                c.touch(e.recorded_at().unwrap_or(f.created_at));
                p.checkpoints.push((f, e.position, unreadable));
            }
            Fact::TaskCreated(f) => {
                let c = p.conversations.entry(f.conversation_id).or_default();
                c.tasks += 1;
                c.statuses[TaskStatus::NotStarted.index()] += 1;
                c.touch(e.recorded_at().unwrap_or(f.created_at));
                p.tasks.insert(
                    f.id,
                    TaskState::stored(f.conversation_id, TaskStatus::NotStarted, e.sequence),
                );
                p.created_here.insert(f.id);
                p.new_tasks.push((f, e.sequence, unreadable));
            }
            Fact::TaskCheckpointCreated(f) => {
                let task = p.tasks.get_mut(&f.task_id).ok_or_else(|| {
                    Unplannable(format!("task {} is not in the read model", f.task_id))
                })?;
                task.touched = true;
                task.added_checkpoints += 1;
                let c = p.conversations.entry(task.conversation_id).or_default();
                // Status: the latest checkpoint in the task's own event order.
                if e.sequence > task.status_sequence {
                    let status = TaskStatus::Latest(f.checkpoint_type);
                    c.statuses[task.status.index()] -= 1;
                    c.statuses[status.index()] += 1;
                    task.status = status;
                    task.status_sequence = e.sequence;
                    task.status_changed_at = Some(f.created_at);
                    if f.checkpoint_type == TaskCheckpointType::WorkCompleted {
                        task.last_completed = Some(f.created_at);
                    }
                }
                if f.checkpoint_type == TaskCheckpointType::WorkStarted
                    && task.first_started.is_none()
                {
                    task.first_started = Some(f.created_at);
                }
                c.touch(e.recorded_at().unwrap_or(f.created_at));
                p.task_checkpoints.push((f, e.sequence));
            }
            Fact::MessageAdded(f) => {
                let c = p.conversations.entry(f.conversation_id).or_default();
                c.messages += 1;
                c.touch(e.recorded_at().unwrap_or(f.time));
                p.messages.push((f, e.position, unreadable));
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests;
