//! The projection's per-event path: each fact becomes its own statements. Used to pinpoint
//! a poison event when a batch fails, and by rebuilds (so a rebuild cross-checks the fast
//! path of [`super::batch`]).

use pm_application::fact::{Fact, FactError};
use pm_application::log::LoggedEvent;
use pm_domain::time;
use pm_domain::types::TaskCheckpointType;

use super::apply::ApplyError;
use super::schema::table;
use crate::sql::Dialect;

/// The `tasks_<status>` counter column of a conversation.
fn status_column(status: Option<&str>) -> &'static str {
    match status.and_then(TaskCheckpointType::parse) {
        None => "tasks_not_started",
        Some(TaskCheckpointType::WorkStarted) => "tasks_work_started",
        Some(TaskCheckpointType::WorkCompleted) => "tasks_work_completed",
        Some(TaskCheckpointType::WorkApproved) => "tasks_work_approved",
        Some(TaskCheckpointType::WorkRejected) => "tasks_work_rejected",
        Some(TaskCheckpointType::WorkPaused) => "tasks_work_paused",
    }
}

/// Applies one event to generation `g` (also used by rebuilds).
pub(crate) async fn apply_event<E: RmExecutor>(
    tx: E,
    d: Dialect,
    g: i64,
    event: &LoggedEvent,
) -> Result<(), ApplyError> {
    let fact = match Fact::from_logged(event) {
        Ok(fact) => fact,
        Err(FactError::Unknown(_)) => return Ok(()),
        Err(e @ FactError::Malformed { .. }) => return Err(ApplyError::Poison(0, e.to_string())),
    };
    let recorded_at = event
        .metadata
        .get("recorded_at")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    tx.apply(d, g, event, fact, recorded_at).await
}

/// A connection the projection's statements can run on (a PostgreSQL or SQLite
/// transaction).
pub(crate) trait RmExecutor {
    /// Applies one fact.
    async fn apply(
        self,
        d: Dialect,
        g: i64,
        event: &LoggedEvent,
        fact: Fact,
        recorded_at: Option<String>,
    ) -> Result<(), ApplyError>;
}

macro_rules! impl_rm_executor {
    ($conn:ty) => {
        impl RmExecutor for &mut $conn {
            async fn apply(self, d: Dialect, g: i64, event: &LoggedEvent, fact: Fact, recorded_at: Option<String>) -> Result<(), ApplyError> {
                let conn = self;
                let t = |name: &str| table(g, name);
                match fact {
                    Fact::ActorRegistered(f) => {
                        let sql = format!(
                            "INSERT INTO {} (id, kind, display_name, external_identity, created_at) \
                             VALUES ($1::uuid, $2, $3, $4, $5::timestamptz) ON CONFLICT (id) DO NOTHING",
                            t("actors")
                        );
                        sqlx::query(&d.sql(&sql))
                            .bind(f.id.to_string())
                            .bind(f.kind.as_str())
                            .bind(f.display_name.as_str())
                            .bind(f.external_identity)
                            .bind(time::format(&f.created_at))
                            .execute(&mut *conn)
                            .await?;
                    }
                    Fact::ConversationStarted(f) => {
                        let sql = format!(
                            "INSERT INTO {} (id, title, external_id, external_source, status, organization, created_at, updated_at, actor_ids) \
                             VALUES ($1::uuid, $2, $3, $4, $5, $6, $7::timestamptz, $8::timestamptz, $9) ON CONFLICT (id) DO NOTHING",
                            t("conversations")
                        );
                        let created = time::format(&f.created_at);
                        sqlx::query(&d.sql(&sql))
                            .bind(f.id.to_string())
                            .bind(f.title.as_str())
                            .bind(f.external_id)
                            .bind(f.external_source)
                            .bind(f.status)
                            .bind(f.organization)
                            .bind(&created)
                            .bind(recorded_at.unwrap_or(created.clone()))
                            .bind(serde_json::to_string(&f.actor_ids).unwrap_or_default())
                            .execute(&mut *conn)
                            .await?;
                        let sql = format!(
                            "INSERT INTO {} (conversation_id, actor_id, ordinal) VALUES ($1::uuid, $2::uuid, $3) \
                             ON CONFLICT (conversation_id, actor_id) DO NOTHING",
                            t("conversation_actors")
                        );
                        for (ordinal, actor) in f.actor_ids.iter().enumerate() {
                            sqlx::query(&d.sql(&sql))
                                .bind(f.id.to_string())
                                .bind(actor.to_string())
                                .bind(ordinal as i64)
                                .execute(&mut *conn)
                                .await?;
                        }
                    }
                    Fact::ConversationCheckpointCreated(f) => {
                        let sql = format!(
                            "INSERT INTO {} (id, conversation_id, checkpoint_type, summary, created_at, log_txid, log_seq) \
                             VALUES ($1::uuid, $2::uuid, $3, $4, $5::timestamptz, $6, $7) ON CONFLICT (id) DO NOTHING",
                            t("conversation_checkpoints")
                        );
                        let created = time::format(&f.created_at);
                        sqlx::query(&d.sql(&sql))
                            .bind(f.id.to_string())
                            .bind(f.conversation_id.to_string())
                            .bind(f.checkpoint_type.as_str())
                            .bind(f.summary.as_str())
                            .bind(&created)
                            .bind(event.position.txid)
                            .bind(event.position.seq)
                            .execute(&mut *conn)
                            .await?;
                        let sql = format!(
                            "UPDATE {} SET latest_checkpoint_id = $2::uuid, latest_checkpoint_type = $3, \
                             latest_checkpoint_summary = $4, latest_checkpoint_at = $5::timestamptz, \
                             checkpoint_count = checkpoint_count + 1, \
                             updated_at = CASE WHEN updated_at < $6::timestamptz THEN $6::timestamptz ELSE updated_at END \
                             WHERE id = $1::uuid",
                            t("conversations")
                        );
                        sqlx::query(&d.sql(&sql))
                            .bind(f.conversation_id.to_string())
                            .bind(f.id.to_string())
                            .bind(f.checkpoint_type.as_str())
                            .bind(f.summary.as_str())
                            .bind(&created)
                            .bind(recorded_at.unwrap_or(created.clone()))
                            .execute(&mut *conn)
                            .await?;
                    }
                    Fact::TaskCreated(f) => {
                        let created = time::format(&f.created_at);
                        let sql = format!(
                            "INSERT INTO {} (id, conversation_id, checkpoint_id, instructions, assigned_to, organization, created_at, status, status_sequence) \
                             SELECT $1::uuid, $2::uuid, $3::uuid, $4, $5::uuid, \
                               (SELECT organization FROM {} WHERE id = $2::uuid), $6::timestamptz, 'NOT_STARTED', $7 \
                             ON CONFLICT (id) DO NOTHING",
                            t("tasks"),
                            t("conversations")
                        );
                        let inserted = sqlx::query(&d.sql(&sql))
                            .bind(f.id.to_string())
                            .bind(f.conversation_id.to_string())
                            .bind(f.checkpoint_id.to_string())
                            .bind(f.instructions.as_str())
                            .bind(f.assigned_to.map(|a| a.to_string()))
                            .bind(&created)
                            .bind(event.sequence)
                            .execute(&mut *conn)
                            .await?
                            .rows_affected();
                        if inserted == 1 {
                            let sql = format!(
                                "UPDATE {} SET task_count = task_count + 1, tasks_not_started = tasks_not_started + 1, \
                                 updated_at = CASE WHEN updated_at < $2::timestamptz THEN $2::timestamptz ELSE updated_at END \
                                 WHERE id = $1::uuid",
                                t("conversations")
                            );
                            sqlx::query(&d.sql(&sql))
                                .bind(f.conversation_id.to_string())
                                .bind(recorded_at.unwrap_or(created))
                                .execute(&mut *conn)
                                .await?;
                        }
                    }
                    Fact::TaskCheckpointCreated(f) => {
                        let sql = format!(
                            "SELECT status, status_sequence, conversation_id::text FROM {} WHERE id = $1::uuid",
                            t("tasks")
                        );
                        let row: Option<(String, i64, String)> = sqlx::query_as(&d.sql(&sql))
                            .bind(f.task_id.to_string())
                            .fetch_optional(&mut *conn)
                            .await?;
                        let Some((old_status, status_sequence, conversation_id)) = row else {
                            return Err(ApplyError::Poison(0, format!("task {} is not in the read model", f.task_id)));
                        };
                        let created = time::format(&f.created_at);
                        let sql = format!(
                            "INSERT INTO {} (id, task_id, sequence, type, created_at) \
                             VALUES ($1::uuid, $2::uuid, $3, $4, $5::timestamptz) ON CONFLICT (id) DO NOTHING",
                            t("task_checkpoints")
                        );
                        let inserted = sqlx::query(&d.sql(&sql))
                            .bind(f.id.to_string())
                            .bind(f.task_id.to_string())
                            .bind(event.sequence)
                            .bind(f.checkpoint_type.as_str())
                            .bind(&created)
                            .execute(&mut *conn)
                            .await?
                            .rows_affected();
                        if inserted == 0 {
                            return Ok(());
                        }
                        let kind = f.checkpoint_type.as_str();
                        let newest = event.sequence > status_sequence;
                        // Status is the type of the latest checkpoint in the task's own
                        // event order (stream sequence), never by comparing clocks.
                        let sql = format!(
                            "UPDATE {} SET checkpoint_count = checkpoint_count + 1, \
                             status = CASE WHEN $2 THEN $3 ELSE status END, \
                             status_changed_at = CASE WHEN $2 THEN $4::timestamptz ELSE status_changed_at END, \
                             status_sequence = CASE WHEN $2 THEN $5 ELSE status_sequence END, \
                             first_work_started_at = CASE WHEN first_work_started_at IS NULL AND $3 = 'WORK_STARTED' \
                               THEN $4::timestamptz ELSE first_work_started_at END, \
                             last_work_completed_at = CASE WHEN $2 AND $3 = 'WORK_COMPLETED' \
                               THEN $4::timestamptz ELSE last_work_completed_at END \
                             WHERE id = $1::uuid",
                            t("tasks")
                        );
                        sqlx::query(&d.sql(&sql))
                            .bind(f.task_id.to_string())
                            .bind(newest)
                            .bind(kind)
                            .bind(&created)
                            .bind(event.sequence)
                            .execute(&mut *conn)
                            .await?;
                        let updated_at = recorded_at.unwrap_or(created);
                        let sql = if newest {
                            let (old, new) = (status_column(Some(&old_status)), status_column(Some(kind)));
                            if old == new {
                                format!("UPDATE {} SET updated_at = CASE WHEN updated_at < $2::timestamptz THEN $2::timestamptz ELSE updated_at END WHERE id = $1::uuid", t("conversations"))
                            } else {
                                format!(
                                    "UPDATE {} SET {old} = {old} - 1, {new} = {new} + 1, \
                                     updated_at = CASE WHEN updated_at < $2::timestamptz THEN $2::timestamptz ELSE updated_at END \
                                     WHERE id = $1::uuid",
                                    t("conversations")
                                )
                            }
                        } else {
                            format!("UPDATE {} SET updated_at = CASE WHEN updated_at < $2::timestamptz THEN $2::timestamptz ELSE updated_at END WHERE id = $1::uuid", t("conversations"))
                        };
                        sqlx::query(&d.sql(&sql))
                            .bind(conversation_id)
                            .bind(updated_at)
                            .execute(&mut *conn)
                            .await?;
                    }
                    Fact::MessageAdded(f) => {
                        let sql = format!(
                            "INSERT INTO {} (id, conversation_id, actor_id, task_id, content, external_identity, time, log_txid, log_seq) \
                             VALUES ($1::uuid, $2::uuid, $3::uuid, $4::uuid, $5, $6, $7::timestamptz, $8, $9) ON CONFLICT (id) DO NOTHING",
                            t("messages")
                        );
                        let at = time::format(&f.time);
                        let inserted = sqlx::query(&d.sql(&sql))
                            .bind(f.id.to_string())
                            .bind(f.conversation_id.to_string())
                            .bind(f.actor_id.to_string())
                            .bind(f.task_id.map(|t| t.to_string()))
                            .bind(f.content.as_str())
                            .bind(f.external_identity)
                            .bind(&at)
                            .bind(event.position.txid)
                            .bind(event.position.seq)
                            .execute(&mut *conn)
                            .await?
                            .rows_affected();
                        if inserted == 1 {
                            let sql = format!(
                                "UPDATE {} SET message_count = message_count + 1, \
                                 updated_at = CASE WHEN updated_at < $2::timestamptz THEN $2::timestamptz ELSE updated_at END \
                                 WHERE id = $1::uuid",
                                t("conversations")
                            );
                            sqlx::query(&d.sql(&sql))
                                .bind(f.conversation_id.to_string())
                                .bind(recorded_at.unwrap_or(at))
                                .execute(&mut *conn)
                                .await?;
                        }
                    }
                }
                Ok(())
            }
        }
    };
}

impl_rm_executor!(sqlx::PgConnection);
impl_rm_executor!(sqlx::SqliteConnection);
