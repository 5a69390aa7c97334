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

impl CycleTime {
    /// The percentiles of `seconds`.
    pub fn of(mut seconds: Vec<f64>) -> Self {
        seconds.sort_by(f64::total_cmp);
        Self {
            count: seconds.len() as u64,
            p50_seconds: percentile(&seconds, 0.5),
            p90_seconds: percentile(&seconds, 0.9),
        }
    }
}

/// Percentile `p` (0..=1) of sorted values, interpolated linearly.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = p * last as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    let (a, b) = (sorted[lo], sorted[hi.min(last)]);
    Some(a + (b - a) * (rank - lo as f64))
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
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[4.0], 0.9), Some(4.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
        assert_eq!(percentile(&[0.0, 10.0], 0.9), Some(9.0));
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
