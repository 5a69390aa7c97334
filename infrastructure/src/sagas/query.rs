//! [`SagaReads`]: the application's [`SagaReadStore`] over the saga rows, with keyset
//! pagination by `(created_at, id)` like the read model's lists. A turn comes with its tool
//! calls in the order its worker reported them (`saga_tool_calls.ordinal`).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use pm_application::queries::{
    AgentFilter, AnomalyFilter, SagaReadStore, SessionFilter, ToolCallFilter, TurnFilter,
};
use pm_application::sagas::PlacedCall;
use pm_application::scope::Scope;
use pm_application::views::{
    AgentView, AnomalyView, List, Page, PageCursor, PageRequest, SessionView, ToolCallView,
    TurnView,
};
use pm_application::AppError;
use pm_domain::saga::ids;
use pm_domain::time;
use uuid::Uuid;

use super::table::{decode, Row, Table};
use super::tables::{AGENTS, ANOMALIES, SESSIONS, TOOL_CALLS, TURNS};
use crate::db::{params, Arg, Args, ROWS_PER_STATEMENT};
use crate::owners::scope_clause;
use crate::processor::store::store_error;
use crate::read_model::query::cursor_key;
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

    /// The row of `table` whose (first) key column is `id`.
    async fn one<T: Row>(&self, table: &'static Table, id: Uuid) -> Result<Option<T>, AppError> {
        let sql = format!(
            "SELECT {} FROM {} WHERE {} = $1",
            table.select_list(),
            table.read_from,
            table.key.first().copied().unwrap_or("id"),
        );
        let row = self
            .db
            .fetch_optional(&sql, Args::new().uuid(id))
            .await
            .map_err(store_error)?;
        row.as_ref().map(decode).transpose().map_err(store_error)
    }

    /// A page of a table's rows matching the `filters` (column, value), oldest first.
    async fn page<T: Row>(
        &self,
        query: ListQuery<'_>,
        page: &PageRequest,
        key: impl Fn(&T) -> (Uuid, DateTime<Utc>),
    ) -> Result<Page<T>, AppError> {
        let table = query.table;
        let mut sql = format!(
            "SELECT {} FROM {} WHERE 1 = 1",
            table.select_list(),
            table.read_from
        );
        let mut args = Args::new();
        for (column, value) in query.filters {
            if let Some(value) = value {
                let p = args.push(value);
                sql.push_str(&format!(" AND {column} = {p}"));
            }
        }
        sql.push_str(&scope_clause(&mut args, "conversation_id", query.scope));
        let id = table.key.first().copied().unwrap_or("id");
        if let Some(c) = &page.cursor {
            let (at, after) = cursor_key(c).map_err(store_error)?;
            let k = args.push(Arg::Time(Some(at)));
            let i = args.push(Arg::Uuid(Some(after)));
            sql.push_str(&format!(" AND (created_at, {id}) > ({k}, {i})"));
        }
        let limit = args.push(Arg::Int(Some(i64::from(page.limit) + 1)));
        sql.push_str(&format!(" ORDER BY created_at, {id} LIMIT {limit}"));
        let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
        let items = rows
            .iter()
            .map(|r| {
                let item: T = decode(r)?;
                let (id, created_at) = key(&item);
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
            let args = chunk
                .iter()
                .fold(Args::with_capacity(chunk.len()), |a, t| a.uuid(t.id));
            let sql = format!(
                "SELECT {} FROM {} WHERE turn_id IN ({}) \
                 ORDER BY turn_id, ordinal, created_at, id",
                TOOL_CALLS.select_list(),
                TOOL_CALLS.read_from,
                params(1, chunk.len())
            );
            let rows = self.db.fetch_all(&sql, args).await.map_err(store_error)?;
            for row in &rows {
                let placed: PlacedCall = decode(row).map_err(store_error)?;
                calls
                    .entry(placed.call.turn_id)
                    .or_default()
                    .push(placed.call);
            }
        }
        for turn in turns {
            turn.tool_calls = calls.remove(&turn.id).unwrap_or_default();
        }
        Ok(())
    }
}

/// One list: its table, filters (column, value) and cursor kind.
struct ListQuery<'a> {
    table: &'static Table,
    filters: Vec<(&'a str, Option<Arg>)>,
    list: List,
    /// What the caller may see (every saga row has its `conversation_id`).
    scope: &'a Scope,
}

fn id(id: Option<Uuid>) -> Option<Arg> {
    id.map(|id| Arg::Uuid(Some(id)))
}

fn text(value: Option<&str>) -> Option<Arg> {
    value.map(|v| Arg::Text(Some(v.into())))
}

impl SagaReadStore for SagaReads {
    async fn session(&self, conversation_id: Uuid) -> Result<Option<SessionView>, AppError> {
        self.one(&SESSIONS, conversation_id).await
    }

    async fn sessions(
        &self,
        scope: &Scope,
        filter: &SessionFilter,
        page: &PageRequest,
    ) -> Result<Page<SessionView>, AppError> {
        let query = ListQuery {
            table: &SESSIONS,
            filters: vec![
                ("state", text(filter.state.map(|s| s.as_str()))),
                (
                    "conversation_state",
                    text(filter.conversation_state.map(|s| s.as_str())),
                ),
            ],
            list: List::Sessions,
            scope,
        };
        self.page(query, page, |s: &SessionView| {
            (s.conversation_id, s.created_at)
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
            table: &AGENTS,
            filters: vec![
                ("conversation_id", id(filter.conversation_id)),
                ("actor_id", id(filter.actor_id)),
                ("state", text(filter.state.map(|s| s.as_str()))),
            ],
            list: List::Agents,
            scope,
        };
        self.page(query, page, |a: &AgentView| (a.id, a.created_at))
            .await
    }

    async fn agent(&self, id: Uuid) -> Result<Option<AgentView>, AppError> {
        self.one(&AGENTS, id).await
    }

    async fn turns(
        &self,
        scope: &Scope,
        filter: &TurnFilter,
        page: &PageRequest,
    ) -> Result<Page<TurnView>, AppError> {
        let query = ListQuery {
            table: &TURNS,
            filters: vec![
                ("conversation_id", id(filter.conversation_id)),
                ("agent_id", id(filter.agent_id)),
                ("task_id", id(filter.task_id)),
                ("state", text(filter.state.map(|s| s.as_str()))),
            ],
            list: List::Turns,
            scope,
        };
        let mut found = self
            .page(query, page, |t: &TurnView| (t.id, t.created_at))
            .await?;
        self.with_calls(&mut found.items).await?;
        Ok(found)
    }

    async fn turn(&self, id: Uuid) -> Result<Option<TurnView>, AppError> {
        let Some(mut found) = self.one::<TurnView>(&TURNS, id).await? else {
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
            table: &TOOL_CALLS,
            filters: vec![
                ("state", text(filter.state.map(|s| s.as_str()))),
                ("conversation_id", id(filter.conversation_id)),
                ("turn_id", id(filter.turn_id)),
            ],
            list: List::ToolCalls,
            scope,
        };
        let found = self
            .page(query, page, |c: &PlacedCall| {
                let call = &c.call;
                (
                    ids::tool_call_id(call.turn_id, &call.call_id),
                    call.created_at,
                )
            })
            .await?;
        Ok(found.map(|c| c.call))
    }

    async fn anomalies(
        &self,
        scope: &Scope,
        filter: &AnomalyFilter,
        page: &PageRequest,
    ) -> Result<Page<AnomalyView>, AppError> {
        let query = ListQuery {
            table: &ANOMALIES,
            filters: vec![("conversation_id", id(filter.conversation_id))],
            list: List::Anomalies,
            scope,
        };
        self.page(query, page, |a: &AnomalyView| (a.id, a.created_at))
            .await
    }
}
