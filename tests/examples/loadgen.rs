//! Load generator for the command API: `concurrency` workers post commands over
//! keep-alive connections for `seconds`, then it prints one JSON line with the rate of
//! `201 Created` answers and latency percentiles. Used by `bench/run.sh`, which measures
//! the raw PostgreSQL single-INSERT rate in the same run.
//!
//! Scenarios: `messages` (MessageAdded on one conversation: a new aggregate per command),
//! `task-checkpoints` (TaskCheckpointCreated spread over 64 tasks: appends to existing
//! aggregates) and `conversations` (each iteration starts a conversation of a human and an
//! AI actor and posts the human's message: both commands put the sagas to work — a
//! session, a root agent, a dispatched turn).
//!
//! `--rate` caps the total command rate; `--measure-dispatch` runs the dispatch probe
//! ([`probe`]) alongside the load.

#[path = "loadgen/probe.rs"]
mod probe;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};

/// Command-line options.
#[derive(Debug, Parser)]
struct Args {
    /// The service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    base: String,
    /// Concurrent workers.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// `messages` or `task-checkpoints`.
    #[arg(long, default_value = "messages")]
    scenario: String,
    /// Bearer token (admin), if the service has tokens.
    #[arg(long)]
    token: Option<String>,
    /// Also measure the read model's lag under the load: samples `lag_events` of
    /// `GET /v1/admin/processors` every 200 ms, and every 100 ms posts one extra message
    /// and times how long until `GET /v1/conversations/{id}?min_position=` sees it.
    #[arg(long)]
    measure_lag: bool,
    /// Total commands per second to aim at (0: as fast as the service answers).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Also measure how long a human message takes to become a dispatched turn seen on
    /// an SSE stream of `agent.turn_dispatched` (see the probe module).
    #[arg(long)]
    measure_dispatch: bool,
}

/// Lag samples: events behind, and milliseconds from 201 to visible in the read model.
async fn measure_lag(
    client: reqwest::Client,
    args: Arc<Args>,
    actor: String,
    conversation: String,
    stop: Arc<AtomicBool>,
) -> Value {
    let mut lag_events: Vec<i64> = Vec::new();
    let mut visible_ms: Vec<f64> = Vec::new();
    let mut tick = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tick += 1;
        if tick.is_multiple_of(2) {
            let mut req = client.get(format!("{}/v1/admin/processors", args.base));
            if let Some(token) = &args.token {
                req = req.bearer_auth(token);
            }
            if let Ok(res) = req.send().await {
                if let Ok(body) = res.json::<Value>().await {
                    if let Some(lag) = body["processors"].as_array().and_then(|ps| {
                        ps.iter()
                            .find(|p| p["name"] == "read_model")
                            .and_then(|p| p["lag_events"].as_i64())
                    }) {
                        lag_events.push(lag);
                    }
                }
            }
        }
        let mut req = client
            .post(format!(
                "{}/v1/conversations/{conversation}/messages",
                args.base
            ))
            .json(&json!({"actor_id": actor, "content": "lag probe"}));
        if let Some(token) = &args.token {
            req = req.bearer_auth(token);
        }
        let Ok(res) = req.send().await else { continue };
        let acknowledged = Instant::now();
        let Some(position) = res
            .headers()
            .get("x-event-position")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
        else {
            continue;
        };
        let mut req = client.get(format!(
            "{}/v1/conversations/{conversation}?min_position={position}",
            args.base
        ));
        if let Some(token) = &args.token {
            req = req.bearer_auth(token);
        }
        if matches!(req.send().await, Ok(r) if r.status().is_success()) {
            visible_ms.push(acknowledged.elapsed().as_secs_f64() * 1000.0);
        }
    }
    lag_events.sort();
    visible_ms.sort_by(f64::total_cmp);
    let p = |v: &[f64], q: f64| {
        v.get(((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1)))
            .copied()
    };
    json!({
        "lag_events_max": lag_events.last(),
        "lag_events_mean": if lag_events.is_empty() { 0.0 } else { lag_events.iter().sum::<i64>() as f64 / lag_events.len() as f64 },
        "lag_samples": lag_events.len(),
        "visible_after_ms_p50": p(&visible_ms, 0.5),
        "visible_after_ms_p99": p(&visible_ms, 0.99),
        "visible_after_ms_max": visible_ms.last(),
        "visibility_samples": visible_ms.len(),
    })
}

async fn post(
    client: &reqwest::Client,
    args: &Args,
    path: &str,
    body: &Value,
) -> Result<Value, String> {
    let mut req = client.post(format!("{}{path}", args.base)).json(body);
    if let Some(token) = &args.token {
        req = req.bearer_auth(token);
    }
    let res = req.send().await.map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    let body: Value = res.json().await.map_err(|e| e.to_string())?;
    if status == 201 || status == 200 {
        Ok(body)
    } else {
        Err(format!("{path}: {status} {body}"))
    }
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_default().to_string()
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args = Arc::new(Args::parse());
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()
        .map_err(|e| e.to_string())?;
    let actor = id(&post(
        &client,
        &args,
        "/v1/actors",
        &json!({"kind": "ai", "display_name": "bench"}),
    )
    .await?);
    let conversation = id(&post(
        &client,
        &args,
        "/v1/conversations",
        &json!({"actor_ids": [actor], "title": "bench"}),
    )
    .await?);
    let checkpoint = id(&post(
        &client,
        &args,
        &format!("/v1/conversations/{conversation}/checkpoints"),
        &json!({"checkpoint_type": "BEGIN_WORK", "summary": "bench"}),
    )
    .await?);
    let mut tasks = Vec::new();
    if args.scenario == "task-checkpoints" {
        for _ in 0..64 {
            let task = post(
                &client,
                &args,
                &format!("/v1/conversations/{conversation}/tasks"),
                &json!({"checkpoint_id": checkpoint, "instructions": "bench"}),
            )
            .await?;
            tasks.push(id(&task));
        }
    } else if !["messages", "conversations"].contains(&args.scenario.as_str()) {
        return Err(format!("unknown scenario {}", args.scenario));
    }
    let human = if args.scenario == "conversations" {
        id(&post(
            &client,
            &args,
            "/v1/actors",
            &json!({"kind": "human", "display_name": "bench human"}),
        )
        .await?)
    } else {
        String::new()
    };
    let tasks = Arc::new(tasks);
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..args.concurrency {
        let (client, args, tasks, ok, failed, stop) = (
            client.clone(),
            args.clone(),
            tasks.clone(),
            ok.clone(),
            failed.clone(),
            stop.clone(),
        );
        let (actor, conversation, human) = (actor.clone(), conversation.clone(), human.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut n = 0usize;
            // Each worker's share of the rate, its first slot staggered.
            let mut pace = (args.rate > 0.0).then(|| {
                let every = Duration::from_secs_f64(args.concurrency as f64 / args.rate);
                let start =
                    tokio::time::Instant::now() + every.mul_f64(w as f64 / args.concurrency as f64);
                let mut tick = tokio::time::interval_at(start, every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick
            });
            let mut started_conversation: Option<String> = None;
            while !stop.load(Ordering::Relaxed) {
                if let Some(tick) = pace.as_mut() {
                    tick.tick().await;
                }
                let (path, body) = if args.scenario == "conversations" {
                    match started_conversation.take() {
                        None => (
                            "/v1/conversations".to_string(),
                            json!({"actor_ids": [human, actor], "title": "bench"}),
                        ),
                        Some(c) => (
                            format!("/v1/conversations/{c}/messages"),
                            json!({"actor_id": human, "content": "hello from the benchmark"}),
                        ),
                    }
                } else if tasks.is_empty() {
                    (
                        format!("/v1/conversations/{conversation}/messages"),
                        json!({"actor_id": actor, "content": "hello from the benchmark"}),
                    )
                } else {
                    (
                        format!("/v1/tasks/{}/checkpoints", tasks[(w + n * 7) % tasks.len()]),
                        json!({"type": "WORK_STARTED"}),
                    )
                };
                n += 1;
                let t = Instant::now();
                match post(&client, &args, &path, &body).await {
                    Ok(created) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                        latencies.push(t.elapsed());
                        if path == "/v1/conversations" {
                            started_conversation = Some(id(&created));
                        }
                    }
                    Err(e) => {
                        if failed.fetch_add(1, Ordering::Relaxed) < 3 {
                            eprintln!("loadgen: {e}");
                        }
                    }
                }
            }
            latencies
        }));
    }
    let lag = args.measure_lag.then(|| {
        tokio::spawn(measure_lag(
            client.clone(),
            args.clone(),
            actor.clone(),
            conversation.clone(),
            stop.clone(),
        ))
    });
    let dispatch = args.measure_dispatch.then(|| {
        tokio::spawn(probe::measure_dispatch(
            client.clone(),
            args.base.clone(),
            args.token.clone(),
            stop.clone(),
        ))
    });
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let lag = match lag {
        Some(handle) => handle.await.map_err(|e| e.to_string())?,
        None => Value::Null,
    };
    let dispatch = match dispatch {
        Some(handle) => handle.await.map_err(|e| e.to_string())?,
        None => Value::Null,
    };
    let mut latencies = Vec::new();
    for w in workers {
        latencies.extend(w.await.map_err(|e| e.to_string())?);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let ok = ok.load(Ordering::Relaxed);
    println!(
        "{}",
        json!({
            "scenario": args.scenario,
            "concurrency": args.concurrency,
            "seconds": elapsed,
            "created": ok,
            "failed": failed.load(Ordering::Relaxed),
            "rate_per_s": ok as f64 / elapsed,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "read_model_lag": lag,
            "dispatch": dispatch,
        })
    );
    Ok(())
}
