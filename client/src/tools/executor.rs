//! [`Executor`]: the tool executor's loop of WORKERS.md — find the executing calls, run
//! each once with the program's handler, report its output as it comes and its one
//! result — so an executor program is one handler and a call of [`Executor::run`].
//!
//! Why a type for it: the details every executor would otherwise write again — polling
//! without running a call twice (while it runs, and while the service's lists still show
//! it after its result), a bounded number of calls at once, reporting a result until the
//! service has it (the same result again is only acknowledged), dropping the result of a
//! call that ended meanwhile (`409 tool_call_terminal`: cancelled, timed out) instead of
//! failing, telling a handler that its call ended, and stopping cleanly.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, TryStreamExt};
use pm_api_types::views::ToolCallView;
use pm_domain::saga::{ToolCallState, ToolStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use uuid::Uuid;

use super::is_call_over;
use crate::retry::jitter;
use crate::{Client, Error, ToolCallQuery, ToolResult};

/// A call, as the executor keys it.
type Key = (Uuid, String);

/// A tool executor (role `llm`): runs the calls that are `executing` — approved, or not
/// needing approval — with a handler of the program's, and reports their progress and
/// results.
///
/// Cheap to clone (clones are the same executor: [`shutdown`](Executor::shutdown) on one
/// stops them all).
///
/// ```no_run
/// # async fn run(client: pm_client::Client) -> Result<(), pm_client::Error> {
/// use pm_client::{Executor, ToolResult};
///
/// let executor = Executor::builder(client).tools(["shell"]).build()?;
/// let stop = executor.clone();
/// tokio::spawn(async move {
///     let _ = tokio::signal::ctrl_c().await;
///     stop.shutdown().await; // run() returns once the running calls finished
/// });
/// executor
///     .run(|call, run| async move {
///         let _ = run.stdout(&format!("running {}\n", call.arguments)).await;
///         // … run the tool …
///         ToolResult::success(serde_json::json!({"exit_code": 0}))
///     })
///     .await?;
/// # Ok(()) }
/// ```
///
/// **At least once.** The service does not lease calls to executors: a call is run once
/// per executor, but two executors that both take it run it twice (the second result is
/// refused with `tool_call_terminal` and dropped), and a call abandoned by a stopping
/// executor is run again by the next one that finds it `executing`. Give each executor
/// its own tools ([`ExecutorBuilder::tools`]) or conversations, or make tools idempotent.
#[derive(Debug, Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    query: ToolCallQuery,
    tools: Option<HashSet<String>>,
    interval: Duration,
    concurrency: usize,
    grace: Duration,
    /// `true` once shut down.
    closed: watch::Sender<bool>,
    /// Runs of [`Executor::run`] going on: 0 or 1.
    runs: watch::Sender<usize>,
    /// Calls left running at a stop, since the last [`Executor::shutdown`] answered.
    abandoned: AtomicUsize,
}

/// Configures an [`Executor`]; see [`Executor::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ExecutorBuilder {
    client: Client,
    query: ToolCallQuery,
    tools: Option<HashSet<String>>,
    interval: Duration,
    concurrency: usize,
    grace: Duration,
}

impl ExecutorBuilder {
    /// Only calls of these tools (default: every tool). Calls of other tools are left to
    /// other executors.
    pub fn tools<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Only calls of this conversation's turns.
    pub fn conversation_id(mut self, id: Uuid) -> Self {
        self.query = self.query.conversation_id(id);
        self
    }

    /// Only calls of this turn.
    pub fn turn_id(mut self, id: Uuid) -> Self {
        self.query = self.query.turn_id(id);
        self
    }

    /// How often the executor looks for executing calls (default 500 ms): the longest a
    /// call waits to start while the executor has room.
    pub fn interval(mut self, every: Duration) -> Self {
        self.interval = every;
        self
    }

    /// How many calls run at once (default 8); more wait for a free place, oldest first.
    pub fn concurrency(mut self, calls: usize) -> Self {
        self.concurrency = calls;
        self
    }

    /// How long a stop waits for running calls to finish and report (default 10 s); the
    /// ones still running then are abandoned (see [`Executor::shutdown`]).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The executor.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a concurrency of 0, an interval under 10 ms, or an
    /// empty list of tools (it would never run anything).
    pub fn build(self) -> Result<Executor, Error> {
        if self.concurrency == 0 {
            return Err(Error::InvalidInput(
                "executor concurrency: at least 1".into(),
            ));
        }
        if self.interval < Duration::from_millis(10) {
            return Err(Error::InvalidInput(format!(
                "executor interval {:?}: at least 10 ms",
                self.interval
            )));
        }
        if self.tools.as_ref().is_some_and(HashSet::is_empty) {
            return Err(Error::InvalidInput("executor tools: none given".into()));
        }
        Ok(Executor {
            inner: Arc::new(Inner {
                client: self.client,
                query: self.query,
                tools: self.tools,
                interval: self.interval,
                concurrency: self.concurrency,
                grace: self.grace,
                closed: watch::channel(false).0,
                runs: watch::channel(0).0,
                abandoned: AtomicUsize::new(0),
            }),
        })
    }
}

/// One call in a handler's hands: where to report its output, and whether it is still
/// wanted.
#[derive(Debug, Clone)]
pub struct ToolRun {
    client: Client,
    turn_id: Uuid,
    call_id: Arc<str>,
    ended: Arc<watch::Sender<bool>>,
}

impl ToolRun {
    /// The call's turn.
    pub fn turn_id(&self) -> Uuid {
        self.turn_id
    }

    /// The call's id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The executor's client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Reports output of the call as it comes ([`Client::report_tool_progress`]); empty
    /// text sends nothing.
    ///
    /// # Errors
    /// `409 tool_call_terminal` (or `tool_call_not_executing`) once the call has ended —
    /// cancelled, timed out: stop working it; then [`ended`](ToolRun::ended) resolves too.
    /// And the [`Error`]s of any call.
    pub async fn progress(&self, stream: ToolStream, chunk: &str) -> Result<(), Error> {
        if chunk.is_empty() {
            return Ok(());
        }
        match self
            .client
            .report_tool_progress(self.turn_id, &self.call_id, stream, chunk)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                if is_call_over(&e) {
                    self.ended.send_replace(true);
                }
                Err(e)
            }
        }
    }

    /// [`progress`](ToolRun::progress) on `stdout`.
    ///
    /// # Errors
    /// As [`progress`](ToolRun::progress).
    pub async fn stdout(&self, chunk: &str) -> Result<(), Error> {
        self.progress(ToolStream::Stdout, chunk).await
    }

    /// [`progress`](ToolRun::progress) on `stderr`.
    ///
    /// # Errors
    /// As [`progress`](ToolRun::progress).
    pub async fn stderr(&self, chunk: &str) -> Result<(), Error> {
        self.progress(ToolStream::Stderr, chunk).await
    }

    /// Whether the call is known to have ended without this run: cancelled (its turn was
    /// interrupted), timed out, or reported by another executor. Its result would be
    /// dropped.
    pub fn is_ended(&self) -> bool {
        *self.ended.borrow()
    }

    /// Resolves once the call is known to have ended without this run (as
    /// [`is_ended`](ToolRun::is_ended); learned from the executor's next look at the
    /// executing calls, or from a refused progress report). Race it against long work to
    /// stop a tool nobody waits for any more:
    ///
    /// ```no_run
    /// # async fn run(run: pm_client::ToolRun, work: impl std::future::Future<Output = pm_client::ToolResult>) -> pm_client::ToolResult {
    /// tokio::select! {
    ///     result = work => result,
    ///     () = run.ended() => pm_client::ToolResult::cancelled(Some("the call ended".into())),
    /// }
    /// # }
    /// ```
    pub async fn ended(&self) {
        let mut ended = self.ended.subscribe();
        // The sender lives as long as `self`: waiting cannot fail.
        let _ = ended.wait_for(|e| *e).await;
    }
}

/// Marks the one run of [`Executor::run`] for as long as it lives.
struct Running<'e>(&'e watch::Sender<usize>);

impl<'e> Running<'e> {
    /// The mark, unless a run is going on already.
    fn start(count: &'e watch::Sender<usize>) -> Option<Self> {
        count
            .send_if_modified(|n| {
                let free = *n == 0;
                if free {
                    *n = 1;
                }
                free
            })
            .then_some(Self(count))
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// How a call's run ended, for the log.
enum Outcome {
    /// The service has the result.
    Reported,
    /// The call had ended meanwhile; the result was dropped.
    Dropped,
    /// The service refused the result for good.
    Refused,
}

/// The handler, type-erased.
type Handler = Arc<
    dyn Fn(ToolCallView, ToolRun) -> futures::future::BoxFuture<'static, ToolResult> + Send + Sync,
>;

impl Executor {
    /// A builder for an executor with `client` (role `llm` or `admin`).
    pub fn builder(client: Client) -> ExecutorBuilder {
        ExecutorBuilder {
            client,
            query: ToolCallQuery::new()
                .state(ToolCallState::Executing)
                .limit(500),
            tools: None,
            interval: Duration::from_millis(500),
            concurrency: 8,
            grace: Duration::from_secs(10),
        }
    }

    /// The executor's client.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Runs executing calls with `handler` until the executor is
    /// [`close`](Executor::close)d or [`shutdown`](Executor::shutdown): looks for them
    /// every interval (`GET /v1/tool-calls?state=executing`), oldest first, at most the
    /// concurrency at once, each call once. For each, `handler(call, run)` runs in a task
    /// of its own; it may report output with `run.stdout(…)` and answers the call's
    /// [`ToolResult`] (or anything [`Into`] one, e.g. `Result<Value, E>`), which is
    /// reported until the service has it. A handler that panics reports an `error`
    /// result. A result the service refuses because the call ended meanwhile (`409
    /// tool_call_terminal`: cancelled, timed out, reported by another executor) is logged
    /// and dropped.
    ///
    /// When stopped, waits up to the grace for running calls to finish and report, then
    /// abandons the rest (see [`shutdown`](Executor::shutdown)) and returns `Ok`.
    /// Failures worth waiting out (the service unreachable or unavailable) are retried
    /// with the client's backoff.
    ///
    /// # Errors
    /// The failures no wait cures, after running calls were given the grace: `401`/`403`
    /// (a token without the `llm` or `admin` role), `400` (a filter the service refuses).
    /// [`Error::InvalidInput`] at once when this executor (or a clone) is running already.
    pub async fn run<H, F, R>(&self, handler: H) -> Result<(), Error>
    where
        H: Fn(ToolCallView, ToolRun) -> F + Send + Sync + 'static,
        F: Future<Output = R> + Send + 'static,
        R: Into<ToolResult> + 'static,
    {
        let handler: Handler = Arc::new(move |call, run| {
            let work = handler(call, run);
            async move { work.await.into() }.boxed()
        });
        let Some(_running) = Running::start(&self.inner.runs) else {
            return Err(Error::InvalidInput(
                "the executor is running already (one run at a time: it would run calls twice)"
                    .into(),
            ));
        };
        let mut closed = self.inner.closed.subscribe();
        let mut tasks: JoinSet<(Key, Outcome)> = JoinSet::new();
        let mut active: HashMap<Key, Arc<watch::Sender<bool>>> = HashMap::new();
        // Calls run to the end that the lists may still show as executing (they lag).
        let mut done: HashSet<Key> = HashSet::new();
        let mut failures = 0;
        let fatal = loop {
            if *closed.borrow_and_update() {
                break None;
            }
            while let Some(finished) = tasks.try_join_next() {
                finish(finished, &mut active, &mut done);
            }
            let listed = tokio::select! {
                _ = closed.wait_for(|c| *c) => break None,
                listed = self.executing() => listed,
            };
            let delay = match listed {
                Ok(calls) => {
                    failures = 0;
                    self.start(calls, &handler, &mut tasks, &mut active, &mut done);
                    self.inner.interval
                }
                Err(e) if e.is_retryable() => {
                    failures += 1;
                    let delay = self.inner.client.inner.retry.backoff(failures, jitter());
                    tracing::warn!(error = %e, ?delay, "looking for executing tool calls failed; waiting");
                    delay
                }
                Err(e) => break Some(e),
            };
            let until = Instant::now() + delay;
            loop {
                tokio::select! {
                    _ = closed.wait_for(|c| *c) => break,
                    () = tokio::time::sleep_until(until) => break,
                    Some(finished) = tasks.join_next(), if !tasks.is_empty() => {
                        finish(finished, &mut active, &mut done);
                    }
                }
            }
        };
        self.drain(tasks, &mut active, &mut done).await;
        match fatal {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Every executing call this executor may run, oldest first (all pages).
    async fn executing(&self) -> Result<Vec<ToolCallView>, Error> {
        let calls: Vec<ToolCallView> = self
            .inner
            .client
            .read()
            .walk(self.inner.query.clone())
            .try_collect()
            .await?;
        Ok(calls
            .into_iter()
            .filter(|c| {
                c.state == ToolCallState::Executing
                    && self
                        .inner
                        .tools
                        .as_ref()
                        .is_none_or(|t| t.contains(&c.tool_name))
            })
            .collect())
    }

    /// Tells running handlers whose calls are no longer executing, and starts the calls
    /// not yet run while there is room.
    fn start(
        &self,
        calls: Vec<ToolCallView>,
        handler: &Handler,
        tasks: &mut JoinSet<(Key, Outcome)>,
        active: &mut HashMap<Key, Arc<watch::Sender<bool>>>,
        done: &mut HashSet<Key>,
    ) {
        let listed: HashSet<Key> = calls
            .iter()
            .map(|c| (c.turn_id, c.call_id.clone()))
            .collect();
        for (key, ended) in active.iter() {
            if !listed.contains(key) {
                ended.send_replace(true);
            }
        }
        done.retain(|k| listed.contains(k));
        for call in calls {
            if active.len() >= self.inner.concurrency {
                break;
            }
            let key = (call.turn_id, call.call_id.clone());
            if active.contains_key(&key) || done.contains(&key) {
                continue;
            }
            let ended = Arc::new(watch::channel(false).0);
            active.insert(key.clone(), ended.clone());
            let run = ToolRun {
                client: self.inner.client.clone(),
                turn_id: call.turn_id,
                call_id: call.call_id.as_str().into(),
                ended,
            };
            tracing::debug!(turn_id = %call.turn_id, call_id = %call.call_id, tool = %call.tool_name, "running a tool call");
            tasks.spawn(execute(handler.clone(), call, run, key));
        }
    }

    /// Gives running calls the grace to finish, then abandons the rest.
    async fn drain(
        &self,
        mut tasks: JoinSet<(Key, Outcome)>,
        active: &mut HashMap<Key, Arc<watch::Sender<bool>>>,
        done: &mut HashSet<Key>,
    ) {
        let until = Instant::now() + self.inner.grace;
        while !tasks.is_empty() {
            tokio::select! {
                Some(finished) = tasks.join_next() => finish(finished, active, done),
                () = tokio::time::sleep_until(until) => break,
            }
        }
        let left = tasks.len();
        if left > 0 {
            tracing::warn!(
                calls = left,
                "stopping: tool calls still running are abandoned; they stay executing for another executor (or their timeout)"
            );
            self.inner.abandoned.fetch_add(left, Ordering::SeqCst);
        }
        tasks.shutdown().await;
    }

    /// Stops looking for calls: [`run`](Executor::run) gives the running ones the grace,
    /// then returns.
    pub fn close(&self) {
        self.inner.closed.send_replace(true);
    }

    /// Stops the executor ([`close`](Executor::close)) and waits until
    /// [`run`](Executor::run) has returned: running calls had the grace to finish and
    /// report their results. Answers how many calls were abandoned still running — they
    /// stay `executing`, so an executor that looks next (this program restarted, another
    /// one) runs them again, or their execution timeout ends them.
    pub async fn shutdown(&self) -> usize {
        self.close();
        let mut runs = self.inner.runs.subscribe();
        let _ = runs.wait_for(|n| *n == 0).await;
        self.inner.abandoned.swap(0, Ordering::SeqCst)
    }

    /// Whether [`close`](Executor::close) or [`shutdown`](Executor::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        *self.inner.closed.borrow()
    }
}

/// A finished call's task: the call leaves the running ones for the done ones.
fn finish(
    finished: Result<(Key, Outcome), tokio::task::JoinError>,
    active: &mut HashMap<Key, Arc<watch::Sender<bool>>>,
    done: &mut HashSet<Key>,
) {
    // The tasks catch their handlers' panics and are aborted only by a stop, after which
    // nothing is started again: a task that ended otherwise leaves nothing to do.
    let Ok((key, outcome)) = finished else {
        return;
    };
    active.remove(&key);
    let what = match outcome {
        Outcome::Reported => "reported",
        Outcome::Dropped => "dropped",
        Outcome::Refused => "refused",
    };
    tracing::debug!(turn_id = %key.0, call_id = %key.1, outcome = what, "tool call done");
    done.insert(key);
}

/// Runs one call with the handler and reports its result until the service has it.
async fn execute(handler: Handler, call: ToolCallView, run: ToolRun, key: Key) -> (Key, Outcome) {
    let client = run.client.clone();
    let work = handler(call, run);
    let result = match AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result,
        Err(_) => {
            tracing::error!(turn_id = %key.0, call_id = %key.1, "the tool handler panicked");
            ToolResult::error("the executor's tool handler panicked")
        }
    };
    let mut failures = 0;
    loop {
        match client.report_tool_result(key.0, &key.1, &result).await {
            Ok(_) => return (key, Outcome::Reported),
            Err(e) if is_call_over(&e) => {
                tracing::warn!(turn_id = %key.0, call_id = %key.1, error = %e,
                    "the tool call ended before its result (cancelled, timed out or reported elsewhere); result dropped");
                return (key, Outcome::Dropped);
            }
            Err(e) if e.is_retryable() => {
                failures += 1;
                let delay = client.inner.retry.backoff(failures, jitter());
                tracing::warn!(turn_id = %key.0, call_id = %key.1, error = %e, ?delay,
                    "reporting a tool result failed; trying again");
                tokio::time::sleep(delay).await;
            }
            Err(e) => {
                tracing::error!(turn_id = %key.0, call_id = %key.1, error = %e,
                    "the service refused the tool result");
                return (key, Outcome::Refused);
            }
        }
    }
}
