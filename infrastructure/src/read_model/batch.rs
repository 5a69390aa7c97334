//! The projection's fast path: a whole batch becomes a few multi-row statements — one
//! `INSERT` per table, one `UPDATE` per touched task and conversation with summed deltas —
//! instead of two or three statements per event. When the batch fails for a reason that is
//! not transient, the caller replays it event by event ([`super::apply`]) to find and park
//! the poison event.

use std::collections::HashMap;

use pm_application::log::LoggedEvent;
use pm_domain::time;
use pm_domain::types::TaskCheckpointType;
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::plan::{self, Plan, TaskState, STATUS_COLUMNS};
use super::schema::table;
use crate::sql::Dialect;

/// Why the fast path gave up.
#[derive(Debug)]
pub(crate) enum BatchFail {
    /// A statement failed.
    Sql(sqlx::Error),
    /// An event cannot be read or refers to nothing: use the slow path.
    Unreadable(String),
}

impl From<sqlx::Error> for BatchFail {
    fn from(e: sqlx::Error) -> Self {
        Self::Sql(e)
    }
}

/// A connection the fast path can run on.
pub(crate) trait BatchExecutor {
    /// Applies `events` to generation `g`.
    async fn apply_batch(self, d: Dialect, g: i64, events: &[LoggedEvent])
        -> Result<(), BatchFail>;
}

macro_rules! impl_batch_executor {
    ($conn:ty, $db:ty) => {
        impl BatchExecutor for &mut $conn {
            async fn apply_batch(self, d: Dialect, g: i64, events: &[LoggedEvent]) -> Result<(), BatchFail> {
                let conn = self;
                let t = |name: &str| table(g, name);
                let (uuid, ts) = (d.cast("uuid"), d.cast("timestamptz"));
                let facts = plan::read(events).map_err(|e| BatchFail::Unreadable(e.0))?;
                let earlier = plan::earlier_tasks(&facts);
                let mut preloaded: HashMap<Uuid, TaskState> = HashMap::new();
                if !earlier.is_empty() {
                    let mut q = QueryBuilder::<$db>::new(d.sql(&format!(
                        "SELECT id::text AS id, conversation_id::text AS conversation_id, status, status_sequence, \
                         first_work_started_at IS NOT NULL AS started FROM {} WHERE id IN (",
                        t("tasks")
                    )).into_owned());
                    let mut sep = q.separated(", ");
                    for id in &earlier {
                        sep.push_bind(id.to_string()).push_unseparated(uuid);
                    }
                    q.push(")");
                    let rows: Vec<(String, String, String, i64, bool)> = q.build_query_as().fetch_all(&mut *conn).await?;
                    for (id, conversation_id, status, status_sequence, started) in rows {
                        let id: Uuid = id.parse().map_err(|_| BatchFail::Unreadable(format!("bad task id {id}")))?;
                        preloaded.insert(id, TaskState::stored(conversation_id, &status, status_sequence, started));
                    }
                }
                let Plan { actors, started, members, checkpoints, new_tasks, task_checkpoints, messages, tasks, created_here, conversations } =
                    plan::plan(&facts, preloaded).map_err(|e| BatchFail::Unreadable(e.0))?;
                if !actors.is_empty() {
                    let mut q = QueryBuilder::<$db>::new(format!(
                        "INSERT INTO {} (id, kind, display_name, external_identity, created_at) ",
                        t("actors")
                    ));
                    q.push_values(&actors, |mut b, f| {
                        b.push_bind(f.id.to_string()).push_unseparated(uuid)
                            .push_bind(f.kind.as_str())
                            .push_bind(f.display_name.as_str())
                            .push_bind(f.external_identity.clone())
                            .push_bind(time::format(&f.created_at)).push_unseparated(ts);
                    });
                    q.build().execute(&mut *conn).await?;
                }
                if !started.is_empty() {
                    let mut q = QueryBuilder::<$db>::new(format!(
                        "INSERT INTO {} (id, title, external_id, external_source, status, organization, created_at, updated_at, actor_ids) ",
                        t("conversations")
                    ));
                    q.push_values(&started, |mut b, (f, created, updated)| {
                        b.push_bind(f.id.to_string()).push_unseparated(uuid)
                            .push_bind(f.title.as_str())
                            .push_bind(f.external_id.clone())
                            .push_bind(f.external_source.clone())
                            .push_bind(f.status.clone())
                            .push_bind(f.organization.clone())
                            .push_bind(created.clone()).push_unseparated(ts)
                            .push_bind(updated.clone()).push_unseparated(ts)
                            .push_bind(serde_json::to_string(&f.actor_ids).unwrap_or_default());
                    });
                    q.build().execute(&mut *conn).await?;
                }
                if !members.is_empty() {
                    let mut q = QueryBuilder::<$db>::new(format!(
                        "INSERT INTO {} (conversation_id, actor_id, ordinal) ",
                        t("conversation_actors")
                    ));
                    q.push_values(&members, |mut b, (c, a, ordinal)| {
                        b.push_bind(c.to_string()).push_unseparated(uuid)
                            .push_bind(a.to_string()).push_unseparated(uuid)
                            .push_bind(*ordinal);
                    });
                    q.push(" ON CONFLICT (conversation_id, actor_id) DO NOTHING");
                    q.build().execute(&mut *conn).await?;
                }
                if !checkpoints.is_empty() {
                    let mut q = QueryBuilder::<$db>::new(format!(
                        "INSERT INTO {} (id, conversation_id, checkpoint_type, summary, created_at, log_txid, log_seq) ",
                        t("conversation_checkpoints")
                    ));
                    q.push_values(&checkpoints, |mut b, (f, created, position)| {
                        b.push_bind(f.id.to_string()).push_unseparated(uuid)
                            .push_bind(f.conversation_id.to_string()).push_unseparated(uuid)
                            .push_bind(f.checkpoint_type.as_str())
                            .push_bind(f.summary.as_str())
                            .push_bind(created.clone()).push_unseparated(ts)
                            .push_bind(position.txid)
                            .push_bind(position.seq);
                    });
                    q.build().execute(&mut *conn).await?;
                }
                for (f, created, sequence) in &new_tasks {
                    let state = tasks.get(&f.id);
                    let (status, changed, status_sequence, first, last, count) = match state {
                        Some(s) => (
                            s.status.map_or("NOT_STARTED", TaskCheckpointType::as_str),
                            s.status_changed_at.clone(),
                            s.status_sequence,
                            s.first_started.clone(),
                            s.last_completed.clone(),
                            s.added_checkpoints,
                        ),
                        None => ("NOT_STARTED", None, *sequence, None, None, 0),
                    };
                    let sql = format!(
                        "INSERT INTO {} (id, conversation_id, checkpoint_id, instructions, assigned_to, organization, created_at, \
                         status, status_changed_at, status_sequence, checkpoint_count, first_work_started_at, last_work_completed_at) \
                         SELECT $1::uuid, $2::uuid, $3::uuid, $4, $5::uuid, (SELECT organization FROM {} WHERE id = $2::uuid), \
                         $6::timestamptz, $7, $8::timestamptz, $9, $10, $11::timestamptz, $12::timestamptz",
                        t("tasks"),
                        t("conversations")
                    );
                    sqlx::query(&d.sql(&sql))
                        .bind(f.id.to_string())
                        .bind(f.conversation_id.to_string())
                        .bind(f.checkpoint_id.to_string())
                        .bind(f.instructions.as_str())
                        .bind(f.assigned_to.map(|a| a.to_string()))
                        .bind(created.clone())
                        .bind(status)
                        .bind(changed)
                        .bind(status_sequence)
                        .bind(count)
                        .bind(first)
                        .bind(last)
                        .execute(&mut *conn)
                        .await?;
                }
                if !task_checkpoints.is_empty() {
                    let mut q = QueryBuilder::<$db>::new(format!(
                        "INSERT INTO {} (id, task_id, sequence, type, created_at) ",
                        t("task_checkpoints")
                    ));
                    q.push_values(&task_checkpoints, |mut b, (f, created, sequence)| {
                        b.push_bind(f.id.to_string()).push_unseparated(uuid)
                            .push_bind(f.task_id.to_string()).push_unseparated(uuid)
                            .push_bind(*sequence)
                            .push_bind(f.checkpoint_type.as_str())
                            .push_bind(created.clone()).push_unseparated(ts);
                    });
                    q.build().execute(&mut *conn).await?;
                }
                if !messages.is_empty() {
                    let mut q = QueryBuilder::<$db>::new(format!(
                        "INSERT INTO {} (id, conversation_id, actor_id, task_id, content, external_identity, time, log_txid, log_seq) ",
                        t("messages")
                    ));
                    q.push_values(&messages, |mut b, (f, at, position)| {
                        b.push_bind(f.id.to_string()).push_unseparated(uuid)
                            .push_bind(f.conversation_id.to_string()).push_unseparated(uuid)
                            .push_bind(f.actor_id.to_string()).push_unseparated(uuid)
                            .push_bind(f.task_id.map(|t| t.to_string())).push_unseparated(uuid)
                            .push_bind(f.content.as_str())
                            .push_bind(f.external_identity.clone())
                            .push_bind(at.clone()).push_unseparated(ts)
                            .push_bind(position.txid)
                            .push_bind(position.seq);
                    });
                    q.build().execute(&mut *conn).await?;
                }
                // Tasks created earlier that got checkpoints in this batch.
                for (id, s) in tasks.iter().filter(|(id, s)| s.touched && !created_here.contains(id)) {
                    let sql = format!(
                        "UPDATE {} SET checkpoint_count = checkpoint_count + $2, \
                         status = COALESCE($3, status), status_changed_at = COALESCE($4::timestamptz, status_changed_at), \
                         status_sequence = $5, \
                         first_work_started_at = COALESCE(first_work_started_at, $6::timestamptz), \
                         last_work_completed_at = COALESCE($7::timestamptz, last_work_completed_at) \
                         WHERE id = $1::uuid",
                        t("tasks")
                    );
                    sqlx::query(&d.sql(&sql))
                        .bind(id.to_string())
                        .bind(s.added_checkpoints)
                        .bind(s.status_changed_at.as_ref().and(s.status.map(TaskCheckpointType::as_str)))
                        .bind(s.status_changed_at.clone())
                        .bind(s.status_sequence)
                        .bind(s.first_started.clone().filter(|f| !f.is_empty()))
                        .bind(s.last_completed.clone())
                        .execute(&mut *conn)
                        .await?;
                }
                for (id, c) in &conversations {
                    let mut sql = format!(
                        "UPDATE {} SET message_count = message_count + $2, checkpoint_count = checkpoint_count + $3, \
                         task_count = task_count + $4, \
                         updated_at = CASE WHEN $5::timestamptz IS NOT NULL AND updated_at < $5::timestamptz THEN $5::timestamptz ELSE updated_at END",
                        t("conversations")
                    );
                    for (i, column) in STATUS_COLUMNS.iter().enumerate() {
                        sql.push_str(&format!(", {column} = {column} + {}", c.statuses[i]));
                    }
                    if c.latest.is_some() {
                        sql.push_str(", latest_checkpoint_id = $6::uuid, latest_checkpoint_type = $7, \
                                      latest_checkpoint_summary = $8, latest_checkpoint_at = $9::timestamptz");
                    }
                    sql.push_str(" WHERE id = $1::uuid");
                    let sql = d.sql(&sql);
                    let mut q = sqlx::query(&sql)
                        .bind(id.clone())
                        .bind(c.messages)
                        .bind(c.checkpoints)
                        .bind(c.tasks)
                        .bind(c.updated_at.clone());
                    if let Some((cid, kind, summary, at)) = &c.latest {
                        q = q.bind(cid.clone()).bind(kind.clone()).bind(summary.clone()).bind(at.clone());
                    }
                    q.execute(&mut *conn).await?;
                }
                Ok(())
            }
        }
    };
}

impl_batch_executor!(sqlx::PgConnection, sqlx::Postgres);
impl_batch_executor!(sqlx::SqliteConnection, sqlx::Sqlite);
