//! Tasks with their derived status and checkpoint history.

use pm_application::queries::TaskFilter;
use pm_application::scope::Scope;
use pm_application::views::{
    Forgettable, List, Page, PageCursor, PageRequest, TaskDetail, TaskView,
};
use pm_application::AppError;
use pm_domain::time;
use uuid::Uuid;

use super::{after_cursor, rows, ReadModel};
use crate::db::{Arg, Args};
use crate::owners::organization_clause;
use crate::processor::store::store_error;

impl ReadModel {
    pub(super) async fn list_tasks(
        &self,
        scope: &Scope,
        filter: &TaskFilter,
        page: &PageRequest,
    ) -> Result<Page<Forgettable<TaskView>>, AppError> {
        let mut sql = format!("SELECT {} FROM tasks WHERE 1 = 1", rows::TASK_COLUMNS);
        let mut args = Args::new();
        if let Some(status) = filter.status {
            let p = args.push(Arg::Text(Some(status.as_str().to_string())));
            sql.push_str(&format!(" AND status = {p}"));
        }
        if let Some(organization) = &filter.organization {
            let p = args.push(Arg::Text(Some(organization.clone())));
            sql.push_str(&format!(" AND organization = {p}"));
        }
        let id_filters = [
            ("assigned_to", filter.assigned_to),
            ("conversation_id", filter.conversation_id),
            ("checkpoint_id", filter.checkpoint_id),
        ];
        for (column, value) in id_filters {
            if let Some(value) = value {
                let p = args.push(Arg::Uuid(Some(value)));
                sql.push_str(&format!(" AND {column} = {p}"));
            }
        }
        sql.push_str(&organization_clause(&mut args, "organization", scope));
        after_cursor(&mut sql, &mut args, "created_at", &page.cursor)?;
        self.page(sql, args, "created_at, id", page, |r| {
            let task = rows::task(r)?;
            let cursor = PageCursor {
                l: List::Tasks,
                k: time::format(&task.entity.task.created_at),
                id: task.entity.task.id.to_string(),
            };
            Ok((task, cursor))
        })
        .await
    }

    pub(super) async fn find_task(
        &self,
        id: Uuid,
    ) -> Result<Option<Forgettable<TaskDetail>>, AppError> {
        let sql = format!("SELECT {} FROM tasks WHERE id = $1", rows::TASK_COLUMNS);
        let Some(task) = self.one(&sql, Args::new().uuid(id), rows::task).await? else {
            return Ok(None);
        };
        let sql = format!(
            "SELECT {} FROM task_checkpoints WHERE task_id = $1 ORDER BY sequence",
            rows::TASK_CHECKPOINT_COLUMNS
        );
        let checkpoints = self
            .db
            .fetch_all(&sql, Args::new().uuid(id))
            .await
            .map_err(store_error)?
            .iter()
            .map(rows::task_checkpoint)
            .collect::<Result<_, _>>()
            .map_err(store_error)?;
        Ok(Some(task.map(|task| TaskDetail { task, checkpoints })))
    }
}
