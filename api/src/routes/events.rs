//! `GET /v1/events`: the global log as JSON pages or Server-Sent Events, each event a
//! CloudEvents 1.0 JSON object. Resumable with `cursor` or `Last-Event-ID`; filterable
//! by `types` (exact names and `prefix.*`) and `conversation_id`.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::Stream;
use pm_application::log::{EventFilter, LogPosition, LogReader, LoggedEvent};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::state::AppState;

/// Query parameters of `GET /v1/events`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Start after this position (`0` or none: from the start).
    #[param(pattern = "^[0-9]+([.][0-9]+)?$")]
    pub cursor: Option<String>,
    /// Comma-separated exact types or `prefix.*` patterns.
    pub types: Option<String>,
    /// Only events belonging to this conversation.
    #[param(value_type = Option<uuid::Uuid>)]
    pub conversation_id: Option<String>,
    /// Page size for JSON (default 50, max 500).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// A JSON page of the log.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPage {
    /// CloudEvents, in log order.
    #[schema(value_type = Vec<crate::schemas::CloudEvent>)]
    pub items: Vec<Value>,
    /// Pass back as `cursor` to continue (the last item's position, or the given cursor).
    pub next_cursor: String,
}

/// Renders a logged event as a CloudEvents 1.0 JSON object.
pub fn cloud_event(e: &LoggedEvent) -> Value {
    let meta = |key: &str| e.metadata.get(key).and_then(Value::as_str);
    let mut ce = json!({
        "specversion": "1.0",
        "id": format!("{}:{}:{}", e.aggregate_type, e.aggregate_id, e.sequence),
        "source": format!("/project-manager/{}/{}", e.aggregate_type, e.aggregate_id),
        "type": e.event_type,
        "subject": e.aggregate_id,
        "time": meta("recorded_at"),
        "datacontenttype": "application/json",
        "data": e.payload,
        "position": e.position.to_string(),
        "sequence": e.sequence,
        "eventversion": e.event_version,
        "correlationid": meta("correlation_id"),
    });
    if let Some(obj) = ce.as_object_mut() {
        if let Some(causation) = meta("causation_id") {
            obj.insert("causationid".into(), causation.into());
        }
        if let Some(role) = meta("role") {
            obj.insert("role".into(), role.into());
        }
        if let Some(conversation) = e.conversation_id {
            obj.insert("conversationid".into(), conversation.to_string().into());
        }
    }
    ce
}

fn parse_query(
    q: &EventsQuery,
    headers: &HeaderMap,
) -> Result<(LogPosition, EventFilter), ApiError> {
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let cursor = match q.cursor.as_deref().or(last_event_id) {
        None | Some("") => LogPosition::START,
        Some(raw) => raw.parse().map_err(|e| ApiError::parameter("cursor", e))?,
    };
    let mut filter = EventFilter::default().with_types(q.types.as_deref().unwrap_or(""));
    if let Some(raw) = &q.conversation_id {
        let id: Uuid = raw
            .parse()
            .map_err(|_| ApiError::parameter("conversation_id", "must be a UUID"))?;
        filter.conversation_id = Some(id);
    }
    Ok((cursor, filter))
}

/// `GET /v1/events`.
#[utoipa::path(get, path = "/v1/events", tag = "events", params(EventsQuery),
    responses((status = 200, description = "A JSON page, or an SSE stream with Accept: text/event-stream", body = EventPage),
              (status = 400, body = crate::error::Problem)))]
pub async fn events(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (cursor, filter) = parse_query(&q, &headers)?;
    let wants_sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if wants_sse {
        return Ok(Sse::new(stream(state, cursor, filter))
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
        items: events.iter().map(cloud_event).collect(),
        next_cursor,
    })
    .into_response())
}

fn sse_event(e: &LoggedEvent) -> Event {
    Event::default()
        .id(e.position.to_string())
        .event(e.event_type.clone())
        .data(cloud_event(e).to_string())
}

/// The SSE stream: a snapshot first when filtered by conversation, then every event
/// after `cursor`, woken by the doorbell and polling; ends at shutdown.
fn stream(
    state: AppState,
    mut cursor: LogPosition,
    filter: EventFilter,
) -> impl Stream<Item = Result<Event, Infallible>> {
    async_stream::stream! {
        let mut doorbell = state.log.doorbell();
        if let Some(conversation_id) = filter.conversation_id {
            // FCMP: a conversation stream starts with the session's state. The session
            // saga is not built yet, so the snapshot says what the log knows.
            let snapshot = json!({
                "conversation_id": conversation_id,
                "cursor": cursor.to_string(),
                "session": null,
            });
            yield Ok(Event::default().event("snapshot").data(snapshot.to_string()));
        }
        loop {
            doorbell.borrow_and_update();
            match state.log.read_after(cursor, &filter, 500).await {
                Ok(events) if !events.is_empty() => {
                    for e in &events {
                        yield Ok(sse_event(e));
                    }
                    if let Some(last) = events.last() {
                        cursor = last.position;
                    }
                    continue;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "event stream could not read the log; retrying"),
            }
            tokio::select! {
                _ = state.shutdown.cancelled() => break,
                _ = doorbell.changed() => {}
                _ = tokio::time::sleep(state.log_poll) => {}
            }
        }
    }
}
