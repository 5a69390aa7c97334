//! Load generator for the command API: `concurrency` workers post commands over
//! keep-alive connections for `seconds`, then it prints one JSON line with the rate of
//! `201 Created` answers and latency percentiles. Used by `bench/run.sh`, which measures
//! the raw PostgreSQL single-INSERT rate in the same run.
//!
//! Scenarios: `messages` (MessageAdded on one conversation: a new aggregate per command)
//! and `task-checkpoints` (TaskCheckpointCreated spread over 64 tasks: appends to
//! existing aggregates).

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
    } else if args.scenario != "messages" {
        return Err(format!("unknown scenario {}", args.scenario));
    }
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
        let (actor, conversation) = (actor.clone(), conversation.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let (path, body) = if tasks.is_empty() {
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
                    Ok(_) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                        latencies.push(t.elapsed());
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
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
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
        })
    );
    Ok(())
}
