//! Single checkpoints, messages and task checkpoints (the targets of commands' `Location`).

use pm_application::AppError;
use serde_json::Value;
use uuid::Uuid;

use super::rows::{
    checkpoint_json, message_json, task_checkpoint_json, CHECKPOINT_COLUMNS, MESSAGE_COLUMNS,
    TASK_CHECKPOINT_COLUMNS,
};
use super::{unavailable, ReadModel};
use crate::on_db;

/// Which child entity to read.
#[derive(Clone, Copy)]
enum Child {
    Checkpoint,
    Message,
    TaskCheckpoint,
}

impl ReadModel {
    /// The row `id` of a child table whose parent column is `parent`, as JSON.
    async fn child(&self, child: Child, parent: Uuid, id: Uuid) -> Result<Option<Value>, AppError> {
        let (columns, from) = match child {
            Child::Checkpoint => (
                CHECKPOINT_COLUMNS,
                "conversation_checkpoints WHERE conversation_id",
            ),
            Child::Message => (MESSAGE_COLUMNS, "messages WHERE conversation_id"),
            Child::TaskCheckpoint => (TASK_CHECKPOINT_COLUMNS, "task_checkpoints WHERE task_id"),
        };
        let sql = format!("SELECT {columns} FROM {from} = $2::uuid AND id = $1::uuid");
        on_db!(&self.db, d, pool, {
            let row = sqlx::query(&d.sql(&sql))
                .bind(id.to_string())
                .bind(parent.to_string())
                .fetch_optional(pool)
                .await?;
            row.map(|r| match child {
                Child::Checkpoint => checkpoint_json(&r),
                Child::Message => message_json(&r),
                Child::TaskCheckpoint => task_checkpoint_json(&r),
            })
            .transpose()
        })
        .map_err(unavailable)
    }

    /// A conversation checkpoint of `conversation_id`.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn checkpoint(
        &self,
        conversation_id: Uuid,
        id: Uuid,
    ) -> Result<Option<Value>, AppError> {
        self.child(Child::Checkpoint, conversation_id, id).await
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
        self.child(Child::Message, conversation_id, id).await
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
        self.child(Child::TaskCheckpoint, task_id, id).await
    }
}
