//! The read model's one applier: the planner ([`pm_application::read_model::plan`]) turns
//! a batch into rows and summed deltas, and these functions write them with one multi-row
//! `INSERT` per table and one multi-row `UPDATE` for the touched tasks and one for the
//! touched conversations — instead of two or three statements per event. The live
//! projection and the rebuild both apply facts only this way; a batch that fails for a
//! reason that is not transient is split by the poison isolation
//! ([`pm_application::processor::isolate`]) until the culprit is alone.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::read_model::plan::{self, ConversationDelta, Plan, TaskState};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::message::MessageAdded;
use pm_domain::task::TaskCheckpointCreated;
use pm_domain::types::TaskStatus;
use uuid::Uuid;

use super::error::ApplyError;
use super::schema::{status_column, table};
use crate::db::{params, Args, SqlType, Tx};

const UUID: SqlType = SqlType::Uuid;
const TEXT: SqlType = SqlType::Text;
const INT: SqlType = SqlType::Int;
const TS: SqlType = SqlType::Time;
const BOOL: SqlType = SqlType::Bool;
/// The read tables' `log_txid`: 0 since log positions are single numbers (the column
/// stays so that tables built before keep their shape).
const LOG_TXID: i64 = 0;

/// Applies `events` to generation `g` in the caller's transaction (the caller rolls it, or
/// its savepoint, back on an error).
///
/// # Errors
/// [`ApplyError::Rejected`] when the batch cannot be applied and retrying will not help
/// (an unreadable fact, a checkpoint of a task the read model lacks, a failed statement
/// whose error is not transient); [`ApplyError::Sql`] for a transient one.
pub(crate) async fn apply_batch(
    tx: &mut Tx,
    g: i64,
    events: &[LoggedEvent],
) -> Result<(), ApplyError> {
    let rejected = |e: plan::Unplannable| ApplyError::Rejected(e.0);
    let facts = plan::read(events).map_err(rejected)?;
    let written = async {
        let preloaded = load_tasks(tx, g, &plan::earlier_tasks(&facts)).await?;
        let plan = plan::plan(&facts, preloaded).map_err(rejected)?;
        insert_actors(tx, g, &plan.actors).await?;
        insert_conversations(tx, g, &plan.started).await?;
        insert_members(tx, g, &plan.members).await?;
        insert_checkpoints(tx, g, &plan.checkpoints).await?;
        insert_tasks(tx, g, &plan).await?;
        insert_task_checkpoints(tx, g, &plan.task_checkpoints).await?;
        insert_messages(tx, g, &plan.messages).await?;
        update_tasks(tx, g, &plan).await?;
        update_conversations(tx, g, &plan.conversations).await?;
        super::forget::apply(tx, g, &plan.forgotten).await
    };
    written.await.map_err(|e| match e {
        ApplyError::Sql(e) => ApplyError::of_statement(e),
        other => other,
    })
}

/// A personal text as stored: NULL when it could not be read.
fn personal(text: &str, unreadable: bool) -> Option<String> {
    (!unreadable).then(|| text.to_string())
}

/// An optional personal text as stored: NULL when it could not be read.
fn opt_personal<T: Clone + Into<String>>(text: &Option<T>, unreadable: bool) -> Option<String> {
    text.clone().filter(|_| !unreadable).map(Into::into)
}

/// The `actor_ids` column: the ids as a JSON array.
fn actor_ids_json(ids: &[Uuid]) -> String {
    let quoted: Vec<String> = ids.iter().map(|id| format!("\"{id}\"")).collect();
    format!("[{}]", quoted.join(","))
}

/// One multi-row `INSERT`: `head` (`INSERT INTO t (cols)`), `rows` tuples of `types`.
async fn insert(
    tx: &mut Tx,
    head: &str,
    types: &[SqlType],
    rows: usize,
    args: Args,
    tail: &str,
) -> Result<(), ApplyError> {
    if rows > 0 {
        tx.insert_rows(head, types, rows, args, tail).await?;
    }
    Ok(())
}

/// The stored state of tasks created before the batch.
async fn load_tasks(
    tx: &mut Tx,
    g: i64,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, TaskState>, ApplyError> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let list = params(1, ids.len());
    let sql = format!(
        "SELECT id, conversation_id, status, status_sequence FROM {} WHERE id IN ({list})",
        table(g, "tasks")
    );
    let args = ids
        .iter()
        .fold(Args::with_capacity(ids.len()), |a, id| a.uuid(*id));
    let mut stored = HashMap::with_capacity(ids.len());
    for row in tx.fetch_all(&sql, args).await? {
        let status = row.parsed("status", |s| {
            TaskStatus::parse(s).ok_or("unknown task status")
        })?;
        let state = TaskState::stored(
            row.uuid("conversation_id")?,
            status,
            row.int("status_sequence")?,
        );
        stored.insert(row.uuid("id")?, state);
    }
    Ok(stored)
}

async fn insert_actors(
    tx: &mut Tx,
    g: i64,
    actors: &[(&ActorRegistered, bool)],
) -> Result<(), ApplyError> {
    let head = format!(
        "INSERT INTO {} (id, kind, display_name, external_identity, created_at, forgotten)",
        table(g, "actors")
    );
    let args = actors.iter().fold(
        Args::with_capacity(actors.len() * 6),
        |a, (f, unreadable)| {
            a.uuid(f.id)
                .text(f.kind.as_str())
                .opt_text(personal(f.display_name.as_str(), *unreadable))
                .opt_text(opt_personal(&f.external_identity, *unreadable))
                .time(&f.created_at)
                .bool(*unreadable)
        },
    );
    insert(
        tx,
        &head,
        &[UUID, TEXT, TEXT, TEXT, TS, BOOL],
        actors.len(),
        args,
        "",
    )
    .await
}

async fn insert_conversations(
    tx: &mut Tx,
    g: i64,
    started: &[(&ConversationStarted, DateTime<Utc>, bool)],
) -> Result<(), ApplyError> {
    let head = format!(
        "INSERT INTO {} (id, title, external_id, external_source, status, organization, created_at, updated_at, actor_ids, forgotten)",
        table(g, "conversations")
    );
    let args = started.iter().fold(
        Args::with_capacity(started.len() * 10),
        |a, (f, updated, unreadable)| {
            a.uuid(f.id)
                .opt_text(personal(f.title.as_str(), *unreadable))
                .opt_text(f.external_id.clone())
                .opt_text(f.external_source.clone())
                .opt_text(f.status.clone())
                .opt_text(f.organization.clone())
                .time(&f.created_at)
                .time(updated)
                .text(actor_ids_json(&f.actor_ids))
                .bool(*unreadable)
        },
    );
    insert(
        tx,
        &head,
        &[UUID, TEXT, TEXT, TEXT, TEXT, TEXT, TS, TS, TEXT, BOOL],
        started.len(),
        args,
        "",
    )
    .await
}

async fn insert_members(
    tx: &mut Tx,
    g: i64,
    members: &[(Uuid, Uuid, i64)],
) -> Result<(), ApplyError> {
    let head = format!(
        "INSERT INTO {} (conversation_id, actor_id, ordinal)",
        table(g, "conversation_actors")
    );
    let args = members.iter().fold(
        Args::with_capacity(members.len() * 3),
        |a, (c, actor, ordinal)| a.uuid(*c).uuid(*actor).int(*ordinal),
    );
    let tail = " ON CONFLICT (conversation_id, actor_id) DO NOTHING";
    insert(tx, &head, &[UUID, UUID, INT], members.len(), args, tail).await
}

async fn insert_checkpoints(
    tx: &mut Tx,
    g: i64,
    checkpoints: &[(&ConversationCheckpointCreated, LogPosition, bool)],
) -> Result<(), ApplyError> {
    let head = format!(
        "INSERT INTO {} (id, conversation_id, checkpoint_type, summary, created_at, log_txid, log_seq, forgotten)",
        table(g, "conversation_checkpoints")
    );
    let args = checkpoints.iter().fold(
        Args::with_capacity(checkpoints.len() * 8),
        |a, (f, position, unreadable)| {
            a.uuid(f.id)
                .uuid(f.conversation_id)
                .text(f.checkpoint_type.as_str())
                .opt_text(personal(f.summary.as_str(), *unreadable))
                .time(&f.created_at)
                .int(LOG_TXID)
                .int(position.0)
                .bool(*unreadable)
        },
    );
    insert(
        tx,
        &head,
        &[UUID, UUID, TEXT, TEXT, TS, INT, INT, BOOL],
        checkpoints.len(),
        args,
        "",
    )
    .await
}

/// Tasks created in this batch, inserted in their state after the batch.
async fn insert_tasks(tx: &mut Tx, g: i64, plan: &Plan<'_>) -> Result<(), ApplyError> {
    let sql = format!(
        "INSERT INTO {} (id, conversation_id, checkpoint_id, instructions, assigned_to, organization, created_at, \
         status, status_changed_at, status_sequence, checkpoint_count, first_work_started_at, last_work_completed_at, \
         forgotten) \
         SELECT $1, $2, $3, $4, $5, (SELECT organization FROM {} WHERE id = $2), \
         $6, $7, $8, $9, $10, $11, $12, $13",
        table(g, "tasks"),
        table(g, "conversations")
    );
    for (f, sequence, unreadable) in &plan.new_tasks {
        let state = plan.tasks.get(&f.id);
        let args = Args::new()
            .uuid(f.id)
            .uuid(f.conversation_id)
            .uuid(f.checkpoint_id)
            .opt_text(personal(f.instructions.as_str(), *unreadable))
            .opt_uuid(f.assigned_to)
            .time(&f.created_at)
            .text(state.map_or(TaskStatus::NotStarted, |s| s.status).as_str())
            .opt_time(state.and_then(|s| s.status_changed_at.as_ref()))
            .int(state.map_or(*sequence, |s| s.status_sequence))
            .int(state.map_or(0, |s| s.added_checkpoints))
            .opt_time(state.and_then(|s| s.first_started.as_ref()))
            .opt_time(state.and_then(|s| s.last_completed.as_ref()))
            .bool(*unreadable);
        tx.execute(&sql, args).await?;
    }
    Ok(())
}

async fn insert_task_checkpoints(
    tx: &mut Tx,
    g: i64,
    checkpoints: &[(&TaskCheckpointCreated, i64)],
) -> Result<(), ApplyError> {
    let head = format!(
        "INSERT INTO {} (id, task_id, sequence, type, created_at)",
        table(g, "task_checkpoints")
    );
    let args = checkpoints.iter().fold(
        Args::with_capacity(checkpoints.len() * 5),
        |a, (f, sequence)| {
            a.uuid(f.id)
                .uuid(f.task_id)
                .int(*sequence)
                .text(f.checkpoint_type.as_str())
                .time(&f.created_at)
        },
    );
    insert(
        tx,
        &head,
        &[UUID, UUID, INT, TEXT, TS],
        checkpoints.len(),
        args,
        "",
    )
    .await
}

async fn insert_messages(
    tx: &mut Tx,
    g: i64,
    messages: &[(&MessageAdded, LogPosition, bool)],
) -> Result<(), ApplyError> {
    let head = format!(
        "INSERT INTO {} (id, conversation_id, actor_id, task_id, content, external_identity, time, log_txid, log_seq, forgotten)",
        table(g, "messages")
    );
    let args = messages.iter().fold(
        Args::with_capacity(messages.len() * 10),
        |a, (f, position, unreadable)| {
            a.uuid(f.id)
                .uuid(f.conversation_id)
                .uuid(f.actor_id)
                .opt_uuid(f.task_id)
                .opt_text(personal(f.content.as_str(), *unreadable))
                .opt_text(opt_personal(&f.external_identity, *unreadable))
                .time(&f.time)
                .int(LOG_TXID)
                .int(position.0)
                .bool(*unreadable)
        },
    );
    insert(
        tx,
        &head,
        &[UUID, UUID, UUID, UUID, TEXT, TEXT, TS, INT, INT, BOOL],
        messages.len(),
        args,
        "",
    )
    .await
}

/// `WITH v (columns) AS (<rows>) UPDATE <table> SET <set> FROM v WHERE <table>.id =
/// v.row_id`: one statement for every touched row of a table ([`Tx::fetch_rows`]).
async fn update_from_values(
    tx: &mut Tx,
    table: &str,
    columns: &str,
    types: &[SqlType],
    set: &str,
    rows: usize,
    args: Args,
) -> Result<(), ApplyError> {
    if rows > 0 {
        tx.fetch_rows(types, rows, args, |source| {
            format!("WITH v ({columns}) AS ({source}) UPDATE {table} SET {set} FROM v WHERE {table}.id = v.row_id")
        })
        .await?;
    }
    Ok(())
}

/// Tasks created before the batch that got checkpoints in it: one `UPDATE`.
async fn update_tasks(tx: &mut Tx, g: i64, plan: &Plan<'_>) -> Result<(), ApplyError> {
    let touched: Vec<_> = plan
        .tasks
        .iter()
        .filter(|(id, s)| s.touched && !plan.created_here.contains(id))
        .collect();
    let args = touched
        .iter()
        .fold(Args::with_capacity(touched.len() * 7), |a, (id, s)| {
            let changed = s.status_changed_at.as_ref();
            a.uuid(**id)
                .int(s.added_checkpoints)
                .opt_text(changed.map(|_| s.status.as_str()))
                .opt_time(changed)
                .int(s.status_sequence)
                .opt_time(s.first_started.as_ref())
                .opt_time(s.last_completed.as_ref())
        });
    update_from_values(
        tx,
        &table(g, "tasks"),
        "row_id, added, new_status, changed_at, new_sequence, started, completed",
        &[UUID, INT, TEXT, TS, INT, TS, TS],
        "checkpoint_count = checkpoint_count + v.added, \
         status = COALESCE(v.new_status, status), \
         status_changed_at = COALESCE(v.changed_at, status_changed_at), \
         status_sequence = v.new_sequence, \
         first_work_started_at = COALESCE(first_work_started_at, v.started), \
         last_work_completed_at = COALESCE(v.completed, last_work_completed_at)",
        touched.len(),
        args,
    )
    .await
}

/// Every touched conversation: summed counts, task counts by status, latest checkpoint —
/// one `UPDATE`. A latest checkpoint whose summary could not be read leaves the summary
/// NULL (not the older one's).
async fn update_conversations(
    tx: &mut Tx,
    g: i64,
    conversations: &HashMap<Uuid, ConversationDelta>,
) -> Result<(), ApplyError> {
    let statuses: Vec<TaskStatus> = TaskStatus::all().collect();
    let mut columns = String::from(
        "row_id, messages, checkpoints, tasks, updated, latest_id, latest_type, latest_summary, latest_at",
    );
    let mut types = vec![UUID, INT, INT, INT, TS, UUID, TEXT, TEXT, TS];
    let mut set = String::from(
        "message_count = message_count + v.messages, \
         checkpoint_count = checkpoint_count + v.checkpoints, task_count = task_count + v.tasks, \
         updated_at = CASE WHEN v.updated IS NOT NULL AND updated_at < v.updated THEN v.updated ELSE updated_at END, \
         latest_checkpoint_id = COALESCE(v.latest_id, latest_checkpoint_id), \
         latest_checkpoint_type = COALESCE(v.latest_type, latest_checkpoint_type), \
         latest_checkpoint_summary = CASE WHEN v.latest_id IS NULL THEN latest_checkpoint_summary ELSE v.latest_summary END, \
         latest_checkpoint_at = COALESCE(v.latest_at, latest_checkpoint_at)",
    );
    for (i, status) in statuses.iter().enumerate() {
        let column = status_column(*status);
        columns.push_str(&format!(", d{i}"));
        types.push(INT);
        set.push_str(&format!(", {column} = {column} + v.d{i}"));
    }
    let args = conversations.iter().fold(
        Args::with_capacity(conversations.len() * types.len()),
        |a, (id, c)| {
            let latest = c.latest.as_ref();
            let a = a
                .uuid(*id)
                .int(c.messages)
                .int(c.checkpoints)
                .int(c.tasks)
                .opt_time(c.updated_at.as_ref())
                .opt_uuid(latest.map(|l| l.id))
                .opt_text(latest.map(|l| l.checkpoint_type.as_str()))
                .opt_text(
                    latest
                        .filter(|_| !c.latest_forgotten)
                        .map(|l| l.summary.as_str()),
                )
                .opt_time(latest.map(|l| &l.created_at));
            statuses
                .iter()
                .fold(a, |a, status| a.int(c.statuses[status.index()]))
        },
    );
    update_from_values(
        tx,
        &table(g, "conversations"),
        &columns,
        &types,
        &set,
        conversations.len(),
        args,
    )
    .await
}
