//! Measurements taken beside the load, each at a low rate of its own:
//!
//! - **projection lag**: every 100 ms a message is posted and read back with
//!   `min_position` set to its `X-Event-Position`: milliseconds from the command's answer
//!   to the read model answering with it;
//! - **saga lag**: every 200 ms a conversation of a new person and the AI is started and
//!   the person's message posted: milliseconds from the message's answer to the
//!   `agent.turn_dispatched` of that conversation arriving on an SSE stream;
//! - **SSE delivery**: `--subscribers` streams of the facts (`project_manager.*`), each
//!   timing every fact
//!   from its recorded time (`time`, set by the service just before the append) to its
//!   arrival.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use pm_client::{Client, EventQuery, Position, Uuid, AGENT_TURN_DISPATCHED};

use crate::mix::{conversation, message, ms, person, World};
use crate::stats::Samples;

/// Projection lag samples, ms.
pub async fn projection_lag(c: Client, w: World, stop: Arc<AtomicBool>) -> Samples {
    let mut samples = Samples::default();
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Ok(written) = c.add_message(w.conversation, message(w.ai, None)).await else {
            continue;
        };
        let answered = Instant::now();
        if c.after(&written)
            .message(w.conversation, written.entity.id)
            .await
            .is_ok()
        {
            samples.push(ms(answered));
        }
    }
    samples
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Saga lag samples, ms, and how many probes never saw their turn dispatched.
pub async fn saga_lag(
    c: Client,
    w: World,
    from: Position,
    stop: Arc<AtomicBool>,
) -> (Samples, u64) {
    let waiting: Arc<Mutex<HashMap<Uuid, Instant>>> = Arc::default();
    let samples: Arc<Mutex<Samples>> = Arc::default();
    let follower = {
        let (c, waiting, samples) = (c.clone(), waiting.clone(), samples.clone());
        tokio::spawn(async move {
            let query = EventQuery::new()
                .with_type(AGENT_TURN_DISPATCHED)
                .after(from);
            let mut feed = c.follow(query);
            // The follower reconnects by itself; an event it could not read is skipped.
            while let Some(event) = feed.next().await {
                let Some(cid) = event.ok().and_then(|e| e.conversation_id()) else {
                    continue;
                };
                if let Some(sent) = lock(&waiting).remove(&cid) {
                    lock(&samples).push(ms(sent));
                }
            }
        })
    };
    let mut probes = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Ok(p) = c.register_actor(person("bench probe")).await else {
            continue;
        };
        let Ok(conv) = c
            .start_conversation(conversation(vec![p.entity.id, w.ai]))
            .await
        else {
            continue;
        };
        let cid = conv.entity.id;
        // Registered before the message goes out: the turn may be dispatched before the
        // answer reaches this task. Re-stamped with the answer's time just after.
        lock(&waiting).insert(cid, Instant::now());
        if c.add_message(cid, message(p.entity.id, None)).await.is_ok() {
            if let Some(sent) = lock(&waiting).get_mut(&cid) {
                *sent = Instant::now();
            }
            probes += 1;
        } else {
            lock(&waiting).remove(&cid);
        }
    }
    // Late dispatches still count: give the stream a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    follower.abort();
    let samples = std::mem::take(&mut *lock(&samples));
    let missed = probes.saturating_sub(samples.len() as u64);
    (samples, missed)
}

/// Delivery samples of `n` subscribers of the facts from `from`, ms.
pub async fn subscribers(c: Client, n: usize, from: Position, stop: Arc<AtomicBool>) -> Samples {
    let streams: Vec<_> = (0..n)
        .map(|_| {
            let (c, from, stop) = (c.clone(), from.clone(), stop.clone());
            tokio::spawn(async move {
                let mut samples = Samples::default();
                let facts = EventQuery::new().with_type("project_manager.*").after(from);
                let mut feed = c.follow(facts);
                while !stop.load(Ordering::Relaxed) {
                    let next = tokio::time::timeout(Duration::from_millis(200), feed.next());
                    let event = match next.await {
                        Err(_) | Ok(Some(Err(_))) => continue,
                        Ok(None) => break,
                        Ok(Some(Ok(event))) => event,
                    };
                    let sent = event.attributes.as_ref().and_then(|a| a.time);
                    if let Some(sent) = sent {
                        let delay = chrono::Utc::now() - sent;
                        samples.push(delay.num_microseconds().unwrap_or(0) as f64 / 1000.0);
                    }
                }
                samples
            })
        })
        .collect();
    let mut all = Samples::default();
    for s in streams {
        // A stream task only ends by returning its samples (it does not panic).
        if let Ok(s) = s.await {
            all.extend(s);
        }
    }
    all
}
