//! What the query side answers: typed views that are both what the service serializes and
//! what its OpenAPI document describes (with the `openapi` feature). Entities that are
//! exactly their creation fact (actors, checkpoints, messages) are answered as the
//! domain's facts themselves; the others add what the read model derives.
//!
//! The views pm-client reads too live in `pm_api_types::views` and are re-exported here;
//! the log's CloudEvents and the keyset cursors (what a cursor holds, how it is encoded
//! and checked) are the service's own.

mod event;
mod page;

pub use event::CloudEvent;
pub use page::{List, PageCursor, PageRequest};
pub use pm_api_types::views::{
    ranks, AgentView, AnomalyInstance, AnomalyView, ConversationView, CycleTime, Forgettable,
    GroupKey, LatestCheckpoint, LeaseView, Page, ParkedEvent, ProcessorLag, ProcessorRecord,
    ProcessorReport, ReplicaView, RunnerView, SessionSnapshot, SessionView, StatsGroup,
    TaskCheckpointView, TaskCounts, TaskDetail, TaskStats, TaskStatsGroup, TaskStatsView, TaskView,
    ToolCallView, ToolResultView, TurnView, PERCENTILE_TENTHS,
};
