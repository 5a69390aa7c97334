//! The `workers` mix (issue 15, WORKERS.md): ingress posts human messages, W workers
//! claim and answer each turn with a fenced AI message and a fenced checkpoint.
//!
//! - **Setup**: N conversations, each of its own person and the bench's AI actor
//!   (registered once, [`crate::mix::World::ai`]), started with both.
//! - **Ingress**: one task per conversation keeps at most one human message outstanding:
//!   it posts the next only after the previous turn completed, so every message becomes a
//!   turn that is dispatched at once (the root agent is idle). With a rate, every post
//!   first takes a tick of one shared pacer (at most `rate` messages/s in all).
//! - **Workers**: W tasks loop on `POST /v1/turns/claim` (`kind: conversation`,
//!   `wait_ms`, `lease_ms`); on `200` they send the AI's message and then the checkpoint
//!   (`BEGIN_WORK` by default: the session stays `running` and the next human message
//!   queues the next turn, so the cycle repeats indefinitely), both fenced by
//!   `PM-Turn-Id`/`PM-Turn-Epoch`. All through pm-client as a worker service would call it
//!   (`Client::claim`, `CommandRequest::fenced`; an `Idempotency-Key` per command unless
//!   `--no-idempotency-keys`). Turns not of the bench's conversations (the saga-lag
//!   probe's) are answered the same way and counted as `foreign_turns`.
//!
//! Measured, for cycles whose step fell before the end of the window:
//! - **message-to-claim**: the claim's answer − the moment the human message was sent
//!   (so it includes the message command's own latency; `ack_to_claim` is from the
//!   message's answer instead, 0 when the claim answered first);
//! - **cycle**: the checkpoint's answer − the moment the human message was sent;
//! - **cycles/s**: checkpoints answered within the window, over the window.
//!
//! After the window the ingress posts nothing more and the workers finish the turns in
//! flight (not counted), so a next phase starts with every conversation idle.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pm_client::{
    text, AddMessageInput, CheckpointType, ClaimRequest, Client, CreateConversationCheckpointInput,
    Error, TurnKind, Uuid,
};
use serde::Serialize;
use tokio::sync::oneshot;

use crate::mix::{conversation, message, person, Tally};
use crate::stats::{ratio, round, Percentiles, Samples};

/// The target of the issue: message-to-claim p99 below this at half of the peak.
pub const TARGET_P99_MS: f64 = 50.0;

/// A turn not completed this long after its message was posted is counted lost and its
/// conversation posts again.
const LOST_AFTER: Duration = Duration::from_secs(15);

/// The checkpoint that completes each turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Checkpoint {
    /// `BEGIN_WORK`: the session stays `running`; no timer is armed.
    BeginWork,
    /// `NEED_INFORMATION`: the session waits for the user (its timeout armed), the next
    /// human message is accepted as the reply.
    NeedInformation,
}

impl Checkpoint {
    fn checkpoint_type(self) -> CheckpointType {
        match self {
            Checkpoint::BeginWork => CheckpointType::BeginWork,
            Checkpoint::NeedInformation => CheckpointType::NeedInformation,
        }
    }
}

/// Which load level a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// As fast as the conversations' closed loops go.
    Peak,
    /// Half of the peak's cycles/s measured just before, rate-limited ingress.
    HalfPeak,
    /// The `--rate` given, rate-limited ingress.
    Rate,
}

/// How the workers run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Worker tasks.
    pub workers: usize,
    /// The claim's `wait_ms`.
    pub wait_ms: u64,
    /// The claim's `lease_ms`.
    pub lease_ms: u64,
    /// The checkpoint answering each turn.
    pub checkpoint: Checkpoint,
}

/// One bench conversation: its person and id.
#[derive(Debug, Clone, Copy)]
pub struct Conversation {
    /// The conversation.
    pub id: Uuid,
    /// Its person.
    pub human: Uuid,
}

/// Makes `n` conversations, each of a new person and `ai`.
///
/// # Errors
/// When the service refuses or cannot be reached.
pub async fn setup(c: &Client, ai: Uuid, n: usize) -> Result<Vec<Conversation>, Error> {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        let human = c.register_actor(person("bench person")).await?.entity.id;
        let id = c
            .start_conversation(conversation(vec![human, ai]))
            .await?
            .entity
            .id;
        all.push(Conversation { id, human });
    }
    Ok(all)
}

/// The workers' figures of one run (the `workers` object of the report).
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    /// The load level.
    pub phase: Phase,
    /// Cycles/s aimed at (rate-limited phases).
    pub target_cycles_per_s: Option<f64>,
    /// Worker tasks.
    pub workers: usize,
    /// Conversations (at most one turn in flight each).
    pub conversations: usize,
    /// The checkpoint answering each turn.
    pub checkpoint_type: Checkpoint,
    /// Turns of the bench's conversations completed within the window.
    pub cycles: u64,
    /// Their rate.
    pub cycles_per_s: f64,
    /// The raw job queue's cycles/s in this run (a claim and a completion, see
    /// [`crate::queue`]), with `--database-url`: the same anchor in every phase.
    pub raw_queue_cycles_per_s: Option<f64>,
    /// `cycles_per_s` ÷ `raw_queue_cycles_per_s`.
    pub queue_ratio: Option<f64>,
    /// Claim's answer − human message sent, ms.
    pub message_to_claim_ms: Percentiles,
    /// Claim's answer − human message's answer, ms (0 when the claim answered first).
    pub ack_to_claim_ms: Percentiles,
    /// Checkpoint's answer − human message sent, ms.
    pub cycle_ms: Percentiles,
    /// Latency of the claims answered `200`, ms.
    pub claim_ms: Percentiles,
    /// Latency of the human messages, ms.
    pub human_message_ms: Percentiles,
    /// Latency of the fenced AI messages, ms.
    pub fenced_message_ms: Percentiles,
    /// Latency of the fenced checkpoints, ms.
    pub fenced_checkpoint_ms: Percentiles,
    /// Claims answered `200` within the window.
    pub claims: u64,
    /// Claims answered `204` (nothing claimable within `wait_ms`).
    pub empty_claims: u64,
    /// Turns claimed that were not the bench conversations' (the saga-lag probe's).
    pub foreign_turns: u64,
    /// Turns not completed within 15 s of their message.
    pub lost_turns: u64,
    /// Half-peak only: whether message-to-claim p99 < 50 ms.
    pub target_met: Option<bool>,
}

impl Figures {
    /// With the raw queue's cycles/s (when measured) and the ratio to it.
    pub fn against_queue(self, raw_queue: Option<f64>) -> Self {
        Figures {
            raw_queue_cycles_per_s: raw_queue.map(round),
            queue_ratio: ratio(self.cycles_per_s, raw_queue),
            ..self
        }
    }
}

/// What [`drive`] measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The commands (human messages, fenced AI messages, fenced checkpoints) and errors.
    pub tally: Tally,
    cycles: u64,
    claims: u64,
    empty_claims: u64,
    foreign_turns: u64,
    lost_turns: u64,
    message_to_claim: Samples,
    ack_to_claim: Samples,
    cycle: Samples,
    claim: Samples,
    human: Samples,
    fenced_message: Samples,
    fenced_checkpoint: Samples,
}

impl Outcome {
    fn merge(&mut self, o: Outcome) {
        self.tally.merge(o.tally);
        self.cycles += o.cycles;
        self.claims += o.claims;
        self.empty_claims += o.empty_claims;
        self.foreign_turns += o.foreign_turns;
        self.lost_turns += o.lost_turns;
        self.message_to_claim.extend(o.message_to_claim);
        self.ack_to_claim.extend(o.ack_to_claim);
        self.cycle.extend(o.cycle);
        self.claim.extend(o.claim);
        self.human.extend(o.human);
        self.fenced_message.extend(o.fenced_message);
        self.fenced_checkpoint.extend(o.fenced_checkpoint);
    }

    /// The figures of a window of `elapsed` seconds.
    pub fn figures(
        &self,
        s: &Settings,
        conversations: usize,
        phase: Phase,
        rate: f64,
        elapsed: f64,
    ) -> Figures {
        let message_to_claim_ms = self.message_to_claim.percentiles();
        Figures {
            phase,
            target_cycles_per_s: (rate > 0.0).then_some(round(rate)),
            workers: s.workers,
            conversations,
            checkpoint_type: s.checkpoint,
            cycles: self.cycles,
            cycles_per_s: round(self.cycles as f64 / elapsed),
            raw_queue_cycles_per_s: None,
            queue_ratio: None,
            message_to_claim_ms,
            ack_to_claim_ms: self.ack_to_claim.percentiles(),
            cycle_ms: self.cycle.percentiles(),
            claim_ms: self.claim.percentiles(),
            human_message_ms: self.human.percentiles(),
            fenced_message_ms: self.fenced_message.percentiles(),
            fenced_checkpoint_ms: self.fenced_checkpoint.percentiles(),
            claims: self.claims,
            empty_claims: self.empty_claims,
            foreign_turns: self.foreign_turns,
            lost_turns: self.lost_turns,
            target_met: (phase == Phase::HalfPeak && message_to_claim_ms.count > 0)
                .then_some(message_to_claim_ms.p99 < TARGET_P99_MS),
        }
    }
}

/// The human message a conversation waits on.
#[derive(Debug)]
struct Pending {
    sent: Instant,
    acked: Option<Instant>,
    message: Option<Uuid>,
    finished: Option<oneshot::Sender<()>>,
}

/// What the ingress and the workers share.
struct Shared {
    pending: Mutex<HashMap<Uuid, Pending>>,
    stop: Arc<AtomicBool>,
    ingress_left: AtomicUsize,
    done: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Milliseconds from `from` to `to` (0 when `to` is earlier).
fn between(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}

/// Runs the ingress and the workers until `stop`, then drains the turns in flight.
/// Everything goes through `c` (its `Idempotency-Key` setting holds for the fenced
/// commands too).
#[allow(clippy::too_many_arguments)]
pub async fn drive(
    c: Client,
    s: Settings,
    conversations: Vec<Conversation>,
    ai: Uuid,
    rate: f64,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
) -> Outcome {
    let shared = Arc::new(Shared {
        pending: Mutex::default(),
        stop,
        ingress_left: AtomicUsize::new(conversations.len()),
        done,
        failed,
    });
    let pace = (rate > 0.0).then(|| {
        let mut t = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Arc::new(tokio::sync::Mutex::new(t))
    });
    let workers: Vec<_> = (0..s.workers)
        .map(|i| {
            let (c, shared, s) = (c.clone(), shared.clone(), s.clone());
            tokio::spawn(async move { worker(i, &c, &shared, &s, ai).await })
        })
        .collect();
    let ingress: Vec<_> = conversations
        .iter()
        .map(|conv| {
            let (c, shared, pace, conv) = (c.clone(), shared.clone(), pace.clone(), *conv);
            tokio::spawn(async move { post_messages(&c, conv, &shared, pace).await })
        })
        .collect();
    let mut all = Outcome::default();
    for task in ingress.into_iter().chain(workers) {
        // A task only ends by returning its outcome (it does not panic).
        if let Ok(o) = task.await {
            all.merge(o);
        }
    }
    all
}

/// One conversation's ingress: a human message, then wait for its turn's checkpoint.
async fn post_messages(
    c: &Client,
    conv: Conversation,
    shared: &Shared,
    pace: Option<Arc<tokio::sync::Mutex<tokio::time::Interval>>>,
) -> Outcome {
    let mut o = Outcome::default();
    'posting: while !shared.stopped() {
        if let Some(pace) = &pace {
            // Checks the stop now and then: the pacer hands out one tick at a time.
            loop {
                let tick = async { pace.lock().await.tick().await };
                if tokio::time::timeout(Duration::from_millis(100), tick)
                    .await
                    .is_ok()
                {
                    break;
                }
                if shared.stopped() {
                    break 'posting;
                }
            }
            if shared.stopped() {
                break;
            }
        }
        let (tx, rx) = oneshot::channel();
        let sent = Instant::now();
        shared.pending().insert(
            conv.id,
            Pending {
                sent,
                acked: None,
                message: None,
                finished: Some(tx),
            },
        );
        match c.add_message(conv.id, message(conv.human, None)).await {
            Ok(w) => {
                let acked = Instant::now();
                shared.done.fetch_add(1, Ordering::Relaxed);
                if !shared.stopped() {
                    o.tally.commands += 1;
                    o.tally.command_ms.push(between(sent, acked));
                    o.human.push(between(sent, acked));
                }
                if let Some(p) = shared.pending().get_mut(&conv.id) {
                    if p.sent == sent {
                        p.acked = Some(acked);
                        p.message = Some(w.entity.id);
                    }
                }
            }
            Err(e) => {
                o.tally.fail(&e);
                shared.failed.fetch_add(1, Ordering::Relaxed);
                shared.pending().remove(&conv.id);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        }
        if !matches!(tokio::time::timeout(LOST_AFTER, rx).await, Ok(Ok(()))) {
            o.lost_turns += 1;
            let mut pending = shared.pending();
            if pending.get(&conv.id).is_some_and(|p| p.sent == sent) {
                pending.remove(&conv.id);
            }
        }
    }
    shared.ingress_left.fetch_sub(1, Ordering::Relaxed);
    o
}

/// One worker: claim, answer with a fenced AI message and a fenced checkpoint, repeat
/// until the ingress has ended and nothing is in flight.
async fn worker(i: usize, c: &Client, shared: &Shared, s: &Settings, ai: Uuid) -> Outcome {
    let mut o = Outcome::default();
    let request = ClaimRequest::new()
        .kind(TurnKind::Conversation)
        .wait(Duration::from_millis(s.wait_ms))
        .lease(Duration::from_millis(s.lease_ms))
        .worker(format!("bench-{i}"));
    let said = AddMessageInput {
        content: content("on it: reproducing the bug"),
        ..message(ai, None)
    };
    let checkpoint = CreateConversationCheckpointInput {
        checkpoint_type: s.checkpoint.checkpoint_type(),
        summary: content("bench: reproduced, fixing"),
    };
    while shared.ingress_left.load(Ordering::Relaxed) > 0 {
        let t = Instant::now();
        let claimed = match c.claim(request.clone()).await {
            Ok(Some(claimed)) => claimed,
            Ok(None) => {
                o.empty_claims += 1;
                continue;
            }
            Err(e) => {
                o.tally.fail_with(error_key("claim", &e));
                shared.failed.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let answered = Instant::now();
        shared.done.fetch_add(1, Ordering::Relaxed);
        let in_window = !shared.stopped();
        if in_window {
            o.claims += 1;
            o.claim.push(between(t, answered));
        }
        let conv = claimed.turn.conversation_id;
        let message_id = claimed.context.message.as_ref().map(|m| m.id);
        let ours = shared.pending().get(&conv).and_then(|p| {
            let same = p.message.is_none() || p.message == message_id;
            (same && message_id.is_some()).then_some((p.sent, p.acked))
        });
        if let (true, Some((sent, acked))) = (in_window, ours) {
            o.message_to_claim.push(between(sent, answered));
            o.ack_to_claim
                .push(acked.map_or(0.0, |a| between(a, answered)));
        }
        let fence = claimed.fence();
        let t = Instant::now();
        let r = c.add_message(conv, said.clone()).fenced(fence).send().await;
        let Some(took) = command(shared, &mut o, "messages", t, r.map(drop)) else {
            continue;
        };
        if !shared.stopped() {
            o.fenced_message.push(took);
        }
        let t = Instant::now();
        let r = c
            .create_conversation_checkpoint(conv, checkpoint.clone())
            .fenced(fence)
            .send()
            .await;
        let Some(took) = command(shared, &mut o, "checkpoints", t, r.map(drop)) else {
            continue;
        };
        let finished = Instant::now();
        let in_window = !shared.stopped();
        if in_window {
            o.fenced_checkpoint.push(took);
        }
        let Some((sent, _)) = ours else {
            o.foreign_turns += 1;
            continue;
        };
        let p = {
            let mut pending = shared.pending();
            match pending.get(&conv) {
                Some(p) if p.sent == sent => pending.remove(&conv),
                _ => None,
            }
        };
        if let Some(mut p) = p {
            if in_window {
                o.cycles += 1;
                o.cycle.push(between(sent, finished));
            }
            if let Some(tx) = p.finished.take() {
                // The conversation's ingress may have given up on it: nobody to tell.
                let _ = tx.send(());
            }
        }
    }
    o
}

/// Records the answer of a fenced command sent at `sent`: its latency, ms, when written.
fn command(
    shared: &Shared,
    o: &mut Outcome,
    what: &str,
    sent: Instant,
    r: Result<(), Error>,
) -> Option<f64> {
    match r {
        Ok(()) => {
            let took = between(sent, Instant::now());
            shared.done.fetch_add(1, Ordering::Relaxed);
            if !shared.stopped() {
                o.tally.commands += 1;
                o.tally.command_ms.push(took);
            }
            Some(took)
        }
        Err(e) => {
            o.tally.fail_with(error_key(what, &e));
            shared.failed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// `"<what> <status> <code>"` of a failure (`transport` without a status).
fn error_key(what: &str, e: &Error) -> String {
    match (e.status(), e.code()) {
        (Some(status), Some(code)) => format!("{what} {status} {code}"),
        (Some(status), None) => format!("{what} {status}"),
        (None, _) => format!("{what} transport"),
    }
}

fn content(s: &str) -> pm_client::NonEmptyText {
    text(s).unwrap_or_else(|_| unreachable!("a non-empty literal"))
}
