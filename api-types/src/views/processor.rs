//! What operators see of processors: `GET /v1/admin/processors` and parked events.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A processor's stored state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProcessorRecord {
    /// The processor's name.
    pub name: String,
    /// Its cursor (a log position).
    pub position: String,
    /// The read-table generation it writes (projections).
    pub generation: i64,
    /// The replica that owns it now (a live one), if any.
    pub lease_owner: Option<String>,
    /// The last rebuild's state (`running`, `done`, `failed`).
    pub rebuild_status: Option<String>,
    /// Details of the last rebuild.
    pub rebuild_detail: Option<String>,
    /// Events it parked.
    pub parked: i64,
}

/// A processor with its lag behind the log's head.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProcessorLag {
    /// Its stored state.
    #[serde(flatten)]
    pub record: ProcessorRecord,
    /// Events between its cursor and the head.
    pub lag_events: i64,
}

/// This replica's runner of a processor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunnerView {
    /// Whether this replica owns the processor.
    pub leader: bool,
    /// The cursor this runner last saw.
    pub cursor: String,
    /// Events it parked since start.
    pub parked: u64,
    /// The error it is retrying after, if any.
    pub last_error: Option<String>,
}

/// This replica's view of itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReplicaView {
    /// This replica's identity (the lease owner it writes).
    pub owner: String,
    /// Its read-model runner.
    pub read_model: RunnerView,
    /// Its saga runner.
    pub sagas: RunnerView,
}

/// `GET /v1/admin/processors`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProcessorReport {
    /// The log's head position.
    pub head: String,
    /// Every processor.
    pub processors: Vec<ProcessorLag>,
    /// This replica.
    pub this_replica: ReplicaView,
}

/// An event a processor could not apply and skipped.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ParkedEvent {
    /// Its log position.
    pub position: String,
    /// Its aggregate type.
    pub aggregate_type: String,
    /// Its aggregate id.
    pub aggregate_id: String,
    /// Its type.
    pub event_type: String,
    /// Why it could not be applied.
    pub error: String,
    /// When it was parked.
    #[serde(with = "pm_domain::time")]
    pub parked_at: DateTime<Utc>,
}
