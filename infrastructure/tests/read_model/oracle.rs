//! The oracle: the read model's former per-event path, one function per transition of
//! TRANSITIONS.md, each applying its fact with its own statements. Production applies
//! facts only through the batch path; this slow, obvious applier stays here so the
//! property test can check the batch path against it.
//!
//! Forgetting (TRUST.md "Forgetting a person"): a fact whose texts cannot be read is
//! stored with NULL in them and `forgotten` set; `actor.forgotten` and
//! `conversation.forgotten` clear the texts their party sealed, row by row.

use pm_application::fact::{Fact, FactError};
use pm_application::log::LoggedEvent;
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::message::MessageAdded;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};
use pm_domain::types::{TaskCheckpointType, TaskStatus};
use pm_infrastructure::db::{Args, Tx};
use pm_infrastructure::read_model::schema::{status_column, table};
use uuid::Uuid;

/// Why the oracle could not apply an event (the property test feeds it valid facts only).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A statement failed.
    #[error(transparent)]
    Sql(#[from] sqlx::Error),
    /// The event cannot be applied.
    #[error("{0}")]
    Poison(String),
}

/// Applies one logged event to generation `g`; events that are not facts are skipped.
pub async fn apply_event(tx: &mut Tx, g: i64, event: &LoggedEvent) -> Result<(), ApplyError> {
    let (fact, unreadable) = match Fact::from_logged_unreadable(event) {
        Ok(read) => read,
        Err(FactError::Unknown(_)) => return Ok(()),
        Err(e @ FactError::Malformed { .. }) => return Err(ApplyError::Poison(e.to_string())),
    };
    let recorded_at = event.recorded_at();
    match &fact {
        Fact::ActorRegistered(f) => actor_registered(tx, g, f, unreadable).await,
        Fact::ActorForgotten(f) => actor_forgotten(tx, g, f.id).await,
        Fact::ConversationForgotten(f) => conversation_forgotten(tx, g, f.id).await,
        Fact::ConversationStarted(f) => {
            let updated_at = recorded_at.unwrap_or(f.created_at);
            conversation_started(tx, g, f, updated_at, unreadable).await
        }
        Fact::ConversationCheckpointCreated(f) => {
            let updated_at = recorded_at.unwrap_or(f.created_at);
            conversation_checkpoint_created(tx, g, (event, f, unreadable), updated_at).await
        }
        Fact::TaskCreated(f) => {
            let updated_at = recorded_at.unwrap_or(f.created_at);
            task_created(tx, g, (event, f, unreadable), updated_at).await
        }
        Fact::TaskCheckpointCreated(f) => {
            task_checkpoint_created(tx, g, event, f, recorded_at.unwrap_or(f.created_at)).await
        }
        Fact::MessageAdded(f) => {
            message_added(tx, g, (event, f, unreadable), recorded_at.unwrap_or(f.time)).await
        }
    }
}

/// A personal text as stored: NULL when it could not be read.
fn personal(text: &str, unreadable: bool) -> Option<String> {
    (!unreadable).then(|| text.to_string())
}

/// Runs `sql` with `id` as `$1`.
async fn run(tx: &mut Tx, sql: &str, id: Uuid) -> Result<(), ApplyError> {
    tx.execute(sql, Args::new().uuid(id)).await?;
    Ok(())
}

/// `ActorForgotten`: the actor's name and identity, and the texts of every message they
/// wrote, cleared.
async fn actor_forgotten(tx: &mut Tx, g: i64, id: Uuid) -> Result<(), ApplyError> {
    let actors = format!(
        "UPDATE {} SET display_name = NULL, external_identity = NULL, forgotten = TRUE WHERE id = $1",
        table(g, "actors")
    );
    run(tx, &actors, id).await?;
    let messages = format!(
        "UPDATE {} SET content = NULL, external_identity = NULL, forgotten = TRUE WHERE actor_id = $1",
        table(g, "messages")
    );
    run(tx, &messages, id).await
}

/// `ConversationForgotten`: every text of the conversation cleared.
async fn conversation_forgotten(tx: &mut Tx, g: i64, id: Uuid) -> Result<(), ApplyError> {
    let conversation = format!(
        "UPDATE {} SET title = NULL, latest_checkpoint_summary = NULL, forgotten = TRUE WHERE id = $1",
        table(g, "conversations")
    );
    run(tx, &conversation, id).await?;
    for (name, set) in [
        ("conversation_checkpoints", "summary = NULL"),
        ("tasks", "instructions = NULL"),
        ("messages", "content = NULL, external_identity = NULL"),
    ] {
        let sql = format!(
            "UPDATE {} SET {set}, forgotten = TRUE WHERE conversation_id = $1",
            table(g, name)
        );
        run(tx, &sql, id).await?;
    }
    Ok(())
}

/// `updated_at` moves forward only.
const TOUCH: &str = "updated_at = CASE WHEN updated_at < $2 THEN $2 ELSE updated_at END";

/// Moves a conversation's `updated_at` forward and applies `set` (more `col = …`
/// assignments, or nothing).
async fn touch_conversation(
    tx: &mut Tx,
    g: i64,
    conversation_id: Uuid,
    updated_at: chrono::DateTime<chrono::Utc>,
    set: &str,
) -> Result<(), ApplyError> {
    let sql = format!(
        "UPDATE {} SET {set}{TOUCH} WHERE id = $1",
        table(g, "conversations")
    );
    tx.execute(&sql, Args::new().uuid(conversation_id).time(&updated_at))
        .await?;
    Ok(())
}

/// `ActorRegistered`: a row in `actors`.
async fn actor_registered(
    tx: &mut Tx,
    g: i64,
    f: &ActorRegistered,
    unreadable: bool,
) -> Result<(), ApplyError> {
    let sql = format!(
        "INSERT INTO {} (id, kind, display_name, external_identity, created_at, forgotten) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
        table(g, "actors")
    );
    let args = Args::new()
        .uuid(f.id)
        .text(f.kind.as_str())
        .opt_text(personal(f.display_name.as_str(), unreadable))
        .opt_text(f.external_identity.clone().filter(|_| !unreadable))
        .time(&f.created_at)
        .bool(unreadable);
    tx.execute(&sql, args).await?;
    Ok(())
}

/// `ConversationStarted`: a row in `conversations` and one per actor in
/// `conversation_actors`.
async fn conversation_started(
    tx: &mut Tx,
    g: i64,
    f: &ConversationStarted,
    updated_at: chrono::DateTime<chrono::Utc>,
    unreadable: bool,
) -> Result<(), ApplyError> {
    let sql = format!(
        "INSERT INTO {} (id, title, external_id, external_source, status, organization, created_at, updated_at, actor_ids, forgotten) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING",
        table(g, "conversations")
    );
    let args = Args::new()
        .uuid(f.id)
        .opt_text(personal(f.title.as_str(), unreadable))
        .opt_text(f.external_id.clone())
        .opt_text(f.external_source.clone())
        .opt_text(f.status.clone())
        .opt_text(f.organization.clone())
        .time(&f.created_at)
        .time(&updated_at)
        .text(actor_ids_json(&f.actor_ids))
        .bool(unreadable);
    tx.execute(&sql, args).await?;
    let sql = format!(
        "INSERT INTO {} (conversation_id, actor_id, ordinal) VALUES ($1, $2, $3) \
         ON CONFLICT (conversation_id, actor_id) DO NOTHING",
        table(g, "conversation_actors")
    );
    for (ordinal, actor) in f.actor_ids.iter().enumerate() {
        let args = Args::new().uuid(f.id).uuid(*actor).int(ordinal as i64);
        tx.execute(&sql, args).await?;
    }
    Ok(())
}

/// The `actor_ids` column: the ids as a JSON array.
fn actor_ids_json(ids: &[Uuid]) -> String {
    let quoted: Vec<String> = ids.iter().map(|id| format!("\"{id}\"")).collect();
    format!("[{}]", quoted.join(","))
}

/// `ConversationCheckpointCreated`: a row in `conversation_checkpoints`; the conversation's
/// latest checkpoint and checkpoint count.
async fn conversation_checkpoint_created(
    tx: &mut Tx,
    g: i64,
    (event, f, unreadable): (&LoggedEvent, &ConversationCheckpointCreated, bool),
    updated_at: chrono::DateTime<chrono::Utc>,
) -> Result<(), ApplyError> {
    let sql = format!(
        "INSERT INTO {} (id, conversation_id, checkpoint_type, summary, created_at, log_txid, log_seq, forgotten) \
         VALUES ($1, $2, $3, $4, $5, 0, $6, $7) ON CONFLICT (id) DO NOTHING",
        table(g, "conversation_checkpoints")
    );
    let args = Args::new()
        .uuid(f.id)
        .uuid(f.conversation_id)
        .text(f.checkpoint_type.as_str())
        .opt_text(personal(f.summary.as_str(), unreadable))
        .time(&f.created_at)
        .int(event.position.0)
        .bool(unreadable);
    if tx.execute(&sql, args).await? == 0 {
        return Ok(());
    }
    let sql = format!(
        "UPDATE {} SET latest_checkpoint_id = $3, latest_checkpoint_type = $4, \
         latest_checkpoint_summary = $5, latest_checkpoint_at = $6, \
         checkpoint_count = checkpoint_count + 1, {TOUCH} WHERE id = $1",
        table(g, "conversations")
    );
    let args = Args::new()
        .uuid(f.conversation_id)
        .time(&updated_at)
        .uuid(f.id)
        .text(f.checkpoint_type.as_str())
        .opt_text(personal(f.summary.as_str(), unreadable))
        .time(&f.created_at);
    tx.execute(&sql, args).await?;
    Ok(())
}

/// `TaskCreated`: a `NOT_STARTED` row in `tasks` (with its conversation's organization);
/// the conversation's task counts.
async fn task_created(
    tx: &mut Tx,
    g: i64,
    (event, f, unreadable): (&LoggedEvent, &TaskCreated, bool),
    updated_at: chrono::DateTime<chrono::Utc>,
) -> Result<(), ApplyError> {
    let sql = format!(
        "INSERT INTO {} (id, conversation_id, checkpoint_id, instructions, assigned_to, organization, created_at, status, status_sequence, forgotten) \
         SELECT $1, $2, $3, $4, $5, \
           (SELECT organization FROM {} WHERE id = $2), $6, $7, $8, $9 \
         ON CONFLICT (id) DO NOTHING",
        table(g, "tasks"),
        table(g, "conversations")
    );
    let args = Args::new()
        .uuid(f.id)
        .uuid(f.conversation_id)
        .uuid(f.checkpoint_id)
        .opt_text(personal(f.instructions.as_str(), unreadable))
        .opt_uuid(f.assigned_to)
        .time(&f.created_at)
        .text(TaskStatus::NOT_STARTED)
        .int(event.sequence)
        .bool(unreadable);
    if tx.execute(&sql, args).await? == 0 {
        return Ok(());
    }
    let not_started = status_column(TaskStatus::NotStarted);
    let set = format!("task_count = task_count + 1, {not_started} = {not_started} + 1, ");
    touch_conversation(tx, g, f.conversation_id, updated_at, &set).await
}

/// `TaskCheckpointCreated`: a row in `task_checkpoints`; the task's status when the
/// checkpoint is its latest (by stream sequence, never by clock), checkpoint count, first
/// start and latest completion; the conversation's task counts by status.
async fn task_checkpoint_created(
    tx: &mut Tx,
    g: i64,
    event: &LoggedEvent,
    f: &TaskCheckpointCreated,
    updated_at: chrono::DateTime<chrono::Utc>,
) -> Result<(), ApplyError> {
    let sql = format!(
        "SELECT status, status_sequence, conversation_id FROM {} WHERE id = $1",
        table(g, "tasks")
    );
    let Some(row) = tx.fetch_optional(&sql, Args::new().uuid(f.task_id)).await? else {
        return Err(ApplyError::Poison(format!(
            "task {} is not in the read model",
            f.task_id
        )));
    };
    let old_status = row.parsed("status", |s| {
        TaskStatus::parse(s).ok_or("unknown task status")
    })?;
    let status_sequence = row.int("status_sequence")?;
    let conversation_id = row.uuid("conversation_id")?;
    let sql = format!(
        "INSERT INTO {} (id, task_id, sequence, type, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
        table(g, "task_checkpoints")
    );
    let args = Args::new()
        .uuid(f.id)
        .uuid(f.task_id)
        .int(event.sequence)
        .text(f.checkpoint_type.as_str())
        .time(&f.created_at);
    if tx.execute(&sql, args).await? == 0 {
        return Ok(());
    }
    let newest = event.sequence > status_sequence;
    let sql = format!(
        "UPDATE {} SET checkpoint_count = checkpoint_count + 1, \
         status = CASE WHEN $2 THEN $3 ELSE status END, \
         status_changed_at = CASE WHEN $2 THEN $4 ELSE status_changed_at END, \
         status_sequence = CASE WHEN $2 THEN $5 ELSE status_sequence END, \
         first_work_started_at = CASE WHEN first_work_started_at IS NULL AND $6 THEN $4 ELSE first_work_started_at END, \
         last_work_completed_at = CASE WHEN $2 AND $7 THEN $4 ELSE last_work_completed_at END \
         WHERE id = $1",
        table(g, "tasks")
    );
    let args = Args::new()
        .uuid(f.task_id)
        .bool(newest)
        .text(f.checkpoint_type.as_str())
        .time(&f.created_at)
        .int(event.sequence)
        .bool(f.checkpoint_type == TaskCheckpointType::WorkStarted)
        .bool(f.checkpoint_type == TaskCheckpointType::WorkCompleted);
    tx.execute(&sql, args).await?;
    let new_status = TaskStatus::Latest(f.checkpoint_type);
    let set = if newest && old_status != new_status {
        let (old, new) = (status_column(old_status), status_column(new_status));
        format!("{old} = {old} - 1, {new} = {new} + 1, ")
    } else {
        String::new()
    };
    touch_conversation(tx, g, conversation_id, updated_at, &set).await
}

/// `MessageAdded`: a row in `messages`; the conversation's message count.
async fn message_added(
    tx: &mut Tx,
    g: i64,
    (event, f, unreadable): (&LoggedEvent, &MessageAdded, bool),
    updated_at: chrono::DateTime<chrono::Utc>,
) -> Result<(), ApplyError> {
    let sql = format!(
        "INSERT INTO {} (id, conversation_id, actor_id, task_id, content, external_identity, time, log_txid, log_seq, forgotten) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9) ON CONFLICT (id) DO NOTHING",
        table(g, "messages")
    );
    let args = Args::new()
        .uuid(f.id)
        .uuid(f.conversation_id)
        .uuid(f.actor_id)
        .opt_uuid(f.task_id)
        .opt_text(personal(f.content.as_str(), unreadable))
        .opt_text(f.external_identity.clone().filter(|_| !unreadable))
        .time(&f.time)
        .int(event.position.0)
        .bool(unreadable);
    if tx.execute(&sql, args).await? == 0 {
        return Ok(());
    }
    touch_conversation(
        tx,
        g,
        f.conversation_id,
        updated_at,
        "message_count = message_count + 1, ",
    )
    .await
}
