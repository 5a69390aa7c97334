//! The application's [`ReadModelStore`] over the read model's views (`actors`,
//! `conversations`, `tasks`, …): typed answers with keyset pagination.

mod conversations;
mod rows;
mod stats;
mod tasks;

use chrono::{DateTime, Utc};
use pm_application::queries::{ConversationFilter, MessageFilter, ReadModelStore, TaskFilter};
use pm_application::scope::Scope;
use pm_application::views::{
    ConversationView, Forgettable, Page, PageCursor, PageRequest, StatsGroup, TaskCheckpointView,
    TaskDetail, TaskStatsView, TaskView,
};
use pm_application::AppError;
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use uuid::Uuid;

use crate::db::{Arg, Args, DbRow};
use crate::processor::store::store_error;
use crate::Database;

/// The read model's queries.
#[derive(Debug, Clone)]
pub struct ReadModel {
    db: Database,
}

impl ReadModel {
    /// Queries against `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// The first row of `sql`, decoded by `decode`.
    async fn one<T>(
        &self,
        sql: &str,
        args: Args,
        decode: impl Fn(&DbRow) -> Result<T, sqlx::Error>,
    ) -> Result<Option<T>, AppError> {
        let row = self
            .db
            .fetch_optional(sql, args)
            .await
            .map_err(store_error)?;
        row.as_ref().map(decode).transpose().map_err(store_error)
    }

    /// A page of `sql` (which must end before its `ORDER BY`; `order` is appended with
    /// `LIMIT limit + 1`), each row decoded with its cursor.
    async fn page<T>(
        &self,
        sql: String,
        args: Args,
        order: &str,
        page: &PageRequest,
        decode: impl Fn(&DbRow) -> Result<(T, PageCursor), sqlx::Error>,
    ) -> Result<Page<T>, AppError> {
        let mut args = args;
        let limit = args.push(Arg::Int(Some(i64::from(page.limit) + 1)));
        let sql = format!("{sql} ORDER BY {order} LIMIT {limit}");
        let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
        let items = rows
            .iter()
            .map(decode)
            .collect::<Result<Vec<_>, _>>()
            .map_err(store_error)?;
        Ok(Page::from_fetched(items, page.limit))
    }
}

/// Appends `AND (<column>, id) > (<cursor key>, <cursor id>)` for keyset pagination by a
/// time column.
fn after_cursor(
    sql: &mut String,
    args: &mut Args,
    column: &str,
    cursor: &Option<PageCursor>,
) -> Result<(), AppError> {
    if let Some(c) = cursor {
        let (at, after) = cursor_key(c).map_err(store_error)?;
        let key = args.push(Arg::Time(Some(at)));
        let id = args.push(Arg::Uuid(Some(after)));
        sql.push_str(&format!(" AND ({column}, id) > ({key}, {id})"));
    }
    Ok(())
}

/// A time-keyed page cursor's time and id, bound typed: [`PageCursor::decode_for`] let
/// through only a key and an id that parse, so an error here is a cursor made elsewhere.
pub(crate) fn cursor_key(c: &PageCursor) -> Result<(DateTime<Utc>, Uuid), sqlx::Error> {
    let bad = |e: String| sqlx::Error::Encode(format!("page cursor: {e}").into());
    let at = DateTime::parse_from_rfc3339(&c.k).map_err(|e| bad(e.to_string()))?;
    let id = c.id.parse().map_err(|e: uuid::Error| bad(e.to_string()))?;
    Ok((at.with_timezone(&Utc), id))
}

impl ReadModelStore for ReadModel {
    async fn actor(&self, id: Uuid) -> Result<Option<Forgettable<ActorRegistered>>, AppError> {
        let sql = format!("SELECT {} FROM actors WHERE id = $1", rows::ACTOR_COLUMNS);
        self.one(&sql, Args::new().uuid(id), rows::actor).await
    }

    async fn conversation(
        &self,
        id: Uuid,
    ) -> Result<Option<Forgettable<ConversationView>>, AppError> {
        self.find_conversation(id).await
    }

    async fn conversations(
        &self,
        scope: &Scope,
        filter: &ConversationFilter,
        page: &PageRequest,
    ) -> Result<Page<Forgettable<ConversationView>>, AppError> {
        self.list_conversations(scope, filter, page).await
    }

    async fn checkpoints(
        &self,
        conversation_id: Uuid,
        page: &PageRequest,
    ) -> Result<Page<Forgettable<ConversationCheckpointCreated>>, AppError> {
        self.list_checkpoints(conversation_id, page).await
    }

    async fn checkpoint(
        &self,
        conversation_id: Uuid,
        id: Uuid,
    ) -> Result<Option<Forgettable<ConversationCheckpointCreated>>, AppError> {
        let sql = format!(
            "SELECT {} FROM conversation_checkpoints WHERE id = $1 AND conversation_id = $2",
            rows::CHECKPOINT_COLUMNS
        );
        self.one(
            &sql,
            Args::new().uuid(id).uuid(conversation_id),
            rows::checkpoint,
        )
        .await
    }

    async fn messages(
        &self,
        conversation_id: Uuid,
        filter: &MessageFilter,
        page: &PageRequest,
    ) -> Result<Page<Forgettable<MessageAdded>>, AppError> {
        self.list_messages(conversation_id, filter, page).await
    }

    async fn message(
        &self,
        conversation_id: Uuid,
        id: Uuid,
    ) -> Result<Option<Forgettable<MessageAdded>>, AppError> {
        let sql = format!(
            "SELECT {} FROM messages WHERE id = $1 AND conversation_id = $2",
            rows::MESSAGE_COLUMNS
        );
        self.one(
            &sql,
            Args::new().uuid(id).uuid(conversation_id),
            rows::message,
        )
        .await
    }

    async fn tasks(
        &self,
        scope: &Scope,
        filter: &TaskFilter,
        page: &PageRequest,
    ) -> Result<Page<Forgettable<TaskView>>, AppError> {
        self.list_tasks(scope, filter, page).await
    }

    async fn task(&self, id: Uuid) -> Result<Option<Forgettable<TaskDetail>>, AppError> {
        self.find_task(id).await
    }

    async fn task_checkpoint(
        &self,
        task_id: Uuid,
        id: Uuid,
    ) -> Result<Option<TaskCheckpointView>, AppError> {
        let sql = format!(
            "SELECT {} FROM task_checkpoints WHERE id = $1 AND task_id = $2",
            rows::TASK_CHECKPOINT_COLUMNS
        );
        self.one(
            &sql,
            Args::new().uuid(id).uuid(task_id),
            rows::task_checkpoint,
        )
        .await
    }

    async fn task_stats(
        &self,
        scope: &Scope,
        group: StatsGroup,
    ) -> Result<TaskStatsView, AppError> {
        self.stats(scope, group).await
    }
}
