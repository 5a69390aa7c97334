//! Shared helpers of the fault tests: the one-at-a-time lock, starting the service
//! binary, counting facts, polling.

use std::future::Future;
use std::time::{Duration, Instant};

use pm_tests::http::Api;
use pm_tests::process::ServiceProcess;
use serde_json::{json, Value};

/// One test per backend, `<name>::sqlite` and `<name>::postgres`, each calling
/// `async fn <name>(db: TestDb)` under the [`serial`] lock, with its own extra attributes
/// (e.g. `ignore = "…"`): `per_backend!(name, sqlite: [], postgres: [ignore = "…"]);`.
macro_rules! per_backend {
    ($name:ident, sqlite: [$($sa:meta),*], postgres: [$($pa:meta),*]) => {
        mod $name {
            $(#[$sa])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let _serial = $crate::support::serial().await;
                if let Some(db) = pm_tests::TestDb::sqlite().await {
                    super::$name(db).await;
                }
            }

            $(#[$pa])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let _serial = $crate::support::serial().await;
                if let Some(db) = pm_tests::TestDb::postgres().await {
                    super::$name(db).await;
                }
            }
        }
    };
}

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The lock every fault test holds while it runs.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// Starts `pm-test-server` with `env` and waits until it is ready.
pub async fn start(env: &[(&str, &str)]) -> ServiceProcess {
    pm_tests::process::use_binary(env!("CARGO_BIN_EXE_pm-test-server"));
    ServiceProcess::start(env).await
}

/// Spawns `pm-test-server` with `args` and `env` without waiting.
pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> ServiceProcess {
    pm_tests::process::use_binary(env!("CARGO_BIN_EXE_pm-test-server"));
    ServiceProcess::spawn(args, env)
}

/// Runs `pm-test-server migrate` on `url`.
pub fn migrate(url: &str) {
    pm_tests::process::use_binary(env!("CARGO_BIN_EXE_pm-test-server"));
    let (status, log) = ServiceProcess::run(
        &["migrate"],
        &[("DATABASE_URL", url)],
        Duration::from_secs(60),
    );
    assert!(status.success(), "migrate failed: {log}");
}

/// Polls `probe` every 10 ms until it gives `Some`, for at most `timeout`.
pub async fn poll<T, F, Fut>(timeout: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const SENTINEL: &str = "__fault_sentinel__";

/// Every fact (not the sagas' runes) in the log once everything written so far is
/// readable (a sentinel actor is registered and waited for), without the sentinels.
pub async fn settled_facts(api: &Api) -> Vec<Value> {
    let body = json!({"kind": "ai", "display_name": SENTINEL});
    let sentinel = api.create("/v1/actors", &body).await.id();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let all = api.events(FACTS).await.expect("GET /v1/events");
        if all.iter().any(|e| e["subject"] == sentinel.as_str()) {
            return all
                .into_iter()
                .filter(|e| e["data"]["display_name"] != SENTINEL)
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "sentinel {sentinel} never showed in the log"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The facts of `type` whose `data.<field>` is `value`.
pub fn facts_with<'a>(facts: &'a [Value], kind: &str, field: &str, value: &str) -> Vec<&'a Value> {
    facts
        .iter()
        .filter(|e| e["type"] == kind && e["data"][field] == value)
        .collect()
}

/// The median of some durations.
pub fn median(mut values: Vec<Duration>) -> Duration {
    pm_tests::load::quantile(&mut values, 0.5)
}

/// The `/v1/events` filter of the `project_manager.*` facts alone (the sagas' runes,
/// appended a moment after the facts that cause them, left out).
pub const FACTS: &str = "types=project_manager.*";
/// `MessageAdded`'s fact type.
pub const MESSAGE_ADDED: &str = "project_manager.message.added";
/// `ActorRegistered`'s fact type.
pub const ACTOR_REGISTERED: &str = "project_manager.actor.registered";

/// A person (`Hana`), an AI (`Lin`) and a conversation of theirs titled `title`: their ids.
pub async fn human_ai_conversation(api: &Api, title: &str) -> (String, String, String) {
    let human = api
        .create(
            "/v1/actors",
            &json!({"kind": "human", "display_name": "Hana"}),
        )
        .await
        .id();
    let llm = api
        .create("/v1/actors", &json!({"kind": "ai", "display_name": "Lin"}))
        .await
        .id();
    let conv = api
        .create(
            "/v1/conversations",
            &json!({"actor_ids": [human, llm], "title": title}),
        )
        .await
        .id();
    (human, llm, conv)
}
