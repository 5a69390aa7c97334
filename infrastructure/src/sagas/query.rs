//! [`SagaReads`]: the application's [`SagaReadStore`] over the saga rows, with keyset
//! pagination by `(created_at, id)` like the read model's lists. A turn comes with its tool
//! calls in the order its worker reported them (`saga_tool_calls.ordinal`).

use std::collections::HashMap;

use pm_application::queries::{
    AgentFilter, AnomalyFilter, SagaReadStore, SessionFilter, ToolCallFilter, TurnFilter,
};
use pm_application::scope::Scope;
use pm_application::views::{
    AgentView, AnomalyInstance, AnomalyView, LeaseView, List, Page, PageCursor, PageRequest,
    SessionView, ToolCallView, ToolResultView, TurnView,
};
use pm_application::AppError;
use pm_domain::saga::{
    AgentRole, AgentState, ConversationState, HeadStatus, SessionState, ToolCallState, TurnKind,
    TurnState,
};
use pm_domain::time;
use uuid::Uuid;

use crate::db::{Arg, Args, DbRow, ROWS_PER_STATEMENT};
use crate::owners::scope_clause;
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
        sql.push_str(&scope_clause(&mut args, "conversation_id", query.scope));
        if let Some(c) = &page.cursor {
            let key = args.push(Arg::Text(Some(c.k.clone())));
            let id = args.push(Arg::Text(Some(c.id.clone())));
            sql.push_str(&format!(
                " AND (created_at, {}) > ({key}::timestamptz, {id}::uuid)",
                query.key
            ));
        }
        let limit = args.push(Arg::Int(Some(i64::from(page.limit) + 1)));
        sql.push_str(&format!(
            " ORDER BY created_at, {} LIMIT {limit}",
            query.key
        ));
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

    /// Fills the `tool_calls` of `turns` with one query per [`ROWS_PER_STATEMENT`] turns
    /// (a page is one), each turn's calls in report order: by `ordinal`, then — should two
    /// share a place — by `(created_at, id)`.
    async fn with_calls(&self, turns: &mut [TurnView]) -> Result<(), AppError> {
        let mut calls: HashMap<Uuid, Vec<ToolCallView>> = HashMap::new();
        for chunk in turns.chunks(ROWS_PER_STATEMENT) {
            let mut args = Args::with_capacity(chunk.len());
            let ids: Vec<String> = chunk
                .iter()
                .map(|t| format!("{}::uuid", args.push(Arg::Text(Some(t.id.to_string())))))
                .collect();
            let sql = format!(
                "SELECT {TOOL_CALL_COLUMNS} FROM saga_tool_calls WHERE turn_id IN ({}) \
                 ORDER BY turn_id, ordinal, created_at, id",
                ids.join(", ")
            );
            let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
            for row in &rows {
                let call = tool_call(row).map_err(store_error)?;
                calls.entry(call.turn_id).or_default().push(call);
            }
        }
        for turn in turns {
            turn.tool_calls = calls.remove(&turn.id).unwrap_or_default();
        }
        Ok(())
    }
}

/// One list: its table, columns, filters (column, value, cast) and cursor kind.
struct ListQuery<'a> {
    table: &'a str,
    /// The id column (the keyset's tie-breaker).
    key: &'a str,
    columns: &'a str,
    filters: Vec<(&'a str, Option<String>, &'a str)>,
    list: List,
    /// What the caller may see (every saga row has its `conversation_id`).
    scope: &'a Scope,
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

const TOOL_CALL_COLUMNS: &str = "id::text AS id, turn_id::text AS turn_id, \
     conversation_id::text AS conversation_id, call_id, ordinal, tool_name, arguments, state, \
     requires_approval, policy_reason, approver, timeout_ms, result, policy, reported_by, approvers, \
     on_behalf_of::text AS on_behalf_of, comment, created_at, updated_at";

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
        // Filled by `SagaReads::with_calls`.
        tool_calls: Vec::new(),
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

fn tool_call(row: &DbRow) -> Result<ToolCallView, sqlx::Error> {
    let result: Option<ToolResultView> = row
        .opt_string("result")?
        .map(|raw| serde_json::from_str(&raw).map_err(|e| decode_error("result", e)))
        .transpose()?;
    Ok(ToolCallView {
        call_id: row.string("call_id")?,
        turn_id: row.uuid("turn_id")?,
        conversation_id: row.uuid("conversation_id")?,
        tool_name: row.string("tool_name")?,
        arguments: row.parsed("arguments", |raw| serde_json::from_str(raw))?,
        state: parsed(row, "state", ToolCallState::parse)?,
        requires_approval: row.bool("requires_approval")?,
        policy_reason: row.opt_string("policy_reason")?,
        approver: row.opt_string("approver")?,
        timeout_ms: row
            .opt_int("timeout_ms")?
            .map(|ms| u64::try_from(ms).map_err(|e| decode_error("timeout_ms", e)))
            .transpose()?,
        result,
        policy: row.opt_string("policy")?,
        reported_by: row.opt_string("reported_by")?,
        approvers: row
            .opt_string("approvers")?
            .map(|raw| serde_json::from_str(&raw).map_err(|e| decode_error("approvers", e)))
            .transpose()?,
        on_behalf_of: row.opt_uuid("on_behalf_of")?,
        comment: row.opt_string("comment")?,
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

    async fn sessions(
        &self,
        scope: &Scope,
        filter: &SessionFilter,
        page: &PageRequest,
    ) -> Result<Page<SessionView>, AppError> {
        let query = ListQuery {
            table: "saga_sessions",
            key: "conversation_id",
            columns: SESSION_COLUMNS,
            filters: vec![
                ("state", filter.state.map(|s| s.as_str().into()), ""),
                (
                    "conversation_state",
                    filter.conversation_state.map(|s| s.as_str().into()),
                    "",
                ),
            ],
            list: List::Sessions,
            scope,
        };
        self.page(query, page, |r| {
            let s = session(r)?;
            let (id, at) = (s.conversation_id, s.created_at);
            Ok((s, id, at))
        })
        .await
    }

    async fn agents(
        &self,
        scope: &Scope,
        filter: &AgentFilter,
        page: &PageRequest,
    ) -> Result<Page<AgentView>, AppError> {
        let query = ListQuery {
            // The view: its `queued_turn_ids` is the agent's inbox rows.
            table: "agents",
            key: "id",
            columns: AGENT_COLUMNS,
            filters: vec![
                ("conversation_id", text(filter.conversation_id), "::uuid"),
                ("actor_id", text(filter.actor_id), "::uuid"),
                ("state", filter.state.map(|s| s.as_str().into()), ""),
            ],
            list: List::Agents,
            scope,
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
        scope: &Scope,
        filter: &TurnFilter,
        page: &PageRequest,
    ) -> Result<Page<TurnView>, AppError> {
        let query = ListQuery {
            table: "saga_turns",
            key: "id",
            columns: TURN_COLUMNS,
            filters: vec![
                ("conversation_id", text(filter.conversation_id), "::uuid"),
                ("agent_id", text(filter.agent_id), "::uuid"),
                ("task_id", text(filter.task_id), "::uuid"),
                ("state", filter.state.map(|s| s.as_str().into()), ""),
            ],
            list: List::Turns,
            scope,
        };
        let mut found = self
            .page(query, page, |r| {
                let t = turn(r)?;
                let (id, at) = (t.id, t.created_at);
                Ok((t, id, at))
            })
            .await?;
        self.with_calls(&mut found.items).await?;
        Ok(found)
    }

    async fn turn(&self, id: Uuid) -> Result<Option<TurnView>, AppError> {
        let sql = format!("SELECT {TURN_COLUMNS} FROM saga_turns WHERE id = $1::uuid");
        let Some(mut found) = self.one(&sql, id, turn).await? else {
            return Ok(None);
        };
        self.with_calls(std::slice::from_mut(&mut found)).await?;
        Ok(Some(found))
    }

    async fn tool_calls(
        &self,
        scope: &Scope,
        filter: &ToolCallFilter,
        page: &PageRequest,
    ) -> Result<Page<ToolCallView>, AppError> {
        let query = ListQuery {
            table: "saga_tool_calls",
            key: "id",
            columns: TOOL_CALL_COLUMNS,
            filters: vec![
                ("state", filter.state.map(|s| s.as_str().into()), ""),
                ("conversation_id", text(filter.conversation_id), "::uuid"),
                ("turn_id", text(filter.turn_id), "::uuid"),
            ],
            list: List::ToolCalls,
            scope,
        };
        self.page(query, page, |r| {
            let c = tool_call(r)?;
            let (id, at) = (r.uuid("id")?, c.created_at);
            Ok((c, id, at))
        })
        .await
    }

    async fn anomalies(
        &self,
        scope: &Scope,
        filter: &AnomalyFilter,
        page: &PageRequest,
    ) -> Result<Page<AnomalyView>, AppError> {
        let query = ListQuery {
            table: "saga_anomalies",
            key: "id",
            columns: ANOMALY_COLUMNS,
            filters: vec![("conversation_id", text(filter.conversation_id), "::uuid")],
            list: List::Anomalies,
            scope,
        };
        self.page(query, page, |r| {
            let a = anomaly(r)?;
            let (id, at) = (a.id, a.created_at);
            Ok((a, id, at))
        })
        .await
    }
}
