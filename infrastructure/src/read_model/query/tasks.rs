//! Tasks with their derived status, their checkpoint history, and task statistics.

use std::collections::BTreeMap;

use pm_application::AppError;
use pm_domain::types::TaskCheckpointType;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::conversations::page;
use super::rows::{compact, task_checkpoint_json, RowExt, TASK_CHECKPOINT_COLUMNS};
use super::{unavailable, PageRequest, ReadModel};
use crate::on_db;
use crate::read_model::{List, Page, PageCursor};

/// Filters of `GET /v1/tasks` (and `GET /v1/conversations/{id}/tasks`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Derived status (`NOT_STARTED` or a task checkpoint type).
    pub status: Option<String>,
    /// Assignee.
    pub assigned_to: Option<Uuid>,
    /// Conversation.
    pub conversation_id: Option<Uuid>,
    /// The BEGIN_WORK checkpoint.
    pub checkpoint_id: Option<Uuid>,
    /// The conversation's organization.
    pub organization: Option<String>,
}

/// How `GET /v1/stats/tasks` groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsGroup {
    /// One group.
    All,
    /// By assignee.
    AssignedTo,
    /// By the conversation's organization.
    Organization,
}

const TASK_COLUMNS: &str = "id::text AS id, conversation_id::text AS conversation_id, checkpoint_id::text AS checkpoint_id, \
    instructions, assigned_to::text AS assigned_to, organization, created_at, status, status_changed_at, checkpoint_count";

fn task_json<R: RowExt>(r: &R) -> Result<Value, sqlx::Error> {
    let mut v = compact(json!({
        "id": r.text("id")?,
        "conversation_id": r.text("conversation_id")?,
        "checkpoint_id": r.text("checkpoint_id")?,
        "instructions": r.text("instructions")?,
        "assigned_to": r.text("assigned_to")?,
        "organization": r.text("organization")?,
        "created_at": r.time("created_at")?,
        "status": r.text("status")?,
    }));
    if let Some(obj) = v.as_object_mut() {
        obj.insert("status_changed_at".into(), r.time("status_changed_at")?);
        obj.insert("checkpoint_count".into(), r.int("checkpoint_count")?.into());
    }
    Ok(v)
}

/// Percentile `p` (0..=1) of sorted values, interpolated linearly.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = p * last as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    let (a, b) = (sorted[lo], sorted[hi.min(last)]);
    Some(a + (b - a) * (rank - lo as f64))
}

fn cycle_time(mut seconds: Vec<f64>) -> Value {
    seconds.sort_by(f64::total_cmp);
    json!({
        "count": seconds.len(),
        "p50_seconds": percentile(&seconds, 0.5),
        "p90_seconds": percentile(&seconds, 0.9),
    })
}

impl ReadModel {
    /// Tasks matching `filter`, oldest first.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn tasks(
        &self,
        filter: &TaskFilter,
        req: &PageRequest,
    ) -> Result<Page<Value>, AppError> {
        let items = on_db!(&self.db, d, pool, {
            let select = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE 1 = 1");
            let mut q = sqlx::QueryBuilder::new(d.sql(&select).into_owned());
            if let Some(status) = &filter.status {
                q.push(" AND status = ").push_bind(status.clone());
            }
            if let Some(organization) = &filter.organization {
                q.push(" AND organization = ")
                    .push_bind(organization.clone());
            }
            let id_filters = [
                ("assigned_to", filter.assigned_to),
                ("conversation_id", filter.conversation_id),
                ("checkpoint_id", filter.checkpoint_id),
            ];
            for (column, value) in id_filters {
                if let Some(value) = value {
                    q.push(format!(" AND {column} = "))
                        .push_bind(value.to_string())
                        .push(d.cast("uuid"));
                }
            }
            after_cursor!(q, d, "created_at", req.cursor);
            q.push(" ORDER BY created_at, id LIMIT ")
                .push_bind(i64::from(req.limit) + 1);
            let rows = q.build().fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    let cursor = PageCursor {
                        l: List::Tasks,
                        k: r.time("created_at")?
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        id: r.string("id")?,
                    };
                    Ok::<_, sqlx::Error>((task_json(r)?, cursor))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(unavailable)?;
        Ok(page(items, req.limit))
    }

    /// The task with its status and checkpoint history (in the task's event order).
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn task(&self, id: Uuid) -> Result<Option<Value>, AppError> {
        let task_sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1::uuid");
        let history_sql =
            format!("SELECT {TASK_CHECKPOINT_COLUMNS} FROM task_checkpoints WHERE task_id = $1::uuid ORDER BY sequence");
        on_db!(&self.db, d, pool, {
            let Some(row) = sqlx::query(&d.sql(&task_sql))
                .bind(id.to_string())
                .fetch_optional(pool)
                .await?
            else {
                return Ok(None);
            };
            let mut task = task_json(&row)?;
            let history = sqlx::query(&d.sql(&history_sql))
                .bind(id.to_string())
                .fetch_all(pool)
                .await?
                .iter()
                .map(task_checkpoint_json)
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(obj) = task.as_object_mut() {
                obj.insert("checkpoints".into(), Value::Array(history));
            }
            Ok(Some(task))
        })
        .map_err(unavailable)
    }

    /// Counts by status and cycle times (first `WORK_STARTED` → latest `WORK_COMPLETED`),
    /// overall or per group.
    ///
    /// # Errors
    /// [`AppError::Unavailable`].
    pub async fn task_stats(&self, group: StatsGroup) -> Result<Value, AppError> {
        let key = match group {
            StatsGroup::All => "CAST(NULL AS text)",
            StatsGroup::AssignedTo => "assigned_to::text",
            StatsGroup::Organization => "organization",
        };
        let counts_sql =
            format!("SELECT {key} AS k, status, count(*) AS n FROM tasks GROUP BY {key}, status");
        let cycle_sql = format!(
            "SELECT {key} AS k, first_work_started_at, last_work_completed_at FROM tasks \
             WHERE first_work_started_at IS NOT NULL AND last_work_completed_at IS NOT NULL"
        );
        type Group = (BTreeMap<String, i64>, Vec<f64>);
        let groups: BTreeMap<Option<String>, Group> = on_db!(&self.db, d, pool, {
            let mut groups: BTreeMap<Option<String>, Group> = BTreeMap::new();
            for r in sqlx::query(&d.sql(&counts_sql)).fetch_all(pool).await? {
                let k = r.opt_string("k")?;
                let entry = groups.entry(k).or_default();
                *entry.0.entry(r.string("status")?).or_default() += r.int("n")?;
            }
            for r in sqlx::query(&d.sql(&cycle_sql)).fetch_all(pool).await? {
                let k = r.opt_string("k")?;
                if let (Some(start), Some(end)) = (
                    r.datetime("first_work_started_at")?,
                    r.datetime("last_work_completed_at")?,
                ) {
                    if end >= start {
                        let seconds = (end - start).num_microseconds().unwrap_or(0) as f64 / 1e6;
                        groups.entry(k).or_default().1.push(seconds);
                    }
                }
            }
            Ok::<_, sqlx::Error>(groups)
        })
        .map_err(unavailable)?;
        let render = |(counts, cycles): Group| {
            let mut by_status = Map::new();
            by_status.insert("NOT_STARTED".into(), 0.into());
            for t in TaskCheckpointType::ALL {
                by_status.insert(t.as_str().into(), 0.into());
            }
            let mut total = 0;
            for (status, n) in counts {
                total += n;
                by_status.insert(status, n.into());
            }
            json!({"total": total, "counts": by_status, "cycle_time": cycle_time(cycles)})
        };
        Ok(match group {
            StatsGroup::All => render(groups.into_values().next().unwrap_or_default()),
            StatsGroup::AssignedTo | StatsGroup::Organization => {
                let field = if group == StatsGroup::AssignedTo {
                    "assigned_to"
                } else {
                    "organization"
                };
                let items: Vec<Value> = groups
                    .into_iter()
                    .map(|(k, g)| {
                        let mut v = render(g);
                        if let Some(obj) = v.as_object_mut() {
                            obj.insert(field.into(), k.map_or(Value::Null, Value::String));
                        }
                        v
                    })
                    .collect();
                json!({"group_by": field, "groups": items})
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_interpolate() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[4.0], 0.9), Some(4.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
        assert_eq!(percentile(&[0.0, 10.0], 0.9), Some(9.0));
    }
}
