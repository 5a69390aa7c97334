//! The in-memory half of the projection's fast path: a batch of events becomes the rows
//! to insert and the summed deltas per task and conversation. Pure: no I/O.

use std::collections::{BTreeSet, HashMap, HashSet};

use pm_application::fact::{Fact, FactError};
use pm_application::log::{LogPosition, LoggedEvent};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::message::MessageAdded;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use pm_domain::time;
use pm_domain::types::TaskCheckpointType;
use uuid::Uuid;

/// Summed changes to one conversation row.
#[derive(Debug, Default)]
pub(crate) struct ConversationDelta {
    pub(crate) messages: i64,
    pub(crate) checkpoints: i64,
    pub(crate) tasks: i64,
    /// Task counts by status column index (see [`STATUS_COLUMNS`]).
    pub(crate) statuses: [i64; 6],
    /// The latest checkpoint: id, type, summary, created_at.
    pub(crate) latest: Option<(String, String, String, String)>,
    pub(crate) updated_at: Option<String>,
}

/// Summed changes to one task row.
#[derive(Debug, Clone)]
pub(crate) struct TaskState {
    pub(crate) conversation_id: String,
    pub(crate) status: Option<TaskCheckpointType>,
    pub(crate) status_sequence: i64,
    pub(crate) status_changed_at: Option<String>,
    pub(crate) first_started: Option<String>,
    pub(crate) last_completed: Option<String>,
    pub(crate) added_checkpoints: i64,
    pub(crate) touched: bool,
}

pub(crate) const STATUS_COLUMNS: [&str; 6] = [
    "tasks_not_started",
    "tasks_work_started",
    "tasks_work_completed",
    "tasks_work_approved",
    "tasks_work_rejected",
    "tasks_work_paused",
];

fn status_index(status: Option<TaskCheckpointType>) -> usize {
    match status {
        None => 0,
        Some(TaskCheckpointType::WorkStarted) => 1,
        Some(TaskCheckpointType::WorkCompleted) => 2,
        Some(TaskCheckpointType::WorkApproved) => 3,
        Some(TaskCheckpointType::WorkRejected) => 4,
        Some(TaskCheckpointType::WorkPaused) => 5,
    }
}

fn bump(at: &mut Option<String>, t: &str) {
    if at.as_deref().is_none_or(|cur| cur < t) {
        *at = Some(t.to_string());
    }
}

/// An event the fast path cannot plan: the caller falls back to the per-event path.
#[derive(Debug)]
pub(crate) struct Unplannable(pub String);

/// Rows to insert and deltas to apply for one batch.
#[derive(Debug, Default)]
pub(crate) struct Plan<'a> {
    pub actors: Vec<&'a ActorRegistered>,
    /// Conversations with their `created_at` and `updated_at`.
    pub started: Vec<(&'a ConversationStarted, String, String)>,
    /// (conversation, actor, ordinal)
    pub members: Vec<(Uuid, Uuid, i64)>,
    pub checkpoints: Vec<(&'a ConversationCheckpointCreated, String, LogPosition)>,
    /// Tasks with `created_at` and creation sequence.
    pub new_tasks: Vec<(&'a TaskCreated, String, i64)>,
    /// Task checkpoints with `created_at` and stream sequence.
    pub task_checkpoints: Vec<(&'a TaskCheckpointCreated, String, i64)>,
    pub messages: Vec<(&'a MessageAdded, String, LogPosition)>,
    /// Every task the batch creates or checkpoints, in its state after the batch.
    pub tasks: HashMap<Uuid, TaskState>,
    /// Tasks created in this batch.
    pub created_here: HashSet<Uuid>,
    /// Deltas per conversation id.
    pub conversations: HashMap<String, ConversationDelta>,
}

/// Reads a batch's facts (skipping events that are not facts).
///
/// # Errors
/// [`Unplannable`] for a fact whose payload does not parse.
pub(crate) fn read(events: &[LoggedEvent]) -> Result<Vec<(&LoggedEvent, Fact)>, Unplannable> {
    let mut facts = Vec::with_capacity(events.len());
    for e in events {
        match Fact::from_logged(e) {
            Ok(f) => facts.push((e, f)),
            Err(FactError::Unknown(_)) => {}
            Err(err) => return Err(Unplannable(err.to_string())),
        }
    }
    Ok(facts)
}

/// The tasks created before this batch that it checkpoints: their state must be loaded.
pub(crate) fn earlier_tasks(facts: &[(&LoggedEvent, Fact)]) -> Vec<Uuid> {
    let created: HashSet<Uuid> = facts
        .iter()
        .filter_map(|(_, f)| match f {
            Fact::TaskCreated(t) => Some(t.id),
            _ => None,
        })
        .collect();
    facts
        .iter()
        .filter_map(|(_, f)| match f {
            Fact::TaskCheckpointCreated(c) if !created.contains(&c.task_id) => Some(c.task_id),
            _ => None,
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

impl TaskState {
    /// A task as stored before the batch.
    pub(crate) fn stored(
        conversation_id: String,
        status: &str,
        status_sequence: i64,
        started: bool,
    ) -> Self {
        Self {
            conversation_id,
            status: TaskCheckpointType::parse(status),
            status_sequence,
            status_changed_at: None,
            // An empty marker: "already has a first start, keep it".
            first_started: started.then(String::new),
            last_completed: None,
            added_checkpoints: 0,
            touched: false,
        }
    }
}

/// Plans `facts` given the stored state of [`earlier_tasks`].
///
/// # Errors
/// [`Unplannable`] when a task checkpoint names a task the read model does not have.
pub(crate) fn plan<'a>(
    facts: &'a [(&LoggedEvent, Fact)],
    preloaded: HashMap<Uuid, TaskState>,
) -> Result<Plan<'a>, Unplannable> {
    let mut p = Plan {
        tasks: preloaded,
        ..Plan::default()
    };
    let recorded = |e: &LoggedEvent, fallback: &str| {
        e.metadata
            .get("recorded_at")
            .and_then(|v| v.as_str())
            .unwrap_or(fallback)
            .to_string()
    };
    for (e, fact) in facts {
        match fact {
            Fact::ActorRegistered(f) => p.actors.push(f),
            Fact::ConversationStarted(f) => {
                let created = time::format(&f.created_at);
                for (ordinal, actor) in f.actor_ids.iter().enumerate() {
                    p.members.push((f.id, *actor, ordinal as i64));
                }
                p.started.push((f, created.clone(), recorded(e, &created)));
            }
            Fact::ConversationCheckpointCreated(f) => {
                let created = time::format(&f.created_at);
                let c = p
                    .conversations
                    .entry(f.conversation_id.to_string())
                    .or_default();
                c.checkpoints += 1;
                c.latest = Some((
                    f.id.to_string(),
                    f.checkpoint_type.as_str().to_string(),
                    f.summary.as_str().to_string(),
                    created.clone(),
                ));
                bump(&mut c.updated_at, &recorded(e, &created));
                p.checkpoints.push((f, created, e.position));
            }
            Fact::TaskCreated(f) => {
                let created = time::format(&f.created_at);
                let c = p
                    .conversations
                    .entry(f.conversation_id.to_string())
                    .or_default();
                c.tasks += 1;
                c.statuses[0] += 1;
                bump(&mut c.updated_at, &recorded(e, &created));
                p.tasks.insert(
                    f.id,
                    TaskState {
                        conversation_id: f.conversation_id.to_string(),
                        status: None,
                        status_sequence: e.sequence,
                        status_changed_at: None,
                        first_started: None,
                        last_completed: None,
                        added_checkpoints: 0,
                        touched: false,
                    },
                );
                p.created_here.insert(f.id);
                p.new_tasks.push((f, created, e.sequence));
            }
            Fact::TaskCheckpointCreated(f) => {
                let created = time::format(&f.created_at);
                let task = p.tasks.get_mut(&f.task_id).ok_or_else(|| {
                    Unplannable(format!("task {} is not in the read model", f.task_id))
                })?;
                task.touched = true;
                task.added_checkpoints += 1;
                let c = p
                    .conversations
                    .entry(task.conversation_id.clone())
                    .or_default();
                // Status: the latest checkpoint in the task's own event order.
                if e.sequence > task.status_sequence {
                    c.statuses[status_index(task.status)] -= 1;
                    c.statuses[status_index(Some(f.checkpoint_type))] += 1;
                    task.status = Some(f.checkpoint_type);
                    task.status_sequence = e.sequence;
                    task.status_changed_at = Some(created.clone());
                    if f.checkpoint_type == TaskCheckpointType::WorkCompleted {
                        task.last_completed = Some(created.clone());
                    }
                }
                if f.checkpoint_type == TaskCheckpointType::WorkStarted
                    && task.first_started.is_none()
                {
                    task.first_started = Some(created.clone());
                }
                bump(&mut c.updated_at, &recorded(e, &created));
                p.task_checkpoints.push((f, created, e.sequence));
            }
            Fact::MessageAdded(f) => {
                let at = time::format(&f.time);
                let c = p
                    .conversations
                    .entry(f.conversation_id.to_string())
                    .or_default();
                c.messages += 1;
                bump(&mut c.updated_at, &recorded(e, &at));
                p.messages.push((f, at, e.position));
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(seq: i64, event_type: &str, sequence: i64, payload: serde_json::Value) -> LoggedEvent {
        LoggedEvent {
            position: LogPosition { txid: 0, seq },
            aggregate_type: "task".into(),
            aggregate_id: "x".into(),
            sequence,
            event_type: event_type.into(),
            event_version: "1.0".into(),
            payload,
            metadata: json!({"recorded_at": format!("2026-11-22T00:00:{seq:02}.000000Z")}),
            conversation_id: None,
        }
    }

    const C: &str = "00000000-0000-0000-0000-00000000000c";
    const T: &str = "00000000-0000-0000-0000-00000000000a";

    fn task_created() -> LoggedEvent {
        event(
            1,
            "project_manager.task.created",
            1,
            json!({
            "id": T, "conversation_id": C, "checkpoint_id": C, "instructions": "do",
            "created_at": "2026-11-22T00:00:01.000000Z"}),
        )
    }

    fn checkpoint(seq: i64, sequence: i64, kind: &str) -> LoggedEvent {
        event(
            seq,
            "project_manager.task.checkpoint.created",
            sequence,
            json!({
            "id": Uuid::from_u128(seq as u128).to_string(), "task_id": T, "type": kind,
            "created_at": format!("2026-11-22T00:00:{seq:02}.000000Z")}),
        )
    }

    #[test]
    fn given_a_new_task_and_checkpoints_in_one_batch_then_status_is_the_last_one() {
        let events = vec![
            task_created(),
            checkpoint(2, 2, "WORK_STARTED"),
            checkpoint(3, 3, "WORK_COMPLETED"),
        ];
        let facts = read(&events).expect("facts");
        assert!(earlier_tasks(&facts).is_empty());
        let p = plan(&facts, HashMap::new()).expect("plan");
        let task = &p.tasks[&T.parse::<Uuid>().expect("uuid")];
        assert_eq!(task.status, Some(TaskCheckpointType::WorkCompleted));
        assert_eq!(task.status_sequence, 3);
        assert_eq!(task.added_checkpoints, 2);
        assert_eq!(
            task.first_started.as_deref(),
            Some("2026-11-22T00:00:02.000000Z")
        );
        assert_eq!(
            task.last_completed.as_deref(),
            Some("2026-11-22T00:00:03.000000Z")
        );
        let c = &p.conversations[C];
        assert_eq!(c.tasks, 1);
        // NOT_STARTED +1 -1, WORK_STARTED +1 -1, WORK_COMPLETED +1
        assert_eq!(c.statuses, [0, 0, 1, 0, 0, 0]);
        assert_eq!(c.updated_at.as_deref(), Some("2026-11-22T00:00:03.000000Z"));
    }

    #[test]
    fn given_a_stored_task_when_planned_then_counts_move_from_its_stored_status() {
        let events = vec![checkpoint(9, 4, "WORK_PAUSED")];
        let facts = read(&events).expect("facts");
        let id: Uuid = T.parse().expect("uuid");
        assert_eq!(earlier_tasks(&facts), vec![id]);
        let stored = HashMap::from([(id, TaskState::stored(C.into(), "WORK_STARTED", 3, true))]);
        let p = plan(&facts, stored).expect("plan");
        assert_eq!(p.conversations[C].statuses, [0, -1, 0, 0, 0, 1]);
        assert_eq!(
            p.tasks[&id].first_started.as_deref(),
            Some(""),
            "the stored first start is kept"
        );
    }

    #[test]
    fn given_an_older_sequence_when_planned_then_status_does_not_move() {
        let events = vec![checkpoint(9, 2, "WORK_PAUSED")];
        let facts = read(&events).expect("facts");
        let id: Uuid = T.parse().expect("uuid");
        let stored = HashMap::from([(id, TaskState::stored(C.into(), "WORK_STARTED", 3, true))]);
        let p = plan(&facts, stored).expect("plan");
        assert_eq!(p.tasks[&id].status, Some(TaskCheckpointType::WorkStarted));
        assert_eq!(p.conversations[C].statuses, [0; 6]);
    }

    #[test]
    fn given_a_checkpoint_of_an_unknown_task_then_unplannable() {
        let events = vec![checkpoint(9, 2, "WORK_PAUSED")];
        let facts = read(&events).expect("facts");
        assert!(plan(&facts, HashMap::new()).is_err());
        let bad = vec![event(
            1,
            "project_manager.message.added",
            1,
            json!({"id": T}),
        )];
        assert!(read(&bad).is_err());
    }
}
