//! The dispatch probe: how long a human message takes to become a dispatched turn that an
//! LLM service following `GET /v1/events?types=agent.turn_dispatched` over SSE sees.
//!
//! Every 100 ms it starts a conversation of a human and an AI actor and posts the human's
//! first message; measured from sending the message to the `agent.turn_dispatched` event
//! of that conversation arriving on one SSE stream opened at the log's head.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Waiting probes (conversation → when its message was acknowledged) and the latencies
/// measured so far.
#[derive(Default)]
struct Probes {
    waiting: HashMap<String, Instant>,
    latencies_ms: Vec<f64>,
}

fn lock(probes: &Mutex<Probes>) -> std::sync::MutexGuard<'_, Probes> {
    probes.lock().unwrap_or_else(|e| e.into_inner())
}

/// A request builder with the token, if any.
fn authed(req: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
    match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    }
}

async fn post(
    client: &reqwest::Client,
    base: &str,
    token: Option<&str>,
    path: &str,
    body: Value,
) -> Option<Value> {
    let res = authed(client.post(format!("{base}{path}")).json(&body), token)
        .send()
        .await
        .ok()?;
    if !res.status().is_success() {
        return None;
    }
    res.json().await.ok()
}

/// Follows the dispatched turns from the log's head, matching them to probes.
async fn follow(
    client: reqwest::Client,
    base: String,
    token: Option<String>,
    probes: Arc<Mutex<Probes>>,
    stop: Arc<AtomicBool>,
) {
    let head = match authed(client.get(format!("{base}/readyz")), None)
        .send()
        .await
    {
        Ok(r) => r
            .json::<Value>()
            .await
            .ok()
            .and_then(|v| v["head"].as_str().map(str::to_string)),
        Err(_) => None,
    }
    .unwrap_or_else(|| "0".into());
    let url = format!("{base}/v1/events?types=agent.turn_dispatched&cursor={head}");
    let req = authed(
        client.get(url).header("accept", "text/event-stream"),
        token.as_deref(),
    );
    let Ok(mut res) = req.send().await else {
        return;
    };
    let mut buf = String::new();
    while !stop.load(Ordering::Relaxed) {
        let chunk = match tokio::time::timeout(Duration::from_millis(200), res.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            Ok(_) => return,
            Err(_) => continue,
        };
        let arrived = Instant::now();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            let Ok(event) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            let Some(conversation) = event["conversationid"].as_str() else {
                continue;
            };
            let mut p = lock(&probes);
            if let Some(sent) = p.waiting.remove(conversation) {
                p.latencies_ms.push((arrived - sent).as_secs_f64() * 1000.0);
            }
        }
    }
}

/// Runs probes until `stop`; answers the latency percentiles.
pub async fn measure_dispatch(
    client: reqwest::Client,
    base: String,
    token: Option<String>,
    stop: Arc<AtomicBool>,
) -> Value {
    let t = token.as_deref();
    let actor = |kind: &str| json!({"kind": kind, "display_name": format!("probe {kind}")});
    let (Some(human), Some(llm)) = (
        post(&client, &base, t, "/v1/actors", actor("human")).await,
        post(&client, &base, t, "/v1/actors", actor("ai")).await,
    ) else {
        return json!({"error": "could not register the probe's actors"});
    };
    let (human, llm) = (human["id"].clone(), llm["id"].clone());
    let probes = Arc::new(Mutex::new(Probes::default()));
    let follower = tokio::spawn(follow(
        client.clone(),
        base.clone(),
        token.clone(),
        probes.clone(),
        stop.clone(),
    ));
    // Let the stream open before the first probe.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut sent = 0usize;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let body = json!({"actor_ids": [human, llm], "title": "probe"});
        let Some(c) = post(&client, &base, t, "/v1/conversations", body).await else {
            continue;
        };
        let Some(id) = c["id"].as_str().map(str::to_string) else {
            continue;
        };
        let path = format!("/v1/conversations/{id}/messages");
        // From the moment the message is sent (its dispatch may be seen before its 201).
        lock(&probes).waiting.insert(id.clone(), Instant::now());
        if post(
            &client,
            &base,
            t,
            &path,
            json!({"actor_id": human, "content": "probe"}),
        )
        .await
        .is_some()
        {
            sent += 1;
        } else {
            lock(&probes).waiting.remove(&id);
        }
    }
    // Stragglers get a second to arrive.
    tokio::time::sleep(Duration::from_secs(1)).await;
    follower.abort();
    let mut p = lock(&probes);
    let missing = p.waiting.len();
    p.latencies_ms.sort_by(f64::total_cmp);
    let v = &p.latencies_ms;
    let at = |q: f64| {
        v.get(((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1)))
            .copied()
    };
    json!({
        "probes": sent,
        "dispatched": v.len(),
        "missing": missing,
        "p50_ms": at(0.5),
        "p99_ms": at(0.99),
        "max_ms": v.last(),
    })
}
