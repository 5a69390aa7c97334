//! The columns each entity is selected with, and how a row becomes its typed view.
//!
//! A personal text that is NULL was forgotten (TRUST.md "Forgetting a person"): it is
//! read as [`STAND_IN`] into the typed view, and the row's `forgotten` makes the view
//! [`Forgettable`], which shows it `null`.

use pm_application::views::{
    ConversationView, Forgettable, LatestCheckpoint, TaskCheckpointView, TaskCounts, TaskView,
};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::message::MessageAdded;
use pm_domain::personal::STAND_IN;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use pm_domain::types::{ActorKind, CheckpointType, TaskCheckpointType, TaskStatus};
use pm_domain::{Label, NonEmptyText};

use crate::db::DbRow;
use crate::read_model::schema::status_column;

fn text(r: &DbRow, col: &str) -> Result<NonEmptyText, sqlx::Error> {
    r.parsed(col, |s| NonEmptyText::parse(s))
}

/// A personal text: [`STAND_IN`] when forgotten (NULL).
fn personal(r: &DbRow, col: &str) -> Result<NonEmptyText, sqlx::Error> {
    match r.opt_string(col)? {
        None => NonEmptyText::parse(STAND_IN).map_err(|e| sqlx::Error::Decode(e.into())),
        Some(_) => text(r, col),
    }
}

/// The row as a [`Forgettable`] `entity`.
fn forgettable<T>(r: &DbRow, entity: T) -> Result<Forgettable<T>, sqlx::Error> {
    Ok(Forgettable::new(entity, r.bool("forgotten")?))
}

fn opt_label(r: &DbRow, col: &str) -> Result<Option<Label>, sqlx::Error> {
    match r.opt_string(col)? {
        None => Ok(None),
        Some(_) => r.parsed(col, |s| Label::parse(s)).map(Some),
    }
}

/// The columns of an actor row.
pub(super) const ACTOR_COLUMNS: &str =
    "id, kind, display_name, external_identity, created_at, forgotten";

/// An actor row.
pub(super) fn actor(r: &DbRow) -> Result<Forgettable<ActorRegistered>, sqlx::Error> {
    let actor = ActorRegistered {
        id: r.uuid("id")?,
        kind: r.parsed("kind", |k| ActorKind::parse(k).ok_or("unknown actor kind"))?,
        display_name: personal(r, "display_name")?,
        external_identity: opt_label(r, "external_identity")?,
        created_at: r.time("created_at")?,
    };
    forgettable(r, actor)
}

/// The columns of a conversation row.
pub(super) fn conversation_columns() -> String {
    let counts: Vec<String> = TaskStatus::all().map(status_column).collect();
    format!(
        "id, title, actor_ids, external_id, external_source, status, organization, \
         created_at, updated_at, latest_checkpoint_id, latest_checkpoint_type, \
         latest_checkpoint_summary, latest_checkpoint_at, checkpoint_count, message_count, task_count, \
         forgotten, {}",
        counts.join(", ")
    )
}

/// A conversation row.
pub(super) fn conversation(r: &DbRow) -> Result<Forgettable<ConversationView>, sqlx::Error> {
    let latest = match r.opt_uuid("latest_checkpoint_id")? {
        None => None,
        Some(id) => Some(LatestCheckpoint {
            id,
            checkpoint_type: r.parsed("latest_checkpoint_type", |t| {
                CheckpointType::parse(t).ok_or("unknown checkpoint type")
            })?,
            summary: personal(r, "latest_checkpoint_summary")?,
            created_at: r.time("latest_checkpoint_at")?,
        }),
    };
    let mut task_counts = TaskCounts::default();
    for status in TaskStatus::all() {
        task_counts.add(status, r.int(&status_column(status))?);
    }
    let view = ConversationView {
        conversation: ConversationStarted {
            id: r.uuid("id")?,
            actor_ids: r.parsed("actor_ids", |s| serde_json::from_str(s))?,
            title: personal(r, "title")?,
            external_id: opt_label(r, "external_id")?,
            external_source: opt_label(r, "external_source")?,
            status: opt_label(r, "status")?,
            organization: opt_label(r, "organization")?,
            created_at: r.time("created_at")?,
            updated_at: r.time("updated_at")?,
        },
        latest_checkpoint: latest,
        checkpoint_count: r.int("checkpoint_count")?,
        message_count: r.int("message_count")?,
        task_count: r.int("task_count")?,
        task_counts,
    };
    forgettable(r, view)
}

/// The columns of a conversation checkpoint row.
pub(super) const CHECKPOINT_COLUMNS: &str =
    "id, conversation_id, checkpoint_type, summary, created_at, forgotten";

/// A conversation checkpoint row.
pub(super) fn checkpoint(
    r: &DbRow,
) -> Result<Forgettable<ConversationCheckpointCreated>, sqlx::Error> {
    let checkpoint = ConversationCheckpointCreated {
        id: r.uuid("id")?,
        conversation_id: r.uuid("conversation_id")?,
        checkpoint_type: r.parsed("checkpoint_type", |t| {
            CheckpointType::parse(t).ok_or("unknown checkpoint type")
        })?,
        summary: personal(r, "summary")?,
        created_at: r.time("created_at")?,
    };
    forgettable(r, checkpoint)
}

/// The columns of a message row.
pub(super) const MESSAGE_COLUMNS: &str = "id, conversation_id, \
    actor_id, task_id, content, external_identity, time, forgotten";

/// A message row.
pub(super) fn message(r: &DbRow) -> Result<Forgettable<MessageAdded>, sqlx::Error> {
    let message = MessageAdded {
        id: r.uuid("id")?,
        time: r.time("time")?,
        actor_id: r.uuid("actor_id")?,
        conversation_id: r.uuid("conversation_id")?,
        task_id: r.opt_uuid("task_id")?,
        content: personal(r, "content")?,
        external_identity: opt_label(r, "external_identity")?,
    };
    forgettable(r, message)
}

/// The columns of a task row.
pub(super) const TASK_COLUMNS: &str = "id, conversation_id, \
    checkpoint_id, instructions, assigned_to, organization, \
    created_at, status, status_changed_at, checkpoint_count, forgotten";

/// A task row.
pub(super) fn task(r: &DbRow) -> Result<Forgettable<TaskView>, sqlx::Error> {
    let task = TaskView {
        task: TaskCreated {
            id: r.uuid("id")?,
            conversation_id: r.uuid("conversation_id")?,
            checkpoint_id: r.uuid("checkpoint_id")?,
            instructions: personal(r, "instructions")?,
            assigned_to: r.opt_uuid("assigned_to")?,
            created_at: r.time("created_at")?,
        },
        organization: r.opt_string("organization")?,
        status: r.parsed("status", |s| {
            TaskStatus::parse(s).ok_or("unknown task status")
        })?,
        status_changed_at: r.opt_time("status_changed_at")?,
        checkpoint_count: r.int("checkpoint_count")?,
    };
    forgettable(r, task)
}

/// The columns of a task checkpoint row.
pub(super) const TASK_CHECKPOINT_COLUMNS: &str = "id, task_id, type, created_at, sequence";

/// A task checkpoint row.
pub(super) fn task_checkpoint(r: &DbRow) -> Result<TaskCheckpointView, sqlx::Error> {
    Ok(TaskCheckpointView {
        checkpoint: TaskCheckpointCreated {
            id: r.uuid("id")?,
            task_id: r.uuid("task_id")?,
            checkpoint_type: r.parsed("type", |t| {
                TaskCheckpointType::parse(t).ok_or("unknown task checkpoint type")
            })?,
            created_at: r.time("created_at")?,
        },
        sequence: r.int("sequence")?,
    })
}
