//! The turns' and tool calls' spans, derived from the log (issue 34): a processor that
//! exports the `invoke_agent` span of each turn at its terminal rune and the
//! `execute_tool` span of each call at its `tool.result`, then moves its cursor — only
//! once the collector took the batch. A collector away holds the cursor (the lag shows
//! in `GET /v1/admin/processors`) and nothing is lost; one replica exports at a time, so
//! a span is exported once (again only if a replica dies between the export and the
//! cursor's move).

use std::sync::Arc;

use pm_application::log::{LogPosition, LogReader, LoggedEvent};
use pm_application::processor::{BatchError, BatchHandler};
use pm_application::queries::SagaReadStore;
use pm_application::trace::genai::{execute_tool, invoke_agent, SpanRecord, ToolCallHistory};
use pm_domain::saga::rune::{TOOL_RESULT, TURN_COMPLETED, TURN_ERROR, TURN_INTERRUPTED};
use pm_domain::saga::{TOOL_CALL_TYPE, TURN_TYPE};
use uuid::Uuid;

use super::Otlp;
use crate::log::DbLogReader;
use crate::processor::cursor;
use crate::sagas::SagaReads;
use crate::Database;

/// The processor's name.
pub const AGENT_SPANS: &str = "otlp_agent_spans";

/// The processor.
pub struct AgentSpans {
    db: Database,
    log: DbLogReader,
    sagas: SagaReads,
    otlp: Arc<Otlp>,
}

impl AgentSpans {
    /// The processor over `db`'s log, exporting with `otlp`.
    pub fn new(db: Database, log: DbLogReader, otlp: Arc<Otlp>) -> Arc<Self> {
        Arc::new(Self {
            sagas: SagaReads::new(db.clone()),
            db,
            log,
            otlp,
        })
    }

    /// Puts the processor's cursor at the log's head when it has none yet: turned on over
    /// an existing log, the export starts with what ends from now on, not with every turn
    /// that ever ended (its spans would arrive all at once, long after their time).
    ///
    /// # Errors
    /// [`AppError`](pm_application::AppError) when the store cannot be read or written.
    pub async fn start_at_head(
        db: &Database,
        log: &DbLogReader,
    ) -> Result<(), pm_application::AppError> {
        let head = log.end().await?;
        db.execute(
            "INSERT INTO processors (name, cursor_seq) VALUES ($1, $2) \
             ON CONFLICT (name) DO NOTHING",
            crate::db::Args::new().text(AGENT_SPANS).int(head.value()),
        )
        .await
        .map_err(crate::processor::store::store_error)?;
        Ok(())
    }

    /// The span `event` ends, if it ends one and its turn recorded a trace.
    async fn span_of(&self, event: &LoggedEvent) -> Result<Option<SpanRecord>, BatchError> {
        let transient = |e: pm_application::AppError| BatchError::Transient(e.to_string());
        match event.event_type.as_str() {
            TURN_COMPLETED | TURN_ERROR | TURN_INTERRUPTED if event.aggregate_type == TURN_TYPE => {
                let Ok(id) = Uuid::parse_str(&event.aggregate_id) else {
                    return Ok(None);
                };
                let turn = async { self.sagas.turn(id).await.map_err(transient) };
                let (cause, turn) = tokio::try_join!(self.cause(id), turn)?;
                Ok(match (cause, turn, event.recorded_at()) {
                    (Some(cause), Some(turn), Some(ended)) => {
                        Some(invoke_agent(&turn, &cause, ended))
                    }
                    _ => None,
                })
            }
            TOOL_RESULT if event.aggregate_type == TOOL_CALL_TYPE => {
                // Through this result: what the stream holds later is not this span's.
                let runes = self
                    .log
                    .stream(
                        TOOL_CALL_TYPE,
                        &event.aggregate_id,
                        ToolCallHistory::RUNES,
                        event.sequence,
                    )
                    .await
                    .map_err(transient)?;
                let Some(call) = ToolCallHistory::of(&runes) else {
                    return Ok(None);
                };
                let Some(cause) = self.cause(call.turn_id).await? else {
                    return Ok(None);
                };
                Ok(execute_tool(&call, &cause))
            }
            _ => Ok(None),
        }
    }

    /// The trace of what caused turn `id` (its first rune's).
    async fn cause(
        &self,
        id: Uuid,
    ) -> Result<Option<pm_application::trace::TraceContext>, BatchError> {
        self.log
            .opening_trace(TURN_TYPE, &id.to_string())
            .await
            .map_err(|e| BatchError::Transient(e.to_string()))
    }
}

impl BatchHandler for AgentSpans {
    fn name(&self) -> &str {
        AGENT_SPANS
    }

    async fn apply(
        &self,
        from: LogPosition,
        events: &[LoggedEvent],
    ) -> Result<LogPosition, BatchError> {
        let Some(last) = events.last() else {
            return Ok(from);
        };
        let mut spans = Vec::new();
        for event in events {
            if let Some(span) = self.span_of(event).await? {
                spans.push(span);
            }
        }
        self.otlp
            .export(spans)
            .await
            .map_err(|e| BatchError::Transient(format!("OTLP export: {e}")))?;
        cursor::compare_and_set(&self.db, AGENT_SPANS, from, last.position).await?;
        Ok(last.position)
    }

    async fn park(
        &self,
        from: LogPosition,
        event: &LoggedEvent,
        reason: &str,
    ) -> Result<LogPosition, BatchError> {
        Ok(cursor::park_and_advance(&self.db, AGENT_SPANS, from, event, reason).await?)
    }
}
