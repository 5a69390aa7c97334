//! Task statistics: counts by status and cycle times, overall or per group.

use std::collections::BTreeMap;

use pm_application::scope::Scope;
use pm_application::views::{
    CycleTime, GroupKey, StatsGroup, TaskCounts, TaskStats, TaskStatsGroup, TaskStatsView,
};
use pm_application::AppError;
use pm_domain::types::TaskStatus;

use super::ReadModel;
use crate::db::Args;
use crate::owners::organization_clause;
use crate::processor::store::store_error;

/// Counts by status and the cycle times of one group.
type Group = (TaskCounts, Vec<f64>);

impl ReadModel {
    pub(super) async fn stats(
        &self,
        scope: &Scope,
        group: StatsGroup,
    ) -> Result<TaskStatsView, AppError> {
        let key = match group {
            StatsGroup::All => "CAST(NULL AS text)",
            StatsGroup::AssignedTo => "assigned_to::text",
            StatsGroup::Organization => "organization",
        };
        let mut args = Args::new();
        let within = organization_clause(&mut args, "organization", scope);
        let counts_sql = format!(
            "SELECT {key} AS k, status, count(*) AS n FROM tasks WHERE 1 = 1{within} \
             GROUP BY {key}, status"
        );
        let cycle_sql = format!(
            "SELECT {key} AS k, first_work_started_at, last_work_completed_at FROM tasks \
             WHERE first_work_started_at IS NOT NULL AND last_work_completed_at IS NOT NULL{within}"
        );
        let decode = |e: sqlx::Error| store_error(e);
        let mut groups: BTreeMap<Option<String>, Group> = BTreeMap::new();
        for r in self
            .db
            .fetch_all(&counts_sql, args.clone())
            .await
            .map_err(decode)?
        {
            let status = r
                .parsed("status", |s| {
                    TaskStatus::parse(s).ok_or("unknown task status")
                })
                .map_err(decode)?;
            let entry = groups
                .entry(r.opt_string("k").map_err(decode)?)
                .or_default();
            entry.0.add(status, r.int("n").map_err(decode)?);
        }
        for r in self.db.fetch_all(&cycle_sql, args).await.map_err(decode)? {
            let (start, end) = (
                r.time("first_work_started_at").map_err(decode)?,
                r.time("last_work_completed_at").map_err(decode)?,
            );
            if end >= start {
                let seconds = (end - start).num_microseconds().unwrap_or(0) as f64 / 1e6;
                groups
                    .entry(r.opt_string("k").map_err(decode)?)
                    .or_default()
                    .1
                    .push(seconds);
            }
        }
        let stats = |(counts, cycles): Group| TaskStats {
            total: counts.total(),
            counts,
            cycle_time: CycleTime::of(cycles),
        };
        Ok(match group {
            StatsGroup::All => {
                TaskStatsView::All(stats(groups.into_values().next().unwrap_or_default()))
            }
            StatsGroup::AssignedTo | StatsGroup::Organization => TaskStatsView::Grouped {
                group_by: group,
                groups: groups
                    .into_iter()
                    .map(|(k, g)| {
                        let key = match group {
                            StatsGroup::AssignedTo => GroupKey::AssignedTo {
                                assigned_to: k.and_then(|k| k.parse().ok()),
                            },
                            _ => GroupKey::Organization { organization: k },
                        };
                        TaskStatsGroup {
                            key,
                            stats: stats(g),
                        }
                    })
                    .collect(),
            },
        })
    }
}
