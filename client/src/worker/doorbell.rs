//! A worker's doorbell (feature `nats`): the subscription to the agents' wakeup subjects
//! (`cmd.agent.<agent_id>.wakeup`, DELIVERY.md) it sleeps on between claims. A ring is a
//! hint to claim now, never a claim: rings queue while the worker works, and each only
//! makes the next claim sooner.

use std::time::Duration;

use futures::{FutureExt, StreamExt};

use crate::{Error, Uuid};

/// The subscription; one waiter at a time.
#[derive(Debug)]
pub(crate) struct Doorbell {
    rings: tokio::sync::Mutex<async_nats::Subscriber>,
}

impl Doorbell {
    /// Subscribes to `agent`'s doorbell, or every agent's.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when NATS refuses the subscription.
    pub(crate) async fn subscribe(
        nats: &async_nats::Client,
        agent: Option<Uuid>,
    ) -> Result<Self, Error> {
        let subject = agent.map_or_else(
            || "cmd.agent.*.wakeup".to_string(),
            |agent| format!("cmd.agent.{agent}.wakeup"),
        );
        let rings = nats
            .subscribe(subject)
            .await
            .map_err(|e| Error::InvalidInput(format!("doorbells: {e}")))?;
        Ok(Self {
            rings: tokio::sync::Mutex::new(rings),
        })
    }

    /// Waits for a ring (one queued meanwhile answers at once), at most `fallback`; every
    /// other ring already queued is taken with it (one claim serves them).
    pub(crate) async fn wait(&self, fallback: Duration) {
        let mut rings = self.rings.lock().await;
        match tokio::time::timeout(fallback, rings.next()).await {
            Ok(Some(_)) => while let Some(Some(_)) = rings.next().now_or_never() {},
            // The subscription ended (its connection closed for good): claim at the
            // fallback's pace rather than at once, again and again.
            Ok(None) => tokio::time::sleep(fallback).await,
            Err(_) => {}
        }
    }
}
