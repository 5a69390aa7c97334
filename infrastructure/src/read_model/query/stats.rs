//! Task statistics: counts by status and cycle times, overall or per group.

use std::collections::BTreeMap;

use pm_application::scope::Scope;
use pm_application::views::{
    CycleTime, GroupKey, StatsGroup, TaskCounts, TaskStats, TaskStatsGroup, TaskStatsView,
    PERCENTILE_TENTHS,
};
use pm_application::AppError;
use pm_domain::types::TaskStatus;

use super::ReadModel;
use crate::db::Args;
use crate::owners::organization_clause;
use crate::processor::store::store_error;
use crate::sql::Dialect;

/// Counts by status, and how many cycle times one group has with the ones at the ranks
/// its percentiles need.
type Group = (TaskCounts, (u64, BTreeMap<u64, f64>));

impl ReadModel {
    pub(super) async fn stats(
        &self,
        scope: &Scope,
        group: StatsGroup,
    ) -> Result<TaskStatsView, AppError> {
        let key = match group {
            StatsGroup::All => "CAST(NULL AS text)",
            StatsGroup::AssignedTo => "CAST(assigned_to AS text)",
            StatsGroup::Organization => "organization",
        };
        let mut args = Args::new();
        let within = organization_clause(&mut args, "organization", scope);
        let counts_sql = format!(
            "SELECT {key} AS k, status, count(*) AS n FROM tasks WHERE 1 = 1{within} \
             GROUP BY {key}, status"
        );
        // Cycle times are ranked by the database, per group, and only the rows at the
        // ranks the percentiles need leave it: the statistics of any number of tasks take
        // a handful of rows of memory here.
        let seconds = match self.db.dialect() {
            Dialect::Postgres => {
                "CAST(EXTRACT(EPOCH FROM (last_work_completed_at - first_work_started_at)) \
                 AS double precision)"
            }
            // Times are RFC 3339 text with microseconds (`…:SS.ffffffZ`): whole seconds
            // from `unixepoch`, the microseconds from the text, so none is rounded away.
            Dialect::Sqlite => {
                "(unixepoch(last_work_completed_at) - unixepoch(first_work_started_at)) \
                 + (CAST(substr(last_work_completed_at, 21, 6) AS integer) \
                 - CAST(substr(first_work_started_at, 21, 6) AS integer)) / 1000000.0"
            }
        };
        let wanted: Vec<String> = PERCENTILE_TENTHS
            .iter()
            .flat_map(|t| {
                [
                    format!("(n - 1) * {t} / 10"),
                    format!("((n - 1) * {t} + 9) / 10"),
                ]
            })
            .collect();
        let cycle_sql = format!(
            "WITH c AS (SELECT {key} AS k, {seconds} AS s FROM tasks \
             WHERE first_work_started_at IS NOT NULL AND last_work_completed_at IS NOT NULL{within}), \
             r AS (SELECT k, s, ROW_NUMBER() OVER (PARTITION BY k ORDER BY s) - 1 AS i, \
             COUNT(*) OVER (PARTITION BY k) AS n FROM c WHERE s >= 0) \
             SELECT k, n, i, s FROM r WHERE i IN ({})",
            wanted.join(", ")
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
            let count = u64::try_from(r.int("n").map_err(decode)?).unwrap_or(0);
            let rank = u64::try_from(r.int("i").map_err(decode)?).unwrap_or(0);
            let cycles = &mut groups
                .entry(r.opt_string("k").map_err(decode)?)
                .or_default()
                .1;
            cycles.0 = count;
            cycles.1.insert(rank, r.float("s").map_err(decode)?);
        }
        let stats = |(counts, (count, at)): Group| TaskStats {
            total: counts.total(),
            counts,
            cycle_time: CycleTime::from_ranks(count, |rank| at.get(&rank).copied()),
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
