//! The LLM service as a fleet of workers: `--workers N` (or `PM_WORKERS`; default 4)
//! [`Worker`]s in one process, each looping claim → answer → next over the turns of its
//! assistant's agents (WORKERS.md):
//!
//! - a **conversation turn** answering a human message: an AI reply and a `BEGIN_WORK`
//!   checkpoint, both fenced by the claim (the checkpoint completes the turn), then a task
//!   for the assistant (unfenced: the turn has ended);
//! - an **auto-decide turn** (the user did not answer in time): a fenced reply and a
//!   fenced `BEGIN_WORK` checkpoint;
//! - a **task turn** (for the task's assignee), in two claims: first `WORK_STARTED`
//!   (fenced), then the "model" asks to run the tool `run_checks`, which **needs a
//!   person's approval** — because the service's tool policy `run-checks` says so (set at
//!   start with `PM_ADMIN_TOKEN`; without it, `PM_TOOL_DEFAULT_ACTION`'s default
//!   `require_approval` holds), not because the worker asks: it reports the call as
//!   needing none. The turn waits for it (`tool_executing`; the claim ends, the worker
//!   goes on to other turns). Once approved (run the `approver` example with an admin or ingress token),
//!   this process's [`Executor`] runs the call — reporting its output as it goes — and
//!   reports its result; the turn is claimable again, and the worker that claims it finds
//!   the call with its result in the claim's context, reports `WORK_COMPLETED` (completes
//!   the turn), fenced, and reads the task back at once (read-your-writes). A denied call
//!   (or one whose approval timed out, `PM_TOOL_APPROVAL_TIMEOUT_SECS`) comes back with
//!   that result instead, and the task is completed without the checks.
//!
//! The lease of each claimed turn is renewed in the background while it is worked. A turn
//! taken away meanwhile (`409 turn_fenced`: lease expired, an operator interrupted it) is
//! dropped; a failure is reported as the turn's error, or the turn is released when the
//! failure is transient. Ctrl-C stops the fleet: every held turn is released, so another
//! process claims it at once.
//!
//! ```sh
//! PM_URL=http://127.0.0.1:8080 PM_TOKEN=<llm token> PM_ADMIN_TOKEN=<admin token> \
//!   cargo run -p pm-client --example llm_service -- --workers 4 --max-turns 6 --idle-secs 10
//! # meanwhile, to approve the tool calls:
//! PM_TOKEN=<admin token> cargo run -p pm-client --example approver -- --idle-secs 10
//! ```
//!
//! Stops on Ctrl-C, after `--max-turns` turns completed, after `--timeout-secs`, or after
//! `--idle-secs` without a turn or a tool call being worked; `--lease-secs` sets the lease
//! (default 30), `--think-ms` how long the "model" takes per turn (default 0),
//! `--tool-ms` how long the tool runs (default 200).
//!
//! The assistant is the `ai` actor the ingress registered with the external identity
//! `example:assistant` and made a participant of the conversation, so the conversation's
//! root agent acts for it; its id is derived offline, and the workers claim only its
//! agents' turns. A turn is claimed by one worker at a time and a completed turn is never
//! claimed again, so running the example again writes nothing new.

mod common;

use common::{arg, secs};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pm_client::{
    codes, ids, label, text, AddMessageInput, CheckpointType, Client,
    CreateConversationCheckpointInput, CreateTaskCheckpointInput, CreateTaskInput, Error, Executor,
    PolicyAction, TaskCheckpointType, ToolCall, ToolCallView, ToolPolicyInput, ToolResult, ToolRun,
    ToolStatus, TurnHandle, TurnInput, Uuid, Worker,
};

/// The tool the "model" asks for on task turns.
const TOOL: &str = "run_checks";

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// What the fleet did, shared by its workers.
#[derive(Default)]
struct Tally {
    /// Turns still allowed to be claimed (`--max-turns`).
    budget: AtomicUsize,
    messages: AtomicUsize,
    decisions: AtomicUsize,
    tasks: AtomicUsize,
    /// Tool calls reported by the workers, and run by the executor.
    tool_calls: AtomicUsize,
    executed: AtomicUsize,
    /// Turns being worked now, and when the last one started or ended.
    busy: AtomicUsize,
    last_activity: Mutex<Option<Instant>>,
}

impl Tally {
    /// Reserves one turn of the budget.
    fn reserve(&self) -> bool {
        self.budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1))
            .is_ok()
    }

    fn give_back(&self) {
        self.budget.fetch_add(1, Ordering::SeqCst);
    }

    fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// Whether no turn was worked for `idle` (counted from `since` before the first).
    fn idle_for(&self, idle: Duration, since: Instant) -> bool {
        let last = self
            .last_activity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or(since);
        self.busy.load(Ordering::SeqCst) == 0 && last.elapsed() >= idle
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let client = Client::from_env()?;
    let size: usize = arg("--workers")
        .or_else(|| std::env::var("PM_WORKERS").ok())
        .map_or(Ok(4), |n| n.parse())?;
    let max_turns: Option<usize> = arg("--max-turns").map(|n| n.parse()).transpose()?;
    let (timeout, idle) = (secs("--timeout-secs")?, secs("--idle-secs")?);
    let lease = secs("--lease-secs")?.unwrap_or(Duration::from_secs(30));
    let think = Duration::from_millis(arg("--think-ms").map_or(Ok(0), |n| n.parse())?);
    let tool_time = Duration::from_millis(arg("--tool-ms").map_or(Ok(200), |n| n.parse())?);

    set_policy().await?;
    let assistant = ids::actor_id("example:assistant");
    let me = client.read().actor(assistant).await.map_err(|e| {
        format!("the assistant {assistant} is not registered (run the ingress example): {e}")
    })?;
    println!(
        "{size} workers working turns as {} ({})",
        me.display_name.as_str(),
        me.id
    );

    let tally = Arc::new(Tally {
        budget: AtomicUsize::new(max_turns.unwrap_or(usize::MAX)),
        ..Tally::default()
    });
    let mut fleet = Vec::new();
    let mut loops = tokio::task::JoinSet::new();
    for i in 0..size.max(1) {
        let worker = Worker::builder(client.clone(), format!("llm-{}-{i}", std::process::id()))
            .actor_id(assistant)
            .lease(lease)
            .wait(Duration::from_secs(5))
            .build()?;
        fleet.push(worker.clone());
        loops.spawn(work(worker, assistant, think, tally.clone()));
    }
    // The executor of the workers' tool: runs each approved call once, in the background.
    let executor = Executor::builder(client.clone())
        .tools([TOOL])
        .interval(Duration::from_millis(200))
        .build()?;
    let executing = tokio::spawn({
        let (executor, tally) = (executor.clone(), tally.clone());
        async move {
            executor
                .run(move |call, run| run_checks(call, run, tool_time, tally.clone()))
                .await
        }
    });

    let started = Instant::now();
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    let idle_watch = async {
        let Some(idle) = idle else {
            return std::future::pending().await;
        };
        while !tally.idle_for(idle, started) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let why = tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C".to_string(),
        () = deadline => format!("no more turns within {timeout:?}"),
        () = idle_watch => format!("idle for {idle:?}"),
        // Every loop ended: the budget is spent (or a worker failed for good).
        () = async { while loops.join_next().await.is_some() {} } => "done".to_string(),
    };
    // Stop every worker's claims first (and let the claims in flight answer), so no
    // worker claims a turn another releases.
    for worker in &fleet {
        worker.close();
    }
    futures::future::join_all(fleet.iter().map(Worker::settle)).await;
    let mut released = 0;
    for worker in &fleet {
        released += worker.shutdown().await;
    }
    while let Some(ended) = loops.join_next().await {
        if let Ok(Err(e)) = ended {
            eprintln!("a worker stopped: {e}");
        }
    }
    // The executor last: running calls get their grace to report.
    let abandoned = executor.shutdown().await;
    if let Ok(Err(e)) = executing.await {
        eprintln!("the executor stopped: {e}");
    }
    println!("stopping ({why}): released {released} turn(s), abandoned {abandoned} tool call(s)");
    let load = |n: &AtomicUsize| n.load(Ordering::SeqCst);
    println!(
        "llm_service done: worked {} message turns and {} task turns ({} auto-decisions); {} tool calls reported, {} run",
        load(&tally.messages),
        load(&tally.tasks),
        load(&tally.decisions),
        load(&tally.tool_calls),
        load(&tally.executed),
    );
    Ok(())
}

/// The executor's handler for [`TOOL`]: "runs the checks" of a task for `time`, reporting
/// its output as it goes, unless the call ends meanwhile (its turn interrupted, its
/// execution timed out).
async fn run_checks(
    call: ToolCallView,
    run: ToolRun,
    time: Duration,
    tally: Arc<Tally>,
) -> ToolResult {
    tally.busy.fetch_add(1, Ordering::SeqCst);
    tally.touch();
    let instructions = call.arguments["instructions"]
        .as_str()
        .unwrap_or("the task");
    // Progress is for people watching; a failed report does not stop the tool.
    let _ = run
        .stdout(&format!("running 3 checks for: {instructions}\n"))
        .await;
    let result = tokio::select! {
        () = tokio::time::sleep(time) => {
            let _ = run.stdout("3 checks passed\n").await;
            tally.executed.fetch_add(1, Ordering::SeqCst);
            println!("executor: ran {TOOL} call {} (turn {})", call.call_id, call.turn_id);
            ToolResult::success(serde_json::json!({"checks": 3, "passed": 3}))
        }
        () = run.ended() => ToolResult::cancelled(Some("the call ended".into())),
    };
    tally.busy.fetch_sub(1, Ordering::SeqCst);
    tally.touch();
    result
}

/// One worker's loop: claim, work, next — until the budget is spent or the fleet stops.
async fn work(
    worker: Worker,
    assistant: Uuid,
    think: Duration,
    tally: Arc<Tally>,
) -> std::result::Result<(), Error> {
    while tally.reserve() {
        let Some(turn) = worker.next().await? else {
            tally.give_back();
            return Ok(());
        };
        tally.busy.fetch_add(1, Ordering::SeqCst);
        tally.touch();
        let id = turn.turn().id;
        match work_turn(&turn, assistant, think).await {
            Ok(Worked::Completed(counter)) => {
                counter(&tally).fetch_add(1, Ordering::SeqCst);
                turn.finish();
            }
            Ok(Worked::WaitsForTools(calls)) => {
                // Not completed: the turn comes back (to some worker) with the results.
                tally.tool_calls.fetch_add(calls, Ordering::SeqCst);
                tally.give_back();
            }
            Err(e) if e.code() == Some(codes::TURN_FENCED) => {
                println!("{}: turn {id} was taken away ({e})", worker.name());
                tally.give_back();
            }
            Err(e) if e.is_retryable() => {
                println!("{}: turn {id} released after {e}", worker.name());
                let _ = turn.release(Some("transient_failure")).await;
                tally.give_back();
            }
            Err(e) => {
                println!("{}: turn {id} failed: {e}", worker.name());
                let _ = turn.report_error("worker_error", &e.to_string()).await;
            }
        }
        tally.busy.fetch_sub(1, Ordering::SeqCst);
        tally.touch();
    }
    Ok(())
}

/// Which counter a worked turn adds to.
type Counter = fn(&Tally) -> &AtomicUsize;

/// How a claim of a turn ended.
enum Worked {
    /// The turn completed: count it here.
    Completed(Counter),
    /// The turn waits for this many tool calls; the claim ended.
    WaitsForTools(usize),
}

/// Works one claimed turn to its completing command, or to the tool calls it waits for,
/// after `think` (the model at work; the lease is renewed meanwhile).
async fn work_turn(
    turn: &TurnHandle,
    assistant: Uuid,
    think: Duration,
) -> std::result::Result<Worked, Error> {
    // The "model" at work, given up when the turn is taken away (or the fleet stops).
    tokio::select! {
        () = tokio::time::sleep(think) => {}
        gone = turn.ended() => return Err(gone),
    }
    match turn.turn().input {
        TurnInput::Message { message_id } => {
            answer_message(turn, assistant, message_id).await?;
            Ok(Worked::Completed(|t| &t.messages))
        }
        TurnInput::AutoDecide { .. } => {
            let reply = "No answer yet, so I am going ahead with the plan.";
            let reply_id = format!("decision-in-{}", turn.turn().id);
            decide(turn, assistant, (reply, reply_id), "Went ahead").await?;
            Ok(Worked::Completed(|t| &t.decisions))
        }
        TurnInput::Task { task_id }
        | TurnInput::TaskRetry { task_id, .. }
        | TurnInput::TaskResume { task_id, .. } => {
            if turn.tool_calls().is_empty() {
                let calls = start_task(turn, task_id).await?;
                return Ok(Worked::WaitsForTools(calls));
            }
            work_task(turn, task_id).await?;
            Ok(Worked::Completed(|t| &t.tasks))
        }
    }
}

/// The idempotency key of a fenced write: one claim's (a key reused by a later claim of
/// the turn would get a refusal the service kept for this one).
fn key(what: &str, turn: &TurnHandle) -> String {
    format!("llm-{what}-{}-{}", turn.turn().id, turn.epoch())
}

/// A fenced reply (keyed by `reply_id`, an external identity: a repeat finds it) and a
/// fenced `BEGIN_WORK` checkpoint (which completes the turn).
async fn decide(
    turn: &TurnHandle,
    assistant: Uuid,
    (reply, reply_id): (&str, String),
    summary: &str,
) -> std::result::Result<pm_client::Written<pm_client::ConversationCheckpointCreated>, Error> {
    let said = turn
        .add_message(AddMessageInput {
            actor_id: assistant,
            content: text(reply)?,
            task_id: None,
            external_identity: Some(label(reply_id)?),
            time: None,
        })
        .await?;
    // … the model's tokens, reported as they are spent …
    let words = |s: &str| s.split_whitespace().count() as u64;
    turn.report_usage(words(summary) * 4, words(reply) * 4)
        .await?;
    let decision = turn
        .create_conversation_checkpoint(CreateConversationCheckpointInput {
            checkpoint_type: CheckpointType::BeginWork,
            summary: text(summary)?,
        })
        .idempotency_key(key("begin-work", turn))
        .await?;
    println!(
        "worked turn {} (epoch {}): reply {} ({:?}), checkpoint {}",
        turn.turn().id,
        turn.epoch(),
        said.entity.id,
        said.status,
        decision.entity.id
    );
    Ok(decision)
}

/// A conversation turn: reply and decide `BEGIN_WORK` (fenced), then create a task.
async fn answer_message(
    turn: &TurnHandle,
    assistant: Uuid,
    message_id: Uuid,
) -> std::result::Result<(), Error> {
    let conversation = turn.turn().conversation_id;
    let message = match &turn.context().message {
        Some(message) => message.clone(),
        None => {
            turn.client()
                .read()
                .message(conversation, message_id)
                .await?
        }
    };
    let asked = message.content.as_str();
    let reply = format!("On it: {asked}");
    let reply_id = format!("reply-to-{}", message.id);
    let summary = format!("User asked: {asked}");
    let decision = decide(turn, assistant, (&reply, reply_id), &summary).await?;
    // The checkpoint completed the turn: the task is an ordinary command, keyed by the turn.
    let task = turn
        .client()
        .create_task(
            conversation,
            CreateTaskInput {
                checkpoint_id: decision.entity.id,
                instructions: text(format!("Handle: {asked}"))?,
                assigned_to: Some(assistant),
            },
        )
        .idempotency_key(format!("llm-task-{}", turn.turn().id))
        .await?;
    println!("  for message {}: task {}", message.id, task.entity.id);
    Ok(())
}

/// The operator's rule for the example's tool (with `PM_ADMIN_TOKEN`): every `run_checks`
/// call waits for a person, whatever a worker — or a model talked into it — says.
async fn set_policy() -> Result<()> {
    let Some(token) = std::env::var("PM_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    else {
        println!("no PM_ADMIN_TOKEN: {TOOL} calls wait for approval under the default action");
        return Ok(());
    };
    let url = std::env::var("PM_URL").unwrap_or_else(|_| pm_client::DEFAULT_URL.into());
    let admin = Client::builder(url).token(token).build()?;
    let policy = ToolPolicyInput {
        tools: TOOL.into(),
        action: PolicyAction::RequireApproval,
        approvers: None,
        organizations: None,
        reason: Some("runs the project's checks on the task's branch".into()),
    };
    admin.set_tool_policy("run-checks", &policy).await?;
    println!("tool policy run-checks: every {TOOL} call waits for an approver");
    Ok(())
}

/// A task turn's first claim: report `WORK_STARTED`, then ask for the tool (it needs a
/// person's approval). The report ends the claim: the turn waits for the call's result.
/// Answers how many calls it waits for.
async fn start_task(turn: &TurnHandle, task_id: Uuid) -> std::result::Result<usize, Error> {
    turn.create_task_checkpoint(
        task_id,
        CreateTaskCheckpointInput {
            checkpoint_type: TaskCheckpointType::WorkStarted,
        },
    )
    .idempotency_key(key("work-started", turn))
    .await?;
    let instructions = turn
        .context()
        .task
        .as_ref()
        .map(|t| t.task.task.instructions.as_str().to_string())
        .unwrap_or_default();
    // The call's id is the turn's: a report retried after a lost answer is the same batch.
    let call = ToolCall::new(
        format!("checks-{}", turn.turn().id),
        TOOL,
        serde_json::json!({"task_id": task_id, "instructions": instructions}),
    )
    .timeout(Duration::from_secs(60));
    let suspended = turn.report_tool_calls(call).await?;
    println!(
        "turn {} (epoch {}) for task {task_id} waits for {} tool call(s) ({})",
        turn.turn().id,
        turn.epoch(),
        suspended.view.tool_calls.len(),
        suspended.view.state,
    );
    Ok(suspended.view.tool_calls.len())
}

/// A task turn resumed with its tool's result: report `WORK_COMPLETED` (the turn completes
/// and the agent's next turn is dispatched), then read the task back. Without the checks
/// (denied, timed out) the task is completed all the same — a real model would say so.
async fn work_task(turn: &TurnHandle, task_id: Uuid) -> std::result::Result<(), Error> {
    let outcome: Vec<String> = turn
        .tool_calls()
        .iter()
        .map(|c| match &c.result {
            Some(r) if r.status == ToolStatus::Success => format!(
                "{} {}: {}",
                c.tool_name,
                r.status,
                r.output.clone().unwrap_or_default()
            ),
            Some(r) => format!(
                "{} {}: {}",
                c.tool_name,
                r.status,
                r.reason.as_deref().or(r.error.as_deref()).unwrap_or("-")
            ),
            None => format!("{} {} without a result", c.tool_name, c.state),
        })
        .collect();
    let completed = turn
        .create_task_checkpoint(
            task_id,
            CreateTaskCheckpointInput {
                checkpoint_type: TaskCheckpointType::WorkCompleted,
            },
        )
        .idempotency_key(key("work-completed", turn))
        .await?;
    let view = turn.client().after(&completed).task(task_id).await?;
    println!(
        "worked turn {} (epoch {}) for task {}: {} with {} checkpoint(s) [{}]",
        turn.turn().id,
        turn.epoch(),
        task_id,
        view.task.status,
        view.checkpoints.len(),
        outcome.join("; "),
    );
    Ok(())
}
