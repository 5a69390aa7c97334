//! L0's wakeup doorbells (`003_…`: "NATS is used only for wakeup"; DELIVERY.md): when a
//! turn becomes claimable, a core NATS message on `cmd.agent.<agent_id>.wakeup` with the
//! headers `PM-Turn-Id` and `PM-Turn-Epoch` and a small JSON body. A doorbell is a hint,
//! never the authority: the claim is. Workers that sleep on their agent's subject claim
//! when it rings instead of long-polling; a missed ring (NATS away, a subscriber late)
//! costs them only their own poll interval.
//!
//! The rings follow the log's tail, on the domain's runes after which a turn may have
//! become claimable ([`CLAIMABLE_AFTER`]): `agent.turn_dispatched` names the agent; a turn
//! made claimable again (`turn.released`, `turn.lease_expired`, `turn.tools_finished`) is
//! looked up for its agent; a session resumed or unsuspended rings for each of its
//! claimable turns. Publishing never blocks the service: the client buffers while NATS
//! reconnects.

use pm_application::scope::Scope;
use std::sync::Arc;

use pm_application::log::tail::Batch;
use pm_application::log::LoggedEvent;
use pm_application::queries::{SagaReadStore, TurnFilter};
use pm_application::views::{PageRequest, TurnView};
use pm_domain::saga::rune::AGENT_TURN_DISPATCHED;
use pm_domain::saga::{SessionRune, TurnRune, CLAIMABLE_AFTER};
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::state::AppState;

/// The header naming the turn that became claimable.
pub const TURN_ID_HEADER: &str = "PM-Turn-Id";

/// The header with that turn's epoch then (a hint: the next claim gets a higher one).
pub const TURN_EPOCH_HEADER: &str = "PM-Turn-Epoch";

/// A doorbell's body: what its headers say, for a subscriber that reads bodies only. A
/// type of its own so that `/asyncapi.json` describes the body the bell sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct Doorbell {
    /// The agent whose turn it is.
    pub agent_id: Uuid,
    /// The turn that became claimable.
    pub turn_id: Uuid,
    /// Its epoch then, when known (a hint, as the header).
    pub turn_epoch: Option<i64>,
}

/// The subject of agent `agent_id`'s doorbell.
pub fn subject(agent_id: Uuid) -> String {
    format!("cmd.agent.{agent_id}.wakeup")
}

/// Connects to `url` without waiting for it (the client keeps trying in the background,
/// so a NATS that is away does not keep the service from starting).
///
/// # Errors
/// An unusable URL.
pub async fn connect(url: &str) -> Result<async_nats::Client, async_nats::ConnectError> {
    async_nats::ConnectOptions::new()
        .name("project-manager")
        .retry_on_initial_connect()
        .connect(url)
        .await
}

/// Rings doorbells from the log's tail until `shutdown`.
pub fn spawn(
    state: &AppState,
    nats: async_nats::Client,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    use tokio::sync::broadcast::error::RecvError;
    let state = state.clone();
    let mut batches = state.tail.subscribe();
    tokio::spawn(async move {
        loop {
            let batch: Arc<Batch> = tokio::select! {
                _ = shutdown.cancelled() => return,
                batch = batches.recv() => match batch {
                    Ok(batch) => batch,
                    // Behind: a ring may be lost; workers fall back on their own polling.
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "doorbells fell behind the log's tail");
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                },
            };
            for event in &batch.events {
                for (agent, turn, epoch) in rings(&state, event).await {
                    ring(&nats, agent, turn, epoch).await;
                }
            }
        }
    })
}

/// How a rune of [`CLAIMABLE_AFTER`] names the turns it may have made claimable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// A dispatch: its agent's rune names the agent, the turn and the epoch.
    Dispatch,
    /// A turn's rune: the turn's row names its agent.
    Turn,
    /// A session's rune: every turn of its conversation.
    Session,
}

/// Where the doorbells of `event_type` are to be found; `None` for a rune after which no
/// turn becomes claimable.
fn reach(event_type: &str) -> Option<Reach> {
    if !CLAIMABLE_AFTER.contains(&event_type) {
        return None;
    }
    if event_type == AGENT_TURN_DISPATCHED {
        Some(Reach::Dispatch)
    } else if TurnRune::NAMES.contains(&event_type) {
        Some(Reach::Turn)
    } else if SessionRune::NAMES.contains(&event_type) {
        Some(Reach::Session)
    } else {
        None
    }
}

/// The doorbells `event` rings: (agent, turn, epoch).
async fn rings(state: &AppState, event: &LoggedEvent) -> Vec<(Uuid, Uuid, Option<i64>)> {
    let reads = state.queries.sagas_unchecked();
    let id = || Uuid::parse_str(&event.aggregate_id).ok();
    match reach(&event.event_type) {
        Some(Reach::Dispatch) => {
            let turn = event.payload["turn_id"]
                .as_str()
                .and_then(|s| s.parse().ok());
            match (id(), turn) {
                (Some(agent), Some(turn)) => {
                    vec![(agent, turn, event.payload["turn_epoch"].as_i64())]
                }
                _ => Vec::new(),
            }
        }
        Some(Reach::Turn) => {
            let Some(turn) = id() else { return Vec::new() };
            match reads.turn(turn).await {
                Ok(Some(t)) if claimable(&t) => vec![(t.agent_id, t.id, t.turn_epoch)],
                Ok(_) => Vec::new(),
                Err(e) => {
                    tracing::warn!(error = %e, %turn, "no doorbell: the turn could not be read");
                    Vec::new()
                }
            }
        }
        Some(Reach::Session) => {
            let Some(conversation) = event.conversation_id else {
                return Vec::new();
            };
            let filter = TurnFilter {
                conversation_id: Some(conversation),
                ..TurnFilter::default()
            };
            let page = PageRequest {
                limit: 100,
                cursor: None,
            };
            match reads.turns(&Scope::All, &filter, &page).await {
                Ok(page) => page
                    .items
                    .iter()
                    .filter(|t| claimable(t))
                    .map(|t| (t.agent_id, t.id, t.turn_epoch))
                    .collect(),
                Err(e) => {
                    tracing::warn!(error = %e, %conversation, "no doorbells: turns unread");
                    Vec::new()
                }
            }
        }
        None => Vec::new(),
    }
}

/// WORKERS.md's claimable ([`pm_domain::saga::claimable`]), as the turn's row shows it
/// (the session's say is the claim's).
fn claimable(turn: &TurnView) -> bool {
    pm_domain::saga::claimable(turn.state, turn.lease.is_some())
}

async fn ring(nats: &async_nats::Client, agent: Uuid, turn: Uuid, epoch: Option<i64>) {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(TURN_ID_HEADER, turn.to_string().as_str());
    if let Some(epoch) = epoch {
        headers.insert(TURN_EPOCH_HEADER, epoch.to_string().as_str());
    }
    let body = Doorbell {
        agent_id: agent,
        turn_id: turn,
        turn_epoch: epoch,
    };
    // Ids and a number always serialize; were it to fail, an empty body still rings.
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let sent = nats
        .publish_with_headers(subject(agent), headers, body.into())
        .await;
    match sent {
        Ok(()) => metrics::counter!("pm_doorbells_total").increment(1),
        Err(e) => tracing::warn!(error = %e, %agent, "a doorbell was not sent"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pm_domain::saga::rune::{TURN_CLAIMED, TURN_DISPATCHED, TURN_STARTED};

    #[test]
    fn given_each_rune_after_which_a_turn_may_be_claimable_then_the_doorbells_know_where_it_rings()
    {
        for rune in CLAIMABLE_AFTER {
            assert!(reach(rune).is_some(), "{rune}: no doorbell");
        }
        assert_eq!(reach(AGENT_TURN_DISPATCHED), Some(Reach::Dispatch));
        assert_eq!(
            reach(pm_domain::saga::rune::TURN_RELEASED),
            Some(Reach::Turn)
        );
        assert_eq!(
            reach(pm_domain::saga::rune::SESSION_RESUMED),
            Some(Reach::Session)
        );
    }

    #[test]
    fn given_a_rune_after_which_no_turn_becomes_claimable_then_no_doorbell() {
        // `turn.dispatched` comes with `agent.turn_dispatched`, which rings: one ring a dispatch.
        for rune in [
            TURN_DISPATCHED,
            TURN_STARTED,
            TURN_CLAIMED,
            "project_manager.task.created",
        ] {
            assert_eq!(reach(rune), None, "{rune}");
        }
    }
}
