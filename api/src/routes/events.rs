//! `GET /v1/events`: the global log as JSON pages or Server-Sent Events, each event a
//! CloudEvents 1.0 JSON object. Resumable with `cursor` or `Last-Event-ID`; filterable
//! by `types` (exact names and `prefix.*`), `conversation_id` and `principal`.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::{Stream, StreamExt as _};
use pm_application::log::tail::{render, Fit};
use pm_application::log::{EventFilter, LogPosition, LogReader, LoggedEvent};
use pm_application::processor::ProcessorStore;
use pm_application::queries::{check_in_log, AgentFilter, SagaReadStore, TurnFilter};
use pm_application::sagas::SAGAS;
use pm_application::scope::{OwnerStore, Scope, Target, Visibility};
use pm_application::views::{CloudEvent, List, Page, PageCursor, PageRequest, SessionSnapshot};
use pm_application::AppError;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::{invalid_position, ApiError};
use crate::extract::ApiQuery;
use crate::state::AppState;

/// Query parameters of `GET /v1/events`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Start after this position (`0` or none: from the start).
    #[param(pattern = "^[0-9]+([.][0-9]+)?$")]
    pub cursor: Option<String>,
    /// Comma-separated exact types or `prefix.*` patterns (at most 64).
    pub types: Option<String>,
    /// Only events belonging to this conversation.
    #[param(value_type = Option<uuid::Uuid>)]
    pub conversation_id: Option<String>,
    /// Only events caused by this principal (its name; `system` for the service's own).
    #[param(max_length = 100)]
    pub principal: Option<String>,
    /// Page size for JSON (default 50, max 500).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// A JSON page of the log.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPage {
    /// CloudEvents, in log order.
    pub items: Vec<CloudEvent>,
    /// Pass back as `cursor` to continue (the last item's position, or the given cursor).
    pub next_cursor: String,
}

/// The most type names and prefixes one `types` filter may hold (as a webhook's).
const MAX_TYPES: usize = 64;

fn parse_query(
    q: &EventsQuery,
    headers: &HeaderMap,
) -> Result<(LogPosition, EventFilter), ApiError> {
    let last_event_id = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let (name, raw) = match (q.cursor.as_deref(), last_event_id) {
        (Some(raw), _) => ("cursor", Some(raw)),
        (None, Some(raw)) => ("Last-Event-ID", Some(raw)),
        (None, None) => ("cursor", None),
    };
    let cursor = match raw {
        None | Some("") => LogPosition::START,
        Some(raw) => raw.parse().map_err(|e| invalid_position(name, e))?,
    };
    let mut filter = EventFilter::default().with_types(q.types.as_deref().unwrap_or(""));
    // Each pattern is a term of the log's query and a test per event on a stream.
    if filter.types.len() + filter.type_prefixes.len() > MAX_TYPES {
        return Err(ApiError::parameter(
            "types",
            format!("at most {MAX_TYPES} names or prefixes"),
        ));
    }
    if let Some(raw) = &q.conversation_id {
        let id: Uuid = raw
            .parse()
            .map_err(|_| ApiError::parameter("conversation_id", "must be a UUID"))?;
        filter.conversation_id = Some(id);
    }
    if let Some(name) = &q.principal {
        let max = crate::auth::principal::MAX_NAME;
        if name.chars().count() > max {
            return Err(ApiError::parameter(
                "principal",
                format!("a principal's name is at most {max} characters"),
            ));
        }
        filter.principal = Some(name.clone());
    }
    Ok((cursor, filter))
}

/// `GET /v1/events`.
#[utoipa::path(get, path = "/v1/events", tag = "events",
    params(EventsQuery,
        ("Last-Event-ID" = Option<String>, Header, pattern = "^[0-9]+([.][0-9]+)?$",
         description = "Resume after this position (the last SSE `id` received); `cursor` wins when both are given")),
    responses((status = 200, description = "With `Accept: text/event-stream`, Server-Sent Events: each `id: <position>`, \
        `event: <type>`, `data: <CloudEvent JSON>` (with `conversation_id`, first an `event: snapshot` without `id` \
        whose data is a `SessionSnapshot`), and a `: keep-alive` comment every 15 s. Otherwise a JSON page.",
        content((EventPage = "application/json"),
                (String = "text/event-stream", example = "id: 1\nevent: project_manager.actor.registered\ndata: {\"specversion\":\"1.0\"}\n\n")))))]
pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (cursor, mut filter) = parse_query(&q, &headers)?;
    filter.scope = caller.scope().clone();
    if cursor != LogPosition::START {
        check_in_log(&state.log, cursor).await?;
    }
    let wants_sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if wants_sse {
        // Held as long as the stream: dropped when it ends or its client goes away.
        let slot = state.streams.take(caller.principal().name())?;
        let stream = stream(state, cursor, filter).map(move |event| {
            let _held = &slot;
            event
        });
        return Ok(Sse::new(stream)
            .keep_alive(
                KeepAlive::new()
                    .interval(Duration::from_secs(15))
                    .text("keep-alive"),
            )
            .into_response());
    }
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::parameter("limit", "must be between 1 and 500"));
    }
    let events = state.log.read_after(cursor, &filter, limit).await?;
    let next_cursor = events.last().map_or(cursor, |e| e.position).to_string();
    Ok(Json(EventPage {
        items: events.iter().map(CloudEvent::from).collect(),
        next_cursor,
    })
    .into_response())
}

fn sse_event(e: &LoggedEvent) -> Event {
    Event::default()
        .id(e.position.to_string())
        .event(e.event_type.as_str())
        .data(&*render(e))
}

/// The next page's request after `page`, while fewer than [`SNAPSHOT_ROWS`] were read.
fn next_page<T>(page: &Page<T>, read: usize, list: List) -> Option<PageRequest> {
    let cursor = PageCursor::decode_for(page.next_cursor.as_deref()?, list)?;
    (read < SNAPSHOT_ROWS).then_some(PageRequest {
        limit: 500,
        cursor: Some(cursor),
    })
}

/// Rows of each kind a snapshot holds at most.
const SNAPSHOT_ROWS: usize = 10_000;

/// The session of `conversation_id` with its agents and turns, as the saga processor has
/// them now.
async fn snapshot(
    state: &AppState,
    conversation_id: Uuid,
    cursor: LogPosition,
    scope: &Scope,
) -> Result<SessionSnapshot, AppError> {
    // The position first: the rows read after it reflect at least that much of the log.
    let position = state.processors.cursor(SAGAS).await?;
    let reads = state.queries.sagas_unchecked();
    // Outside the caller's organizations: the snapshot of a conversation that does not
    // exist (the lists below are scoped too).
    let hidden = state
        .owners
        .visibility(scope, Target::Conversation, conversation_id)
        .await?
        == Visibility::Hidden;
    let session = if hidden {
        None
    } else {
        reads.session(conversation_id).await?
    };
    let first = PageRequest {
        limit: 500,
        cursor: None,
    };
    let agent_filter = AgentFilter {
        conversation_id: Some(conversation_id),
        ..AgentFilter::default()
    };
    let mut agents = Vec::new();
    let mut request = Some(first.clone());
    while let Some(r) = request {
        let page = reads.agents(scope, &agent_filter, &r).await?;
        request = next_page(&page, agents.len() + page.items.len(), List::Agents);
        agents.extend(page.items);
    }
    let turn_filter = TurnFilter {
        conversation_id: Some(conversation_id),
        ..TurnFilter::default()
    };
    let mut turns = Vec::new();
    let mut request = Some(first);
    while let Some(r) = request {
        let page = reads.turns(scope, &turn_filter, &r).await?;
        request = next_page(&page, turns.len() + page.items.len(), List::Turns);
        turns.extend(page.items);
    }
    Ok(SessionSnapshot {
        conversation_id,
        cursor: cursor.to_string(),
        position: position.to_string(),
        session,
        agents,
        turns,
    })
}

/// Events a catching-up stream reads from the store at once.
const CATCH_UP_PAGE: u32 = 500;

/// The SSE stream: a snapshot first when filtered by conversation, then every event
/// after `cursor` — read from the store while the stream is behind the process's log
/// tail, then from the tail's broadcast (filtered in memory); ends at shutdown, or with
/// an `event: lagged` when the stream fell too far behind the tail (resume with
/// `Last-Event-ID`).
fn stream(
    state: AppState,
    mut cursor: LogPosition,
    filter: EventFilter,
) -> impl Stream<Item = Result<Event, Infallible>> {
    async_stream::stream! {
        // Subscribed before catching up, so that no batch falls between the two.
        let mut tail = state.tail.subscribe();
        if let Some(conversation_id) = filter.conversation_id {
            // FCMP: a conversation stream starts with the session's state.
            let snapshot = match snapshot(&state, conversation_id, cursor, &filter.scope).await {
                Ok(snapshot) => snapshot,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the session snapshot");
                    return;
                }
            };
            yield Ok(Event::default()
                .event("snapshot")
                .data(serde_json::to_string(&snapshot).unwrap_or_default()));
        }
        'catch_up: loop {
            // Behind the tail: read the store until a short page. Everything up to the
            // head read before the first page has then been seen, matching or not.
            let head = state.log.head().await;
            loop {
                match state.log.read_after(cursor, &filter, CATCH_UP_PAGE).await {
                    Ok(events) => {
                        metrics::counter!("pm_sse_catch_up_reads_total").increment(1);
                        for e in &events {
                            yield Ok(sse_event(e));
                        }
                        if let Some(last) = events.last() {
                            cursor = last.position;
                        }
                        if events.len() < CATCH_UP_PAGE as usize {
                            if let Ok(head) = &head {
                                cursor = cursor.max(*head);
                            }
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "event stream could not read the log; retrying");
                        tokio::select! {
                            _ = state.shutdown.cancelled() => break 'catch_up,
                            _ = tokio::time::sleep(state.log_poll) => {}
                        }
                    }
                }
            }
            // At the tail: take its batches.
            loop {
                let batch = tokio::select! {
                    _ = state.shutdown.cancelled() => break 'catch_up,
                    batch = tail.recv() => batch,
                };
                match batch {
                    Ok(batch) => match batch.fit(cursor) {
                        Fit::Seen => {}
                        Fit::Gap => continue 'catch_up,
                        Fit::Deliver(from) => {
                            for (i, e) in batch.events.iter().enumerate().skip(from) {
                                if !filter.matches(e) {
                                    continue;
                                }
                                if let Some(data) = batch.data(i) {
                                    yield Ok(Event::default()
                                        .id(e.position.to_string())
                                        .event(e.event_type.as_str())
                                        .data(&**data));
                                }
                            }
                            cursor = batch.last();
                        }
                    },
                    Err(RecvError::Lagged(_)) => {
                        metrics::counter!("pm_sse_streams_lagged_total").increment(1);
                        yield Ok(Event::default()
                            .event("lagged")
                            .id(cursor.to_string())
                            .data(serde_json::json!({
                                "reason": "the stream fell behind the log tail",
                                "resume_after": cursor.to_string(),
                            }).to_string()));
                        break 'catch_up;
                    }
                    Err(RecvError::Closed) => break 'catch_up,
                }
            }
        }
    }
}
