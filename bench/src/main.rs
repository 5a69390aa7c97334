//! `pm-bench`: drives a running project-manager over HTTP with a realistic mix of
//! commands and queries at a chosen concurrency and duration, measures the raw
//! single-INSERT rate of the same PostgreSQL in the same run, and reports rates, the
//! ratio to raw, latencies, projection and saga lag, SSE delivery, errors and the
//! service's memory and CPU.
//!
//! ```sh
//! pm-bench --url http://127.0.0.1:8080 --database-url postgres://postgres@127.0.0.1/bench \
//!   --mix messages --concurrency 32 --duration 20s --subscribers 100 --json
//! ```
//!
//! The raw baseline runs first, alone, for the same duration and concurrency (see
//! [`raw`]); then the load. A progress line goes to stderr every second; the report to
//! stdout (one JSON object with `--json`).
//!
//! The `workers` mix (see [`workers`]) runs `--concurrency` workers over
//! `--conversations` conversations twice without `--rate`: at its peak, then at half of
//! the peak's turn cycles/s; two reports (two JSON lines), the raw rate measured once.
//! Its own anchor, a raw `FOR UPDATE SKIP LOCKED` job queue's cycles/s (see [`queue`]),
//! is measured once too, right after raw INSERT and as alone, so that the ratio of the
//! turn cycles to it is read from the same run.

mod mix;
mod probes;
mod process;
mod queue;
mod raw;
mod relay;
mod stats;
mod workers;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use pm_client::{Client, Position, RetryPolicy};
use serde::Serialize;

use mix::{Mix, Tally, Worker};
use stats::{round, Percentiles};

/// Command-line options.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The PostgreSQL the raw INSERT rate is measured on (a scratch table
    /// `pm_bench_raw` is created and dropped), and for `workers` the raw job queue's
    /// (`pm_bench_queue`); without it no ratio is reported.
    #[arg(long)]
    database_url: Option<String>,
    /// The workload.
    #[arg(long, value_enum, default_value = "messages")]
    mix: Mix,
    /// Concurrent workers (and raw INSERT and raw queue connections).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// How long the load (and the raw baseline) runs: `20s`, `2m`, `500ms`.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// SSE subscribers following the whole log during the load.
    #[arg(long, default_value_t = 0)]
    subscribers: usize,
    /// Total commands per second to aim at (0: as fast as the service answers).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// An admin token (the mixes use every role's commands and reads).
    #[arg(long, env = "PM_BENCH_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The service's pid for its RSS and CPU (default: the process listening on the
    /// URL's port, when it runs on this machine).
    #[arg(long)]
    pid: Option<u32>,
    /// Start every conversation in this organization (a token of some organizations must
    /// name one of its own; TRUST.md "Organizations").
    #[arg(long, env = "PM_BENCH_ORGANIZATION")]
    organization: Option<String>,
    /// Send commands without `Idempotency-Key` (pm-client's `idempotency_keys(false)`):
    /// the service skips the key's bookkeeping, as for an ingress service relying on
    /// derived ids.
    #[arg(long)]
    no_idempotency_keys: bool,
    /// Print one JSON object instead of the text report (one per phase: `workers`).
    #[arg(long)]
    json: bool,
    /// `workers`: conversations, each with at most one human message in flight
    /// (default: twice `--concurrency`). `--rate` is then turn cycles/s.
    #[arg(long)]
    conversations: Option<usize>,
    /// The tasks the `task-checkpoints` mix spreads its checkpoints over (and `read` reads):
    /// with `--concurrency` near it, commands on one task often wait for each other (one
    /// task's checkpoints are appended one after another).
    #[arg(long, default_value_t = 64,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    tasks: usize,
    /// The tasks have no assignee: no task turns, so the sagas record nothing for their
    /// checkpoints (by default they are the AI's, and each `WORK_STARTED` of
    /// `task-checkpoints` is a `saga.anomaly`: its turn is queued behind the AI's active one).
    #[arg(long)]
    unassigned_tasks: bool,
    /// `workers`: the claim's `wait_ms` (long-poll).
    #[arg(long, default_value_t = 1000)]
    wait_ms: u64,
    /// `workers`: the claim's `lease_ms`.
    #[arg(long, default_value_t = 30_000)]
    lease_ms: u64,
    /// `workers`: the conversation checkpoint that completes each turn.
    #[arg(long, value_enum, default_value = "begin-work")]
    checkpoint: workers::Checkpoint,
    /// The NATS the service relays to (its `PM_NATS_URL`): the report then has the relay's
    /// lag, the event's `time` to its receipt on `<--nats-prefix>.>`.
    #[arg(long)]
    nats_url: Option<String>,
    /// The relay's subject prefix (the service's `PM_NATS_SUBJECT_PREFIX`).
    #[arg(long, default_value = "pm")]
    nats_prefix: String,
}

fn parse_duration(raw: &str) -> Result<Duration, String> {
    let (n, unit) = raw
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((raw, "s"), |i| raw.split_at(i));
    let n: f64 = n
        .parse()
        .map_err(|_| format!("{raw:?}: expected e.g. 20s, 2m, 500ms"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("{raw:?}: the unit is ms, s or m")),
    };
    if !(0.1..=86_400.0).contains(&secs) {
        return Err(format!("{raw:?}: between 100ms and 24 h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The report.
#[derive(Debug, Serialize)]
struct Report {
    mix: Mix,
    idempotency_keys: bool,
    concurrency: usize,
    duration_s: f64,
    subscribers: usize,
    commands: u64,
    commands_per_s: f64,
    queries: u64,
    queries_per_s: f64,
    raw_inserts_per_s: Option<f64>,
    ratio: Option<f64>,
    latency_ms: Percentiles,
    query_latency_ms: Percentiles,
    projection_lag_ms: Percentiles,
    saga_lag_ms: Percentiles,
    saga_probes_missed: u64,
    sse_delivery_ms: Percentiles,
    /// The JetStream relay's lag, with `--nats-url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    relay_lag_ms: Option<Percentiles>,
    errors: BTreeMap<String, u64>,
    service: Option<process::Usage>,
    /// The `workers` mix's figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    workers: Option<workers::Figures>,
}

fn client(args: &Args) -> Result<Client, pm_client::Error> {
    let mut b = Client::builder(&args.url)
        .idempotency_keys(!args.no_idempotency_keys)
        .retry(RetryPolicy::none())
        .timeout(Duration::from_secs(30));
    if let Some(t) = &args.token {
        b = b.token(t);
    }
    b.build()
}

fn port_of(url: &str) -> Option<u16> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    match authority.rsplit_once(':') {
        Some((_, p)) => p.parse().ok(),
        None => Some(if url.starts_with("https") { 443 } else { 80 }),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if let Some(raw) = &args.organization {
        match pm_client::label(raw.as_str()) {
            // Set once, before any mix runs.
            Ok(organization) => {
                let _ = mix::ORGANIZATION.set(organization);
            }
            Err(e) => return Err(format!("--organization: {e}").into()),
        }
    }
    let c = client(&args)?;
    let anchors = measure_anchors(&args).await?;
    eprintln!("setting up the bench world at {}", args.url);
    let world = mix::world(&c, args.tasks, !args.unassigned_tasks).await?;
    if args.mix != Mix::Workers {
        let head = log_head(&c, &world).await?;
        let report = load(&args, &c, &world, head, anchors, args.rate, None).await?;
        return emit(&args, &report);
    }
    let n = args.conversations.unwrap_or(2 * args.concurrency);
    eprintln!("setting up {n} conversations of a person and the AI");
    let conversations = workers::setup(&c, world.ai, n).await?;
    let phase = if args.rate > 0.0 {
        workers::Phase::Rate
    } else {
        workers::Phase::Peak
    };
    let turns = Some((conversations.as_slice(), phase));
    let head = log_head(&c, &world).await?;
    let report = load(&args, &c, &world, head, anchors, args.rate, turns).await?;
    emit(&args, &report)?;
    if phase == workers::Phase::Peak {
        let half = report
            .workers
            .as_ref()
            .map_or(0.0, |w| w.cycles_per_s / 2.0);
        if half <= 0.0 {
            return Err("no turn cycle completed at the peak: no half-peak run".into());
        }
        eprintln!("half of the peak: {half:.1} turn cycles/s");
        let turns = Some((conversations.as_slice(), workers::Phase::HalfPeak));
        let head = log_head(&c, &world).await?;
        let report = load(&args, &c, &world, head, anchors, half, turns).await?;
        emit(&args, &report)?;
    }
    Ok(())
}

/// The rates of PostgreSQL alone a run is read against, measured before any load.
#[derive(Debug, Clone, Copy, Default)]
struct Anchors {
    /// Raw INSERT/s.
    inserts: Option<f64>,
    /// Raw queue cycles/s (`workers` only).
    queue: Option<f64>,
}

/// Measures the anchors one after the other (each alone), with `--database-url`.
async fn measure_anchors(args: &Args) -> Result<Anchors, sqlx::Error> {
    let Some(url) = &args.database_url else {
        return Ok(Anchors::default());
    };
    eprintln!(
        "raw INSERT baseline: {} connections for {:?}",
        args.concurrency, args.duration
    );
    let inserts = Some(raw::measure(url, args.concurrency, args.duration).await?);
    if args.mix != Mix::Workers {
        return Ok(Anchors {
            inserts,
            queue: None,
        });
    }
    eprintln!(
        "raw queue baseline (FOR UPDATE SKIP LOCKED): {} connections for {:?}, {} jobs",
        args.concurrency,
        args.duration,
        queue::backlog(args.duration, args.concurrency)
    );
    let queue = Some(queue::measure(url, args.concurrency, args.duration).await?);
    Ok(Anchors { inserts, queue })
}

/// The log's head now: the position of a message posted for it.
async fn log_head(c: &Client, world: &mix::World) -> Result<Position, Box<dyn std::error::Error>> {
    Ok(
        c.add_message(world.conversation, mix::message(world.ai, None))
            .await?
            .position
            .ok_or("the service answered a command without X-Event-Position")?,
    )
}

fn emit(args: &Args, report: &Report) -> Result<(), Box<dyn std::error::Error>> {
    if args.json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        print_text(report);
    }
    Ok(())
}

/// What drives the load: the mix's workers, or the `workers` mix's ingress and workers.
enum Driver {
    Steps(Vec<tokio::task::JoinHandle<Tally>>),
    Turns(tokio::task::JoinHandle<workers::Outcome>),
}

/// One run of `rate` (0: as fast as it goes); `turns`: the `workers` mix's conversations
/// and phase.
async fn load(
    args: &Args,
    c: &Client,
    world: &mix::World,
    head: Position,
    anchors: Anchors,
    rate: f64,
    turns: Option<(&[workers::Conversation], workers::Phase)>,
) -> Result<Report, Box<dyn std::error::Error>> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let pid = args
        .pid
        .or_else(|| port_of(&args.url).and_then(process::listening_on));
    let usage = pid.map(|pid| tokio::spawn(process::watch(pid, stop.clone())));
    let lag = tokio::spawn(probes::projection_lag(
        c.clone(),
        world.clone(),
        stop.clone(),
    ));
    let sagas = tokio::spawn(probes::saga_lag(
        c.clone(),
        world.clone(),
        head.clone(),
        stop.clone(),
    ));
    let relay = args.nats_url.clone().map(|url| {
        tokio::spawn(relay::relay_lag(
            url,
            args.nats_prefix.clone(),
            stop.clone(),
        ))
    });
    let subs = (args.subscribers > 0).then(|| {
        tokio::spawn(probes::subscribers(
            c.clone(),
            args.subscribers,
            head.clone(),
            stop.clone(),
        ))
    });
    let settings = workers::Settings {
        workers: args.concurrency,
        wait_ms: args.wait_ms,
        lease_ms: args.lease_ms,
        checkpoint: args.checkpoint,
    };
    let started = Instant::now();
    let driver = match turns {
        Some((conversations, _)) => Driver::Turns(tokio::spawn(workers::drive(
            c.clone(),
            settings.clone(),
            conversations.to_vec(),
            world.ai,
            rate,
            stop.clone(),
            done.clone(),
            failed.clone(),
        ))),
        None => Driver::Steps(steps(args, c, world, rate, &stop, &done, &failed)),
    };
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    while started.elapsed() < args.duration {
        tokio::time::sleep(Duration::from_secs(1).min(args.duration)).await;
        let (n, e, s) = (
            done.load(Ordering::Relaxed),
            failed.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64(),
        );
        let line = format!(
            "{:>5.1}s/{:.0}s  {n} requests  {:.0}/s  {e} errors",
            s,
            args.duration.as_secs_f64(),
            n as f64 / s
        );
        if interactive {
            eprint!("\r{line}   ");
        } else {
            eprintln!("{line}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    if interactive {
        eprintln!();
    }
    let (tally, figures) = match driver {
        Driver::Steps(steps) => {
            let mut tally = Tally::default();
            for w in steps {
                tally.merge(w.await?);
            }
            (tally, None)
        }
        Driver::Turns(run) => {
            let outcome = run.await?;
            let (conversations, phase) = turns.unwrap_or((&[], workers::Phase::Peak));
            let figures = outcome
                .figures(&settings, conversations.len(), phase, rate, elapsed)
                .against_queue(anchors.queue);
            (outcome.tally, Some(figures))
        }
    };
    let lag = lag.await?;
    let (saga, missed) = sagas.await?;
    let sse = match subs {
        Some(s) => s.await?,
        None => stats::Samples::default(),
    };
    let service = match usage {
        Some(u) => u.await?,
        None => None,
    };
    let relay_lag_ms = match relay {
        Some(r) => Some(r.await?.percentiles()),
        None => None,
    };
    let commands_per_s = round(tally.commands as f64 / elapsed);
    Ok(Report {
        mix: args.mix,
        idempotency_keys: !args.no_idempotency_keys,
        concurrency: args.concurrency,
        duration_s: round(elapsed),
        subscribers: args.subscribers,
        commands: tally.commands,
        commands_per_s,
        queries: tally.queries,
        queries_per_s: round(tally.queries as f64 / elapsed),
        raw_inserts_per_s: anchors.inserts.map(round),
        ratio: stats::ratio(commands_per_s, anchors.inserts),
        latency_ms: tally.command_ms.percentiles(),
        query_latency_ms: tally.query_ms.percentiles(),
        projection_lag_ms: lag.percentiles(),
        saga_lag_ms: saga.percentiles(),
        saga_probes_missed: missed,
        sse_delivery_ms: sse.percentiles(),
        relay_lag_ms,
        errors: tally.errors,
        service,
        workers: figures,
    })
}

/// The workers of a role-driven mix, each sending its role's next request until `stop`,
/// together at most `rate` requests/s (0: as fast as the service answers).
fn steps(
    args: &Args,
    c: &Client,
    world: &mix::World,
    rate: f64,
    stop: &Arc<AtomicBool>,
    done: &Arc<AtomicU64>,
    failed: &Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<Tally>> {
    (0..args.concurrency)
        .map(|i| {
            let (c, world, stop, done, failed) = (
                c.clone(),
                world.clone(),
                stop.clone(),
                done.clone(),
                failed.clone(),
            );
            let role = args.mix.role(i);
            let n = args.concurrency as f64;
            let every =
                (rate > 0.0).then(|| Duration::from_secs_f64(args.concurrency as f64 / rate));
            tokio::spawn(async move {
                let mut tally = Tally::default();
                let mut worker = Worker::default();
                let mut pace = every.map(|every| {
                    let offset = every.mul_f64(i as f64 / n);
                    let mut t =
                        tokio::time::interval_at(tokio::time::Instant::now() + offset, every);
                    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    t
                });
                while !stop.load(Ordering::Relaxed) {
                    if let Some(t) = pace.as_mut() {
                        t.tick().await;
                    }
                    if worker.step(i, role, &c, &world, &mut tally).await {
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                tally
            })
        })
        .collect()
}

fn print_workers(w: &workers::Figures, p: &dyn Fn(&Percentiles) -> String) {
    let aim = w
        .target_cycles_per_s
        .map_or_else(String::new, |t| format!(" (aiming at {t}/s)"));
    println!(
        "workers: {:?}, {} workers, {} conversations, {:?} checkpoints",
        w.phase, w.workers, w.conversations, w.checkpoint_type
    );
    println!("turn cycles: {} = {}/s{aim}", w.cycles, w.cycles_per_s);
    if let (Some(queue), Some(ratio)) = (w.raw_queue_cycles_per_s, w.queue_ratio) {
        println!(
            "  raw queue (FOR UPDATE SKIP LOCKED): {queue} cycles/s   ratio {:.1}%",
            ratio * 100.0
        );
    }
    println!("  message -> claim: {}", p(&w.message_to_claim_ms));
    println!("  message answered -> claim: {}", p(&w.ack_to_claim_ms));
    println!(
        "  cycle (message -> checkpoint answered): {}",
        p(&w.cycle_ms)
    );
    println!("  claim: {}", p(&w.claim_ms));
    println!("  human message: {}", p(&w.human_message_ms));
    println!("  fenced AI message: {}", p(&w.fenced_message_ms));
    println!("  fenced checkpoint: {}", p(&w.fenced_checkpoint_ms));
    println!(
        "  claims {} (+{} empty long-polls), foreign turns {}, lost turns {}",
        w.claims, w.empty_claims, w.foreign_turns, w.lost_turns
    );
    if let Some(met) = w.target_met {
        println!(
            "target: message -> claim p99 < {} ms at half of the peak: {} (p99 {} ms)",
            workers::TARGET_P99_MS,
            if met { "met" } else { "MISSED" },
            w.message_to_claim_ms.p99
        );
    }
}

fn print_text(r: &Report) {
    let p = |x: &Percentiles| {
        format!(
            "p50 {} / p90 {} / p99 {} / max {} ms ({})",
            x.p50, x.p90, x.p99, x.max, x.count
        )
    };
    println!(
        "mix {:?}, concurrency {}, {} s",
        r.mix, r.concurrency, r.duration_s
    );
    println!(
        "commands: {} = {}/s   latency {}",
        r.commands,
        r.commands_per_s,
        p(&r.latency_ms)
    );
    if let Some(w) = &r.workers {
        print_workers(w, &p);
    }
    if r.queries > 0 {
        println!(
            "queries: {} = {}/s   latency {}",
            r.queries,
            r.queries_per_s,
            p(&r.query_latency_ms)
        );
    }
    if let (Some(raw), Some(ratio)) = (r.raw_inserts_per_s, r.ratio) {
        println!("raw INSERT: {raw}/s   ratio {:.1}%", ratio * 100.0);
    }
    println!("projection lag: {}", p(&r.projection_lag_ms));
    println!(
        "saga lag (message -> dispatched turn on SSE): {} ({} missed)",
        p(&r.saga_lag_ms),
        r.saga_probes_missed
    );
    if r.subscribers > 0 {
        println!(
            "SSE delivery to {} subscribers: {}",
            r.subscribers,
            p(&r.sse_delivery_ms)
        );
    }
    println!("errors: {:?}", r.errors);
    match &r.service {
        Some(u) => println!(
            "service pid {}: peak RSS {} MiB (end {} MiB), CPU {}% of a core",
            u.pid, u.peak_rss_mib, u.end_rss_mib, u.cpu_percent
        ),
        None => println!("service: not on this machine (or --pid not given)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_ports() {
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert!(parse_duration("5h").is_err());
        assert!(parse_duration("0s").is_err());
        assert_eq!(port_of("http://127.0.0.1:18090"), Some(18090));
        assert_eq!(port_of("http://localhost/x"), Some(80));
    }
}
