//! Actors, conversations, their checkpoints and messages.

use pm_application::AppError;
use pm_domain::time;
use serde_json::{json, Value};
use uuid::Uuid;

use super::rows::{
    checkpoint_json, compact, message_json, RowExt, CHECKPOINT_COLUMNS, MESSAGE_COLUMNS,
};
use super::{unavailable, PageRequest, ReadModel};
use crate::on_db;
use crate::read_model::{List, Page, PageCursor};

/// Filters of `GET /v1/conversations`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConversationFilter {
    /// Exact organization.
    pub organization: Option<String>,
    /// Exact status.
    pub status: Option<String>,
    /// Exact external source.
    pub external_source: Option<String>,
    /// Conversations this actor takes part in.
    pub actor_id: Option<Uuid>,
    /// Created at or after.
    pub created_after: Option<chrono::DateTime<chrono::Utc>>,
    /// Created before.
    pub created_before: Option<chrono::DateTime<chrono::Utc>>,
    /// Type of the latest checkpoint.
    pub latest_checkpoint_type: Option<String>,
}

const CONVERSATION_COLUMNS: &str = "id::text AS id, title, actor_ids, external_id, external_source, status, organization, \
    created_at, updated_at, latest_checkpoint_id::text AS latest_checkpoint_id, latest_checkpoint_type, \
    latest_checkpoint_summary, latest_checkpoint_at, checkpoint_count, message_count, task_count, \
    tasks_not_started, tasks_work_started, tasks_work_completed, tasks_work_approved, tasks_work_rejected, tasks_work_paused";

fn conversation_json<R: RowExt>(row: &R) -> Result<Value, sqlx::Error> {
    let latest = match row.text("latest_checkpoint_id")? {
        Value::Null => Value::Null,
        id => json!({
            "id": id,
            "checkpoint_type": row.text("latest_checkpoint_type")?,
            "summary": row.text("latest_checkpoint_summary")?,
            "created_at": row.time("latest_checkpoint_at")?,
        }),
    };
    let actor_ids: Value =
        serde_json::from_str(&row.string("actor_ids")?).unwrap_or(Value::Array(vec![]));
    let mut v = compact(json!({
        "id": row.text("id")?,
        "actor_ids": actor_ids,
        "title": row.text("title")?,
        "external_id": row.text("external_id")?,
        "external_source": row.text("external_source")?,
        "status": row.text("status")?,
        "organization": row.text("organization")?,
        "created_at": row.time("created_at")?,
        "updated_at": row.time("updated_at")?,
    }));
    if let Some(obj) = v.as_object_mut() {
        obj.insert("latest_checkpoint".into(), latest);
        obj.insert(
            "checkpoint_count".into(),
            row.int("checkpoint_count")?.into(),
        );
        obj.insert("message_count".into(), row.int("message_count")?.into());
        obj.insert("task_count".into(), row.int("task_count")?.into());
        obj.insert(
            "task_counts".into(),
            json!({
                "NOT_STARTED": row.int("tasks_not_started")?,
                "WORK_STARTED": row.int("tasks_work_started")?,
                "WORK_COMPLETED": row.int("tasks_work_completed")?,
                "WORK_APPROVED": row.int("tasks_work_approved")?,
                "WORK_REJECTED": row.int("tasks_work_rejected")?,
                "WORK_PAUSED": row.int("tasks_work_paused")?,
            }),
        );
    }
    Ok(v)
}

/// Splits a fetched `limit + 1` rows into a page.
pub(super) fn page(mut items: Vec<(Value, PageCursor)>, limit: u32) -> Page<Value> {
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    let next_cursor = if more {
        items.last().map(|(_, c)| c.encode())
    } else {
        None
    };
    Page {
        items: items.into_iter().map(|(v, _)| v).collect(),
        next_cursor,
    }
}

impl ReadModel {
    /// The actor, if registered (and projected).
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn actor(&self, id: Uuid) -> Result<Option<Value>, AppError> {
        let sql = "SELECT id::text AS id, kind, display_name, external_identity, created_at FROM actors WHERE id = $1::uuid";
        on_db!(&self.db, d, pool, {
            let row = sqlx::query(&d.sql(sql))
                .bind(id.to_string())
                .fetch_optional(pool)
                .await?;
            row.map(|r| {
                Ok::<_, sqlx::Error>(compact(json!({
                    "id": r.text("id")?,
                    "kind": r.text("kind")?,
                    "display_name": r.text("display_name")?,
                    "external_identity": r.text("external_identity")?,
                    "created_at": r.time("created_at")?,
                })))
            })
            .transpose()
        })
        .map_err(unavailable)
    }

    /// The conversation with its latest checkpoint and counts.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn conversation(&self, id: Uuid) -> Result<Option<Value>, AppError> {
        let sql = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = $1::uuid");
        on_db!(&self.db, d, pool, {
            let row = sqlx::query(&d.sql(&sql))
                .bind(id.to_string())
                .fetch_optional(pool)
                .await?;
            row.map(|r| conversation_json(&r)).transpose()
        })
        .map_err(unavailable)
    }

    /// Conversations matching `filter`, oldest first.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn conversations(
        &self,
        filter: &ConversationFilter,
        req: &PageRequest,
    ) -> Result<Page<Value>, AppError> {
        let items = on_db!(&self.db, d, pool, {
            let select = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE 1 = 1");
            let mut q = sqlx::QueryBuilder::new(d.sql(&select).into_owned());
            let text_filters = [
                ("organization", &filter.organization),
                ("status", &filter.status),
                ("external_source", &filter.external_source),
                ("latest_checkpoint_type", &filter.latest_checkpoint_type),
            ];
            for (column, value) in text_filters {
                if let Some(value) = value {
                    q.push(format!(" AND {column} = ")).push_bind(value.clone());
                }
            }
            if let Some(actor) = filter.actor_id {
                q.push(" AND EXISTS (SELECT 1 FROM conversation_actors a WHERE a.conversation_id = c.id AND a.actor_id = ")
                    .push_bind(actor.to_string())
                    .push(d.cast("uuid"))
                    .push(")");
            }
            if let Some(after) = filter.created_after {
                q.push(" AND created_at >= ").push_bind(time::format(&after)).push(d.cast("timestamptz"));
            }
            if let Some(before) = filter.created_before {
                q.push(" AND created_at < ").push_bind(time::format(&before)).push(d.cast("timestamptz"));
            }
            after_cursor!(q, d, "created_at", req.cursor);
            q.push(" ORDER BY created_at, id LIMIT ").push_bind(i64::from(req.limit) + 1);
            let rows = q.build().fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    let cursor = PageCursor {
                        l: List::Conversations,
                        k: r.time("created_at")?.as_str().unwrap_or_default().to_string(),
                        id: r.string("id")?,
                    };
                    Ok::<_, sqlx::Error>((conversation_json(r)?, cursor))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(unavailable)?;
        Ok(page(items, req.limit))
    }

    /// The conversation's checkpoints in log order (oldest first).
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn checkpoints(
        &self,
        conversation_id: Uuid,
        req: &PageRequest,
    ) -> Result<Page<Value>, AppError> {
        let items = on_db!(&self.db, d, pool, {
            let mut q = sqlx::QueryBuilder::new(
                d.sql(&format!(
                    "SELECT {CHECKPOINT_COLUMNS}, log_txid, log_seq FROM conversation_checkpoints WHERE conversation_id = "
                ))
                .into_owned(),
            );
            q.push_bind(conversation_id.to_string()).push(d.cast("uuid"));
            if let Some((txid, seq)) = req.cursor.as_ref().and_then(|c| c.k.split_once('.')) {
                q.push(" AND (log_txid, log_seq) > (")
                    .push_bind(txid.parse::<i64>().unwrap_or(i64::MAX))
                    .push(", ")
                    .push_bind(seq.parse::<i64>().unwrap_or(i64::MAX))
                    .push(")");
            }
            q.push(" ORDER BY log_txid, log_seq LIMIT ").push_bind(i64::from(req.limit) + 1);
            let rows = q.build().fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    let cursor = PageCursor {
                        l: List::Checkpoints,
                        k: format!("{}.{}", r.int("log_txid")?, r.int("log_seq")?),
                        id: r.string("id")?,
                    };
                    let v = checkpoint_json(r)?;
                    Ok::<_, sqlx::Error>((v, cursor))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(unavailable)?;
        Ok(page(items, req.limit))
    }

    /// The conversation's messages in `time` order, optionally of one task or actor.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn messages(
        &self,
        conversation_id: Uuid,
        task_id: Option<Uuid>,
        actor_id: Option<Uuid>,
        req: &PageRequest,
    ) -> Result<Page<Value>, AppError> {
        let items = on_db!(&self.db, d, pool, {
            let mut q = sqlx::QueryBuilder::new(
                d.sql(&format!(
                    "SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = "
                ))
                .into_owned(),
            );
            q.push_bind(conversation_id.to_string())
                .push(d.cast("uuid"));
            if let Some(task) = task_id {
                q.push(" AND task_id = ")
                    .push_bind(task.to_string())
                    .push(d.cast("uuid"));
            }
            if let Some(actor) = actor_id {
                q.push(" AND actor_id = ")
                    .push_bind(actor.to_string())
                    .push(d.cast("uuid"));
            }
            after_cursor!(q, d, "time", req.cursor);
            q.push(" ORDER BY time, id LIMIT ")
                .push_bind(i64::from(req.limit) + 1);
            let rows = q.build().fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    let cursor = PageCursor {
                        l: List::Messages,
                        k: r.time("time")?.as_str().unwrap_or_default().to_string(),
                        id: r.string("id")?,
                    };
                    let v = message_json(r)?;
                    Ok::<_, sqlx::Error>((v, cursor))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(unavailable)?;
        Ok(page(items, req.limit))
    }
}
