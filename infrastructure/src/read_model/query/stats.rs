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

/// A task's cycle in seconds on SQLite, where times are RFC 3339 text with microseconds
/// (`…:SS.ffffffZ`): whole seconds from `unixepoch` of the text up to the seconds, the
/// microseconds from the text, so none is rounded away. (`unixepoch` of the whole text
/// rounds a time at `.9995` s or later up to the next second: a cycle within a second of
/// such a start came out negative and was dropped.)
const SQLITE_SECONDS: &str = "(unixepoch(substr(last_work_completed_at, 1, 19)) \
     - unixepoch(substr(first_work_started_at, 1, 19))) \
     + (CAST(substr(last_work_completed_at, 21, 6) AS integer) \
     - CAST(substr(first_work_started_at, 21, 6) AS integer)) / 1000000.0";

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
            Dialect::Sqlite => SQLITE_SECONDS,
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::SQLITE_SECONDS;
    use crate::db::Args;
    use crate::Database;

    async fn seconds(db: &Database, from: &str, to: &str) -> f64 {
        let sql = format!(
            "SELECT {SQLITE_SECONDS} AS s FROM (SELECT $1 AS first_work_started_at, \
             $2 AS last_work_completed_at) AS t"
        );
        db.fetch_optional(&sql, Args::new().text(from).text(to))
            .await
            .expect("computed")
            .expect("a row")
            .float("s")
            .expect("seconds")
    }

    #[tokio::test]
    async fn given_cycles_across_second_boundaries_then_sqlite_counts_every_microsecond() {
        let db = Database::connect("sqlite::memory:", 1, Duration::from_secs(5))
            .await
            .expect("an in-memory database");
        for (from, to, want) in [
            // A start late in its second: `unixepoch` of the whole text rounded it up.
            (
                "2026-11-28T10:00:00.999999Z",
                "2026-11-28T10:00:01.000100Z",
                0.000_101,
            ),
            (
                "2026-11-28T10:00:00.999600Z",
                "2026-11-28T10:00:00.999900Z",
                0.000_300,
            ),
            (
                "2026-11-28T10:00:00.400000Z",
                "2026-11-28T10:00:02.600000Z",
                2.2,
            ),
            (
                "2026-11-28T23:59:59.999999Z",
                "2026-11-29T00:00:00.000000Z",
                0.000_001,
            ),
        ] {
            let got = seconds(&db, from, to).await;
            assert!(
                (got - want).abs() < 1e-9,
                "{from} → {to}: {got}, not {want}"
            );
        }
    }
}
