//! [`SagaReads`]: the application's [`SagaReadStore`] over the saga rows, with keyset
//! pagination by `(created_at, id)` like the read model's lists.

use pm_application::queries::{AgentFilter, AnomalyFilter, SagaReadStore, TurnFilter};
use pm_application::views::{
    AgentView, AnomalyInstance, AnomalyView, LeaseView, List, Page, PageCursor, PageRequest,
    SessionView, TurnView,
};
use pm_application::AppError;
use pm_domain::saga::{
    AgentRole, AgentState, ConversationState, HeadStatus, SessionState, TurnKind, TurnState,
};
use pm_domain::time;
use uuid::Uuid;

use crate::db::{Arg, Args, DbRow};
use crate::processor::store::store_error;
use crate::Database;

/// Reads of the saga rows.
#[derive(Debug, Clone)]
pub struct SagaReads {
    db: Database,
}

impl SagaReads {
    /// Reads of `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    async fn one<T>(
        &self,
        sql: &str,
        id: Uuid,
        decode: impl Fn(&DbRow) -> Result<T, sqlx::Error>,
    ) -> Result<Option<T>, AppError> {
        let row = self
            .db
            .fetch_optional(sql, Args::new().uuid(id))
            .await
            .map_err(store_error)?;
        row.as_ref().map(decode).transpose().map_err(store_error)
    }

    /// A page of `table` rows matching the `filters` (column, value), oldest first.
    async fn page<T>(
        &self,
        query: ListQuery<'_>,
        page: &PageRequest,
        decode: impl Fn(&DbRow) -> Result<(T, Uuid, chrono::DateTime<chrono::Utc>), sqlx::Error>,
    ) -> Result<Page<T>, AppError> {
        let mut sql = format!("SELECT {} FROM {} WHERE 1 = 1", query.columns, query.table);
        let mut args = Args::new();
        for (column, value, cast) in query.filters {
            if let Some(value) = value {
                let p = args.push(Arg::Text(Some(value)));
                sql.push_str(&format!(" AND {column} = {p}{cast}"));
            }
        }
        if let Some(c) = &page.cursor {
            let key = args.push(Arg::Text(Some(c.k.clone())));
            let id = args.push(Arg::Text(Some(c.id.clone())));
            sql.push_str(&format!(
                " AND (created_at, id) > ({key}::timestamptz, {id}::uuid)"
            ));
        }
        let limit = args.push(Arg::Int(Some(i64::from(page.limit) + 1)));
        sql.push_str(&format!(" ORDER BY created_at, id LIMIT {limit}"));
        let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
        let items = rows
            .iter()
            .map(|r| {
                let (item, id, created_at) = decode(r)?;
                let cursor = PageCursor {
                    l: query.list,
                    k: time::format(&created_at),
                    id: id.to_string(),
                };
                Ok((item, cursor))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(store_error)?;
        Ok(Page::from_fetched(items, page.limit))
    }
}

/// One list: its table, columns, filters (column, value, cast) and cursor kind.
struct ListQuery<'a> {
    table: &'a str,
    columns: &'a str,
    filters: Vec<(&'a str, Option<String>, &'a str)>,
    list: List,
}

const SESSION_COLUMNS: &str = "conversation_id::text AS conversation_id, state, conversation_state, \
     root_agent_id::text AS root_agent_id, agent_ids, waiting_checkpoint_id::text AS waiting_checkpoint_id, \
     waiting_since, consecutive_errors::bigint AS consecutive_errors, tokens_used, token_budget, \
     created_at, updated_at";

const AGENT_COLUMNS: &str = "id::text AS id, conversation_id::text AS conversation_id, \
     actor_id::text AS actor_id, role, state, turn_epoch, active_turn_id::text AS active_turn_id, \
     queued_turn_ids, head_status, tokens_used, created_at, updated_at";

const TURN_COLUMNS: &str = "id::text AS id, agent_id::text AS agent_id, \
     conversation_id::text AS conversation_id, kind, task_id::text AS task_id, input, state, turn_epoch, \
     terminal_rune, deliverable::text AS deliverable, deliverable_reason, lease_worker, lease_epoch, \
     lease_expires_at, claims::bigint AS claims, input_tokens, output_tokens, created_at, updated_at";

const ANOMALY_COLUMNS: &str = "id::text AS id, conversation_id::text AS conversation_id, \
     aggregate_type, aggregate_id::text AS aggregate_id, sequence, state, fact, reason, \
     causation_id, created_at";

fn decode_error(col: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: col.to_string(),
        source: e.to_string().into(),
    }
}

fn parsed<T>(row: &DbRow, col: &str, parse: fn(&str) -> Option<T>) -> Result<T, sqlx::Error> {
    let raw = row.string(col)?;
    parse(&raw).ok_or_else(|| decode_error(col, format!("unknown value {raw}")))
}

fn ids(row: &DbRow, col: &str) -> Result<Vec<Uuid>, sqlx::Error> {
    serde_json::from_str(&row.string(col)?).map_err(|e| decode_error(col, e))
}

fn session(row: &DbRow) -> Result<SessionView, sqlx::Error> {
    let conversation_state = row
        .opt_string("conversation_state")?
        .map(|raw| {
            ConversationState::parse(&raw)
                .ok_or_else(|| decode_error("conversation_state", format!("unknown value {raw}")))
        })
        .transpose()?;
    Ok(SessionView {
        conversation_id: row.uuid("conversation_id")?,
        state: parsed(row, "state", SessionState::parse)?,
        conversation_state,
        root_agent_id: row.opt_uuid("root_agent_id")?,
        agent_ids: ids(row, "agent_ids")?,
        waiting_checkpoint_id: row.opt_uuid("waiting_checkpoint_id")?,
        waiting_since: row.opt_time("waiting_since")?,
        consecutive_errors: u32::try_from(row.int("consecutive_errors")?)
            .map_err(|e| decode_error("consecutive_errors", e))?,
        tokens_used: count(row, "tokens_used")?,
        token_budget: row
            .opt_int("token_budget")?
            .map(|b| u64::try_from(b).map_err(|e| decode_error("token_budget", e)))
            .transpose()?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

fn agent(row: &DbRow) -> Result<AgentView, sqlx::Error> {
    Ok(AgentView {
        id: row.uuid("id")?,
        conversation_id: row.uuid("conversation_id")?,
        actor_id: row.opt_uuid("actor_id")?,
        role: parsed(row, "role", AgentRole::parse)?,
        state: parsed(row, "state", AgentState::parse)?,
        turn_epoch: row.int("turn_epoch")?,
        active_turn_id: row.opt_uuid("active_turn_id")?,
        head_status: parsed(row, "head_status", HeadStatus::parse)?,
        queued_turn_ids: ids(row, "queued_turn_ids")?,
        tokens_used: count(row, "tokens_used")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

fn turn(row: &DbRow) -> Result<TurnView, sqlx::Error> {
    Ok(TurnView {
        id: row.uuid("id")?,
        agent_id: row.uuid("agent_id")?,
        conversation_id: row.uuid("conversation_id")?,
        kind: parsed(row, "kind", TurnKind::parse)?,
        task_id: row.opt_uuid("task_id")?,
        input: serde_json::from_str(&row.string("input")?).map_err(|e| decode_error("input", e))?,
        state: parsed(row, "state", TurnState::parse)?,
        turn_epoch: row.opt_int("turn_epoch")?,
        terminal_rune: row.opt_string("terminal_rune")?,
        deliverable: row.opt_uuid("deliverable")?,
        deliverable_reason: row.opt_string("deliverable_reason")?,
        lease: match (
            row.opt_string("lease_worker")?,
            row.opt_int("lease_epoch")?,
            row.opt_time("lease_expires_at")?,
        ) {
            (Some(worker), Some(turn_epoch), Some(lease_expires_at)) => Some(LeaseView {
                worker,
                turn_epoch,
                lease_expires_at,
            }),
            _ => None,
        },
        claims: count(row, "claims")?,
        input_tokens: count(row, "input_tokens")?,
        output_tokens: count(row, "output_tokens")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

/// A non-negative count column.
fn count<T: TryFrom<i64>>(row: &DbRow, col: &str) -> Result<T, sqlx::Error>
where
    T::Error: std::fmt::Display,
{
    T::try_from(row.int(col)?).map_err(|e| decode_error(col, e))
}

fn anomaly(row: &DbRow) -> Result<AnomalyView, sqlx::Error> {
    Ok(AnomalyView {
        id: row.uuid("id")?,
        conversation_id: row.uuid("conversation_id")?,
        instance: AnomalyInstance {
            aggregate_type: row.string("aggregate_type")?,
            id: row.uuid("aggregate_id")?,
        },
        sequence: row.int("sequence")?,
        state: row.string("state")?,
        fact: row.string("fact")?,
        reason: row.string("reason")?,
        causation_id: row.opt_string("causation_id")?,
        created_at: row.time("created_at")?,
    })
}

fn text(id: Option<Uuid>) -> Option<String> {
    id.map(|id| id.to_string())
}

impl SagaReadStore for SagaReads {
    async fn session(&self, conversation_id: Uuid) -> Result<Option<SessionView>, AppError> {
        let sql =
            format!("SELECT {SESSION_COLUMNS} FROM saga_sessions WHERE conversation_id = $1::uuid");
        self.one(&sql, conversation_id, session).await
    }

    async fn agents(
        &self,
        filter: &AgentFilter,
        page: &PageRequest,
    ) -> Result<Page<AgentView>, AppError> {
        let query = ListQuery {
            // The view: its `queued_turn_ids` is the agent's inbox rows.
            table: "agents",
            columns: AGENT_COLUMNS,
            filters: vec![
                ("conversation_id", text(filter.conversation_id), "::uuid"),
                ("actor_id", text(filter.actor_id), "::uuid"),
                ("state", filter.state.map(|s| s.as_str().into()), ""),
            ],
            list: List::Agents,
        };
        self.page(query, page, |r| {
            let a = agent(r)?;
            let (id, at) = (a.id, a.created_at);
            Ok((a, id, at))
        })
        .await
    }

    async fn agent(&self, id: Uuid) -> Result<Option<AgentView>, AppError> {
        let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1::uuid");
        self.one(&sql, id, agent).await
    }

    async fn turns(
        &self,
        filter: &TurnFilter,
        page: &PageRequest,
    ) -> Result<Page<TurnView>, AppError> {
        let query = ListQuery {
            table: "saga_turns",
            columns: TURN_COLUMNS,
            filters: vec![
                ("conversation_id", text(filter.conversation_id), "::uuid"),
                ("agent_id", text(filter.agent_id), "::uuid"),
                ("task_id", text(filter.task_id), "::uuid"),
                ("state", filter.state.map(|s| s.as_str().into()), ""),
            ],
            list: List::Turns,
        };
        self.page(query, page, |r| {
            let t = turn(r)?;
            let (id, at) = (t.id, t.created_at);
            Ok((t, id, at))
        })
        .await
    }

    async fn turn(&self, id: Uuid) -> Result<Option<TurnView>, AppError> {
        let sql = format!("SELECT {TURN_COLUMNS} FROM saga_turns WHERE id = $1::uuid");
        self.one(&sql, id, turn).await
    }

    async fn anomalies(
        &self,
        filter: &AnomalyFilter,
        page: &PageRequest,
    ) -> Result<Page<AnomalyView>, AppError> {
        let query = ListQuery {
            table: "saga_anomalies",
            columns: ANOMALY_COLUMNS,
            filters: vec![("conversation_id", text(filter.conversation_id), "::uuid")],
            list: List::Anomalies,
        };
        self.page(query, page, |r| {
            let a = anomaly(r)?;
            let (id, at) = (a.id, a.created_at);
            Ok((a, id, at))
        })
        .await
    }
}
