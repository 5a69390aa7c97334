//! Conversations, their checkpoints and messages.

use pm_application::log::LogPosition;
use pm_application::queries::{ConversationFilter, MessageFilter};
use pm_application::scope::Scope;
use pm_application::views::{ConversationView, Forgettable, List, Page, PageCursor, PageRequest};
use pm_application::AppError;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use pm_domain::time;
use uuid::Uuid;

use super::{after_cursor, rows, ReadModel};
use crate::db::{Arg, Args};
use crate::owners::organization_clause;

impl ReadModel {
    pub(super) async fn find_conversation(
        &self,
        id: Uuid,
    ) -> Result<Option<Forgettable<ConversationView>>, AppError> {
        let sql = format!(
            "SELECT {} FROM conversations WHERE id = $1",
            rows::conversation_columns()
        );
        self.one(&sql, Args::new().uuid(id), rows::conversation)
            .await
    }

    pub(super) async fn list_conversations(
        &self,
        scope: &Scope,
        filter: &ConversationFilter,
        page: &PageRequest,
    ) -> Result<Page<Forgettable<ConversationView>>, AppError> {
        let mut sql = format!(
            "SELECT {} FROM conversations c WHERE 1 = 1",
            rows::conversation_columns()
        );
        let mut args = Args::new();
        let text_filters = [
            ("organization", filter.organization.clone()),
            ("status", filter.status.clone()),
            ("external_source", filter.external_source.clone()),
            (
                "latest_checkpoint_type",
                filter
                    .latest_checkpoint_type
                    .map(|t| t.as_str().to_string()),
            ),
        ];
        for (column, value) in text_filters {
            if let Some(value) = value {
                let p = args.push(Arg::Text(Some(value)));
                sql.push_str(&format!(" AND {column} = {p}"));
            }
        }
        if let Some(actor) = filter.actor_id {
            let p = args.push(Arg::Uuid(Some(actor)));
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM conversation_actors a WHERE a.conversation_id = c.id AND a.actor_id = {p})"
            ));
        }
        if let Some(after) = filter.created_after {
            let p = args.push(Arg::Time(Some(after)));
            sql.push_str(&format!(" AND created_at >= {p}"));
        }
        if let Some(before) = filter.created_before {
            let p = args.push(Arg::Time(Some(before)));
            sql.push_str(&format!(" AND created_at < {p}"));
        }
        sql.push_str(&organization_clause(&mut args, "organization", scope));
        after_cursor(&mut sql, &mut args, "created_at", &page.cursor)?;
        self.page(sql, args, "created_at, id", page, |r| {
            let view = rows::conversation(r)?;
            let cursor = PageCursor {
                l: List::Conversations,
                k: time::format(&view.entity.conversation.created_at),
                id: view.entity.conversation.id.to_string(),
            };
            Ok((view, cursor))
        })
        .await
    }

    pub(super) async fn list_checkpoints(
        &self,
        conversation_id: Uuid,
        page: &PageRequest,
    ) -> Result<Page<Forgettable<ConversationCheckpointCreated>>, AppError> {
        let mut sql = format!(
            "SELECT {}, log_seq FROM conversation_checkpoints WHERE conversation_id = $1",
            rows::CHECKPOINT_COLUMNS
        );
        let mut args = Args::new().uuid(conversation_id);
        if let Some(after) = page
            .cursor
            .as_ref()
            .and_then(|c| c.k.parse::<LogPosition>().ok())
        {
            let seq = args.push(Arg::Int(Some(after.0)));
            sql.push_str(&format!(" AND log_seq > {seq}"));
        }
        self.page(sql, args, "log_seq", page, |r| {
            let position = LogPosition(r.int("log_seq")?);
            let checkpoint = rows::checkpoint(r)?;
            let cursor = PageCursor {
                l: List::Checkpoints,
                k: position.to_string(),
                id: checkpoint.entity.id.to_string(),
            };
            Ok((checkpoint, cursor))
        })
        .await
    }

    pub(super) async fn list_messages(
        &self,
        conversation_id: Uuid,
        filter: &MessageFilter,
        page: &PageRequest,
    ) -> Result<Page<Forgettable<MessageAdded>>, AppError> {
        let mut sql = format!(
            "SELECT {} FROM messages WHERE conversation_id = $1",
            rows::MESSAGE_COLUMNS
        );
        let mut args = Args::new().uuid(conversation_id);
        for (column, value) in [("task_id", filter.task_id), ("actor_id", filter.actor_id)] {
            if let Some(value) = value {
                let p = args.push(Arg::Uuid(Some(value)));
                sql.push_str(&format!(" AND {column} = {p}"));
            }
        }
        after_cursor(&mut sql, &mut args, "time", &page.cursor)?;
        self.page(sql, args, "time, id", page, |r| {
            let message = rows::message(r)?;
            let cursor = PageCursor {
                l: List::Messages,
                k: time::format(&message.entity.time),
                id: message.entity.id.to_string(),
            };
            Ok((message, cursor))
        })
        .await
    }
}
