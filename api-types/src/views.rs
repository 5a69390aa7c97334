//! What the query side answers: typed views that are both what the service serializes and
//! what its OpenAPI document describes (with the `openapi` feature). Entities that are
//! exactly their creation fact (actors, checkpoints, messages) are answered as the
//! domain's facts themselves; the others add what the read model derives.

mod conversation;
mod forgettable;
mod page;
mod processor;
mod saga;
mod stats;
mod task;

pub use conversation::{ConversationView, LatestCheckpoint, TaskCounts};
pub use forgettable::{Forgettable, Personal, FORGOTTEN};
pub use page::Page;
pub use processor::{
    ParkedEvent, ProcessorLag, ProcessorRecord, ProcessorReport, ReplicaView, RunnerView,
};
pub use saga::{
    AgentView, AnomalyInstance, AnomalyView, LeaseView, SessionSnapshot, SessionView, ToolCallView,
    ToolResultView, TurnView,
};
pub use stats::{
    ranks, CycleTime, GroupKey, StatsGroup, TaskStats, TaskStatsGroup, TaskStatsView,
    PERCENTILE_TENTHS,
};
pub use task::{TaskCheckpointView, TaskDetail, TaskView};
