//! Single checkpoints, messages and task checkpoints (the targets of commands' `Location`).

use pm_application::AppError;
use serde_json::{json, Value};
use uuid::Uuid;

use super::rows::{compact, RowExt};
use super::{unavailable, ReadModel};
use crate::on_db;

impl ReadModel {
    /// A conversation checkpoint of `conversation_id`.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn checkpoint(
        &self,
        conversation_id: Uuid,
        id: Uuid,
    ) -> Result<Option<Value>, AppError> {
        let sql = "SELECT id::text AS id, conversation_id::text AS conversation_id, checkpoint_type, summary, created_at \
                   FROM conversation_checkpoints WHERE id = $1::uuid AND conversation_id = $2::uuid";
        on_db!(&self.db, d, pool, {
            let row = sqlx::query(&d.sql(sql))
                .bind(id.to_string())
                .bind(conversation_id.to_string())
                .fetch_optional(pool)
                .await?;
            row.map(|r| {
                Ok::<_, sqlx::Error>(json!({
                    "id": r.text("id")?,
                    "conversation_id": r.text("conversation_id")?,
                    "checkpoint_type": r.text("checkpoint_type")?,
                    "summary": r.text("summary")?,
                    "created_at": r.time("created_at")?,
                }))
            })
            .transpose()
        })
        .map_err(unavailable)
    }

    /// A message of `conversation_id`.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn message(
        &self,
        conversation_id: Uuid,
        id: Uuid,
    ) -> Result<Option<Value>, AppError> {
        let sql = "SELECT id::text AS id, conversation_id::text AS conversation_id, actor_id::text AS actor_id, \
                   task_id::text AS task_id, content, external_identity, time \
                   FROM messages WHERE id = $1::uuid AND conversation_id = $2::uuid";
        on_db!(&self.db, d, pool, {
            let row = sqlx::query(&d.sql(sql))
                .bind(id.to_string())
                .bind(conversation_id.to_string())
                .fetch_optional(pool)
                .await?;
            row.map(|r| {
                Ok::<_, sqlx::Error>(compact(json!({
                    "id": r.text("id")?,
                    "time": r.time("time")?,
                    "actor_id": r.text("actor_id")?,
                    "conversation_id": r.text("conversation_id")?,
                    "task_id": r.text("task_id")?,
                    "content": r.text("content")?,
                    "external_identity": r.text("external_identity")?,
                })))
            })
            .transpose()
        })
        .map_err(unavailable)
    }

    /// A task checkpoint of `task_id`.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn task_checkpoint(
        &self,
        task_id: Uuid,
        id: Uuid,
    ) -> Result<Option<Value>, AppError> {
        let sql = "SELECT id::text AS id, task_id::text AS task_id, type, created_at, sequence \
                   FROM task_checkpoints WHERE id = $1::uuid AND task_id = $2::uuid";
        on_db!(&self.db, d, pool, {
            let row = sqlx::query(&d.sql(sql))
                .bind(id.to_string())
                .bind(task_id.to_string())
                .fetch_optional(pool)
                .await?;
            row.map(|r| {
                Ok::<_, sqlx::Error>(json!({
                    "id": r.text("id")?,
                    "task_id": r.text("task_id")?,
                    "type": r.text("type")?,
                    "created_at": r.time("created_at")?,
                    "sequence": r.int("sequence")?,
                }))
            })
            .transpose()
        })
        .map_err(unavailable)
    }
}
