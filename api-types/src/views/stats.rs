//! `GET /v1/stats/tasks`: counts by status and cycle times, overall or per group.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::TaskCounts;

/// How the statistics are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StatsGroup {
    /// One group: every task.
    All,
    /// By assignee.
    AssignedTo,
    /// By the conversation's organization.
    Organization,
}

/// Statistics of a set of tasks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskStats {
    /// How many tasks.
    pub total: i64,
    /// By derived status.
    pub counts: TaskCounts,
    /// First `WORK_STARTED` → latest `WORK_COMPLETED`.
    pub cycle_time: CycleTime,
}

/// Cycle-time percentiles, interpolated (like `percentile_cont`); null when no task has
/// both times.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CycleTime {
    /// Tasks with both times.
    pub count: u64,
    /// Median, in seconds.
    pub p50_seconds: Option<f64>,
    /// 90th percentile, in seconds.
    pub p90_seconds: Option<f64>,
}

/// The percentiles given, in tenths: the median and the 90th.
pub const PERCENTILE_TENTHS: [u64; 2] = [5, 9];

/// Where percentile `tenths`/10 of `n` sorted values lies: the 0-based ranks it
/// interpolates between and the weight of the upper one (`rank = p × (n − 1)`, like
/// `percentile_cont`). Integer arithmetic, so that the database can pick the same ranks
/// (`(n − 1) × t / 10` and `((n − 1) × t + 9) / 10`) and only those rows leave it.
pub fn ranks(n: u64, tenths: u64) -> Option<(u64, u64, f64)> {
    let scaled = n.checked_sub(1)?.saturating_mul(tenths);
    let (lo, hi) = (scaled / 10, scaled.div_ceil(10));
    Some((lo, hi, (scaled % 10) as f64 / 10.0))
}

impl CycleTime {
    /// The percentiles of `count` values, given the value at each rank [`ranks`] names
    /// (`at(rank)`); a rank `at` does not know makes that percentile null.
    pub fn from_ranks(count: u64, at: impl Fn(u64) -> Option<f64>) -> Self {
        let percentile = |tenths| {
            let (lo, hi, weight) = ranks(count, tenths)?;
            let (a, b) = (at(lo)?, at(hi)?);
            Some(a + (b - a) * weight)
        };
        let [p50, p90] = PERCENTILE_TENTHS;
        Self {
            count,
            p50_seconds: percentile(p50),
            p90_seconds: percentile(p90),
        }
    }

    /// The percentiles of `seconds`.
    pub fn of(mut seconds: Vec<f64>) -> Self {
        seconds.sort_by(f64::total_cmp);
        let at = |rank: u64| {
            usize::try_from(rank)
                .ok()
                .and_then(|i| seconds.get(i))
                .copied()
        };
        Self::from_ranks(seconds.len() as u64, at)
    }
}

/// The key of a group: the field named by `group_by`, null for tasks without one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum GroupKey {
    /// `group_by=assigned_to`.
    AssignedTo {
        /// The assignee.
        #[cfg_attr(feature = "openapi", schema(required = true))]
        assigned_to: Option<Uuid>,
    },
    /// `group_by=organization`.
    Organization {
        /// The organization.
        #[cfg_attr(feature = "openapi", schema(required = true))]
        organization: Option<String>,
    },
}

/// One group's statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskStatsGroup {
    /// The group's key.
    #[serde(flatten)]
    pub key: GroupKey,
    /// Its statistics.
    #[serde(flatten)]
    pub stats: TaskStats,
}

impl<'de> Deserialize<'de> for TaskStatsGroup {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let key = if let Some(v) = map.remove("assigned_to") {
            GroupKey::AssignedTo {
                assigned_to: serde_json::from_value(v).map_err(D::Error::custom)?,
            }
        } else if let Some(v) = map.remove("organization") {
            GroupKey::Organization {
                organization: serde_json::from_value(v).map_err(D::Error::custom)?,
            }
        } else {
            return Err(D::Error::custom(
                "a group needs assigned_to or organization",
            ));
        };
        let stats =
            serde_json::from_value(serde_json::Value::Object(map)).map_err(D::Error::custom)?;
        Ok(Self { key, stats })
    }
}

/// The answer of `GET /v1/stats/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum TaskStatsView {
    /// Grouped by `group_by`.
    Grouped {
        /// `assigned_to` or `organization`.
        group_by: StatsGroup,
        /// One entry per key.
        groups: Vec<TaskStatsGroup>,
    },
    /// Without `group_by`: every task.
    All(TaskStats),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        assert_eq!(CycleTime::of(vec![]).p50_seconds, None);
        assert_eq!(CycleTime::of(vec![4.0]).p90_seconds, Some(4.0));
        assert_eq!(
            CycleTime::of(vec![4.0, 1.0, 3.0, 2.0]).p50_seconds,
            Some(2.5)
        );
        assert_eq!(CycleTime::of(vec![0.0, 10.0]).p90_seconds, Some(9.0));
        let eleven: Vec<f64> = (0..11).map(f64::from).collect();
        assert_eq!(
            CycleTime::of(eleven).p90_seconds,
            Some(9.0),
            "an exact rank"
        );
    }

    #[test]
    fn given_counts_when_ranked_then_the_two_neighbours_and_the_weight() {
        assert_eq!(ranks(0, 5), None);
        assert_eq!(ranks(1, 9), Some((0, 0, 0.0)));
        assert_eq!(ranks(4, 5), Some((1, 2, 0.5)));
        assert_eq!(ranks(11, 9), Some((9, 9, 0.0)));
        assert_eq!(ranks(12, 9), Some((9, 10, 0.9)));
    }

    #[test]
    fn grouped_answers_round_trip() {
        let view = TaskStatsView::Grouped {
            group_by: StatsGroup::Organization,
            groups: vec![TaskStatsGroup {
                key: GroupKey::Organization { organization: None },
                stats: TaskStats::default(),
            }],
        };
        let json = serde_json::to_value(&view).expect("serializes");
        assert_eq!(json["groups"][0]["organization"], serde_json::Value::Null);
        assert_eq!(
            serde_json::from_value::<TaskStatsView>(json).expect("parses"),
            view
        );
    }
}
