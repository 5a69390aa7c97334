//! The sagas' storage: [`DbSagaStore`], the application's
//! [`SagaStore`](pm_application::sagas::SagaStore) port.
//!
//! - **Runes** are events of the event store (aggregate types `session`, `agent`,
//!   `turn`, `plan`, `tool_call`), so they are on the global log with the facts.
//! - **Versions** (`saga_conversations`): each conversation's count of saga transactions,
//!   the compare-and-set that lets writers of different conversations commit in parallel.
//! - **Read rows** (`saga_sessions`, `saga_agents`, `saga_turns`, `saga_tool_calls`,
//!   `saga_anomalies`) and **deadlines** (`saga_deadlines`) are written in the transaction
//!   that appends the runes they derive from ([`commit`]); the views `sessions`, `agents`,
//!   `turns`, `tool_calls`, `anomalies` and `deadlines` are the analysts' SQL schema
//!   (docs/READ_MODEL.md).
//! - [`load`]: a conversation's snapshot and runes, actors' kinds, due deadlines, sessions
//!   to recover; the snapshots' writes (`saga_snapshots`).
//! - [`query`]: the API's reads of the saga rows.
//! - [`leases`]: workers' leases (claimable turns, heartbeats, the leases a write holds).
//! - [`tables`]: each saga table's one definition ([`table`]): the row it stores, its
//!   columns and conflict rules, its encode and decode, which the statements are built
//!   from.

pub mod commit;
pub mod leases;
pub mod load;
pub mod query;
pub mod table;
pub mod tables;

use chrono::{DateTime, Utc};
use pm_application::log::{LogPosition, LoggedEvent};
use pm_application::sagas::{
    ClaimFilter, ClaimableTurn, CommitError, Committed, SagaStore, SagaWrite, StoredConversation,
    StoredSnapshot, SAGAS,
};
use pm_application::AppError;
use pm_domain::saga::Deadline;
use pm_domain::types::ActorKind;
use uuid::Uuid;

use crate::append::Appender;
use crate::processor::cursor;
use crate::processor::store::store_error;
use crate::Database;

pub use query::SagaReads;

/// The saga tables and runes in a [`Database`].
#[derive(Clone)]
pub struct DbSagaStore {
    db: Database,
    appender: Appender,
}

impl DbSagaStore {
    /// The store over `db`, appending runes through `appender`.
    pub fn new(db: Database, appender: Appender) -> Self {
        Self { db, appender }
    }
}

impl SagaStore for DbSagaStore {
    async fn load(
        &self,
        conversation_id: Uuid,
        snapshot: Option<i32>,
    ) -> Result<StoredConversation, AppError> {
        load::conversation(&self.db, self.appender.keys(), conversation_id, snapshot).await
    }

    fn save_snapshot(
        &self,
        conversation_id: Uuid,
        snapshot: StoredSnapshot,
    ) -> impl std::future::Future<Output = Result<(), AppError>> + Send + 'static {
        let db = self.db.clone();
        async move { load::save_snapshot(&db, conversation_id, snapshot, Utc::now()).await }
    }

    async fn actor_kind(&self, actor_id: Uuid) -> Result<Option<ActorKind>, AppError> {
        load::actor_kind(&self.db, actor_id).await
    }

    async fn agent_conversation(&self, agent_id: Uuid) -> Result<Option<Uuid>, AppError> {
        load::agent_conversation(&self.db, agent_id).await
    }

    async fn turn_conversation(&self, turn_id: Uuid) -> Result<Option<Uuid>, AppError> {
        leases::turn_conversation(&self.db, turn_id).await
    }

    async fn conversation_version(&self, conversation_id: Uuid) -> Result<i64, AppError> {
        load::version(&self.db, conversation_id).await
    }

    async fn turn_logged_through(&self, turn_id: Uuid) -> Result<Option<LogPosition>, AppError> {
        leases::turn_logged_through(&self.db, turn_id).await
    }

    async fn claimable(
        &self,
        filter: &ClaimFilter,
        limit: u32,
    ) -> Result<Vec<ClaimableTurn>, AppError> {
        leases::claimable(&self.db, filter, limit).await
    }

    async fn renew_lease(
        &self,
        turn_id: Uuid,
        turn_epoch: i64,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, AppError> {
        leases::renew(&self.db, turn_id, turn_epoch, until, now).await
    }

    async fn commit(
        &self,
        write: SagaWrite,
        batch: Option<(LogPosition, LogPosition)>,
    ) -> Result<Committed, CommitError> {
        commit::commit(&self.db, &self.appender, &write, batch).await
    }

    async fn park(
        &self,
        from: LogPosition,
        event: &LoggedEvent,
        reason: &str,
    ) -> Result<LogPosition, CommitError> {
        cursor::park_and_advance(&self.db, SAGAS, from, event, reason)
            .await
            .map_err(|e| match e {
                cursor::CursorError::Moved => CommitError::CursorMoved,
                cursor::CursorError::Sql(e) => CommitError::Store(store_error(e)),
            })
    }

    async fn due(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<(Uuid, Deadline)>, AppError> {
        load::due(&self.db, now, limit).await
    }

    async fn recovering(&self, now: DateTime<Utc>) -> Result<Vec<(Uuid, Vec<Deadline>)>, AppError> {
        load::recovering(&self.db, now).await
    }
}
