//! [`WorkerBuilder`]: a worker's name, lease, long-poll wait and claim filters, checked
//! when built so a misconfigured worker fails at start-up, not on every claim.

use std::time::Duration;

use pm_domain::limits::{LEASE_MS, MAX_CLAIM_WAIT_MS, MAX_WORKER_NAME};

use super::Worker;
use crate::{ClaimRequest, Client, Error, TurnKind};

/// The longest long-poll the service takes.
const MAX_WAIT: Duration = Duration::from_millis(MAX_CLAIM_WAIT_MS);
/// The shortest and longest lease the service takes.
const LEASE_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(*LEASE_MS.start())..=Duration::from_millis(*LEASE_MS.end());

/// Configures a [`Worker`]; see [`Worker::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct WorkerBuilder {
    client: Client,
    request: ClaimRequest,
    lease: Duration,
    wait: Duration,
    #[cfg(feature = "nats")]
    nats: Option<async_nats::Client>,
}

impl WorkerBuilder {
    pub(super) fn new(client: Client, request: ClaimRequest) -> Self {
        Self {
            client,
            request,
            lease: Duration::from_secs(30),
            wait: Duration::from_secs(10),
            #[cfg(feature = "nats")]
            nats: None,
        }
    }

    /// Sleep on the agents' wakeup doorbells (`cmd.agent.<agent_id>.wakeup` on `nats`,
    /// DELIVERY.md) between claims instead of long-polling: a claim answers at once, and
    /// after an empty one the worker waits for a ring — of its agent's subject when
    /// [`agent_id`](Self::agent_id) is set, else any agent's — or at most the
    /// [`wait`](Self::wait), its fallback for a missed ring. Build with
    /// [`build_async`](Self::build_async) (subscribing is a request to NATS).
    #[cfg(feature = "nats")]
    pub fn doorbells(mut self, nats: async_nats::Client) -> Self {
        self.nats = Some(nats);
        self
    }

    /// How long a claim holds its turn without a heartbeat (1 s–10 min; default 30 s).
    /// The handle renews it every third of that; a shorter lease hands a crashed worker's
    /// turn to another sooner, at the price of more heartbeats.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long one claim request waits for a turn (at most 30 s; default 10 s).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Only this agent's turns.
    pub fn agent_id(mut self, id: crate::Uuid) -> Self {
        self.request = self.request.agent_id(id);
        self
    }

    /// Only turns of agents acting for this actor (e.g. your assistant's `ai` actor).
    pub fn actor_id(mut self, id: crate::Uuid) -> Self {
        self.request = self.request.actor_id(id);
        self
    }

    /// Only this conversation's turns.
    pub fn conversation_id(mut self, id: crate::Uuid) -> Self {
        self.request = self.request.conversation_id(id);
        self
    }

    /// Only turns of this kind.
    pub fn kind(mut self, kind: TurnKind) -> Self {
        self.request = self.request.kind(kind);
        self
    }

    /// The worker.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a name that is blank or over 200 characters, a wait over
    /// 30 s or a lease outside 1 s–10 min (what the service would refuse on every claim).
    pub fn build(self) -> Result<Worker, Error> {
        let name = self.request.worker.as_deref().unwrap_or_default();
        if name.trim().is_empty() || name.chars().count() > MAX_WORKER_NAME {
            return Err(Error::InvalidInput(format!(
                "worker name {name:?}: expected 1 to {MAX_WORKER_NAME} characters"
            )));
        }
        if self.wait > MAX_WAIT {
            return Err(Error::InvalidInput(format!(
                "worker wait {:?}: at most {MAX_WAIT:?}",
                self.wait
            )));
        }
        if !LEASE_RANGE.contains(&self.lease) {
            return Err(Error::InvalidInput(format!(
                "worker lease {:?}: expected 1 s to 10 min",
                self.lease
            )));
        }
        #[cfg(feature = "nats")]
        if self.nats.is_some() {
            return Err(Error::InvalidInput(
                "a worker with doorbells is built with build_async (it subscribes)".into(),
            ));
        }
        let request = self.request.wait(self.wait).lease(self.lease);
        Ok(Worker::with(self.client, request, self.lease))
    }

    /// [`build`](Self::build), subscribing to the doorbells first when
    /// [`doorbells`](Self::doorbells) was given.
    ///
    /// # Errors
    /// As `build`; [`Error::InvalidInput`] when NATS refuses the subscription.
    #[cfg(feature = "nats")]
    pub async fn build_async(mut self) -> Result<Worker, Error> {
        let Some(nats) = self.nats.take() else {
            return self.build();
        };
        self.clone().build()?;
        let doorbell = super::doorbell::Doorbell::subscribe(&nats, self.request.agent_id).await?;
        let request = self.request.wait(self.wait).lease(self.lease);
        Ok(Worker::with_doorbell(
            self.client,
            request,
            self.lease,
            doorbell,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder(name: &str) -> WorkerBuilder {
        Worker::builder(Client::new("http://127.0.0.1:1").expect("client"), name)
    }

    #[test]
    fn the_builder_refuses_what_the_service_would() {
        assert!(builder("w-1").build().is_ok());
        for bad in [
            builder(" "),
            builder(&"x".repeat(201)),
            builder("w").wait(Duration::from_secs(31)),
            builder("w").lease(Duration::from_millis(999)),
            builder("w").lease(Duration::from_secs(601)),
        ] {
            assert!(matches!(bad.build(), Err(Error::InvalidInput(_))));
        }
        let w = builder("w-2").kind(TurnKind::Task).build().expect("worker");
        assert_eq!(w.name(), "w-2");
        assert_eq!(w.inner.request.lease, Some(Duration::from_secs(30)));
        assert!(!w.is_shut_down());
    }
}
