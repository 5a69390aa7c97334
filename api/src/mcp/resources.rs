//! MCP resources: a conversation, a task and a turn as JSON (`pm://conversations/{id}`,
//! `pm://tasks/{id}`, `pm://turns/{id}`: the same views as their `GET` endpoints), and
//! subscriptions to them. A subscriber is told (`notifications/resources/updated`) when an
//! event of the log's tail touches the resource: any event of the conversation; a task's
//! own events; a turn's runes and its tool calls' (a tool call's runes name their turn
//! only in `tool.call`, so a turn subscriber hears every tool rune of its conversation).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use axum::http::HeaderMap;
use axum::Router;
use cqrs_es::Aggregate as _;
use pm_application::log::tail::LogTail;
use pm_domain::saga::{TOOL_CALL_TYPE, TURN_TYPE};
use rmcp::model::{ReadResourceResult, ResourceContents, ResourceTemplate};
use rmcp::service::Peer;
use rmcp::{ErrorData, RoleServer};
use uuid::Uuid;

/// The kinds of resource, by URI prefix: (prefix, the `GET` path prefix, name, what).
const KINDS: [(&str, &str, &str, &str); 3] = [
    (
        "pm://conversations/",
        "/v1/conversations/",
        "conversation",
        "A conversation with its latest checkpoint, counts and task counts (GET /v1/conversations/{id}).",
    ),
    (
        "pm://tasks/",
        "/v1/tasks/",
        "task",
        "A task with its status and checkpoint history (GET /v1/tasks/{id}).",
    ),
    (
        "pm://turns/",
        "/v1/turns/",
        "turn",
        "A turn with its state, lease and tool calls (GET /v1/turns/{id}).",
    ),
];

/// The resource templates `resources/templates/list` shows.
pub fn templates() -> Vec<ResourceTemplate> {
    KINDS
        .iter()
        .map(|(prefix, _, name, what)| {
            ResourceTemplate::new(format!("{prefix}{{id}}"), *name)
                .with_description(*what)
                .with_mime_type("application/json")
        })
        .collect()
}

/// A resource URI: its kind's index in [`KINDS`] and its id.
fn parse(uri: &str) -> Result<(usize, Uuid), ErrorData> {
    KINDS
        .iter()
        .enumerate()
        .find_map(|(i, (prefix, ..))| {
            let id = uri.strip_prefix(prefix)?;
            Uuid::parse_str(id).ok().map(|id| (i, id))
        })
        .ok_or_else(|| {
            ErrorData::resource_not_found(
                format!("{uri} is not pm://conversations/{{id}}, pm://tasks/{{id}} or pm://turns/{{id}}"),
                None,
            )
        })
}

/// The view `uri` names, as the caller would `GET` it.
async fn read_value(
    router: &Router,
    headers: &HeaderMap,
    kind: usize,
    id: Uuid,
) -> Result<serde_json::Value, ErrorData> {
    let (ok, body) = super::tools::get(router, headers, &format!("{}{id}", KINDS[kind].1)).await;
    if !ok {
        let detail = body["detail"]
            .as_str()
            .unwrap_or("not readable")
            .to_string();
        return Err(ErrorData::resource_not_found(detail, Some(body)));
    }
    Ok(body)
}

/// Reads `uri` as the caller would `GET` it.
pub async fn read(
    router: &Router,
    headers: &HeaderMap,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let (kind, id) = parse(uri)?;
    let body = read_value(router, headers, kind, id).await?;
    let text = ResourceContents::text(body.to_string(), uri).with_mime_type("application/json");
    Ok(ReadResourceResult::new(vec![text]))
}

/// Who is subscribed to what: per URI, per MCP session, the session's peer. For a turn,
/// its conversation too (to hear its tool calls' runes).
#[derive(Clone, Default)]
pub struct Subscriptions {
    inner: Arc<Mutex<HashMap<String, Watch>>>,
    watcher: Arc<OnceLock<()>>,
}

struct Watch {
    /// The resource's kind (index in [`KINDS`]) and id, parsed once.
    kind: usize,
    id: Uuid,
    /// `id` as the log's `aggregate_id` text, to compare without allocating.
    id_text: String,
    /// A turn's conversation.
    conversation: Option<Uuid>,
    peers: HashMap<String, Peer<RoleServer>>,
}

impl Watch {
    /// Whether `e` touches the watched resource.
    fn touched_by(&self, e: &pm_application::log::LoggedEvent) -> bool {
        match KINDS[self.kind].2 {
            "conversation" => e.conversation_id == Some(self.id),
            "task" => {
                e.aggregate_type == pm_domain::task::Task::TYPE && e.aggregate_id == self.id_text
            }
            _ => {
                (e.aggregate_type == TURN_TYPE && e.aggregate_id == self.id_text)
                    || (e.aggregate_type == TOOL_CALL_TYPE
                        && e.conversation_id.is_some()
                        && e.conversation_id == self.conversation)
            }
        }
    }
}

impl Subscriptions {
    /// Subscribes `session`'s `peer` to `uri` (checked readable first), starting the
    /// watcher of the log's tail on the first subscription.
    pub async fn subscribe(
        &self,
        router: &Router,
        headers: &HeaderMap,
        tail: &LogTail,
        uri: &str,
        session: String,
        peer: Peer<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (kind, id) = parse(uri)?;
        let body = read_value(router, headers, kind, id).await?;
        let conversation = if KINDS[kind].2 == "turn" {
            body["conversation_id"]
                .as_str()
                .and_then(|s| s.parse().ok())
        } else {
            None
        };
        if let Ok(mut map) = self.inner.lock() {
            let watch = map.entry(uri.to_string()).or_insert_with(|| Watch {
                kind,
                id,
                id_text: id.to_string(),
                conversation: None,
                peers: HashMap::new(),
            });
            watch.conversation = watch.conversation.or(conversation);
            watch.peers.insert(session, peer);
        }
        self.watcher.get_or_init(|| {
            tokio::spawn(self.clone().watch(tail.clone()));
        });
        Ok(())
    }

    /// Ends `session`'s subscription to `uri`.
    pub fn unsubscribe(&self, uri: &str, session: &str) {
        if let Ok(mut map) = self.inner.lock() {
            if let Some(watch) = map.get_mut(uri) {
                watch.peers.remove(session);
                if watch.peers.is_empty() {
                    map.remove(uri);
                }
            }
        }
    }

    /// Follows the log's tail, telling each subscriber of a touched resource.
    async fn watch(self, tail: LogTail) {
        use tokio::sync::broadcast::error::RecvError;
        let mut batches = tail.subscribe();
        loop {
            // Behind the tail: anything may have changed, so every subscriber is told (a
            // notification too many is allowed, one too few is not).
            let batch = match batches.recv().await {
                Ok(batch) => Some(batch),
                Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            };
            let mut touched: Vec<(String, Vec<Peer<RoleServer>>)> = Vec::new();
            if let Ok(mut map) = self.inner.lock() {
                // A session that ended without unsubscribing hears nothing more.
                for watch in map.values_mut() {
                    watch.peers.retain(|_, peer| !peer.is_transport_closed());
                }
                map.retain(|_, watch| !watch.peers.is_empty());
                for (uri, watch) in map.iter() {
                    let hit = batch
                        .as_ref()
                        .is_none_or(|b| b.events.iter().any(|e| watch.touched_by(e)));
                    if hit {
                        touched.push((uri.clone(), watch.peers.values().cloned().collect()));
                    }
                }
            }
            for (uri, peers) in touched {
                for peer in peers {
                    let updated = rmcp::model::ResourceUpdatedNotificationParam::new(uri.clone());
                    if peer.notify_resource_updated(updated).await.is_err() {
                        tracing::debug!(%uri, "a subscriber is gone");
                    }
                }
            }
        }
    }
}
