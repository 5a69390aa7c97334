//! The example programs of `pm-client` against a live service with their roles' tokens:
//! each exits 0 and did what it says — checked in the service's state — and running the
//! writers again writes nothing (they are idempotent). The LLM service's task turns wait
//! for a tool call that needs approval: the approver runs beside it.
//!
//! The programs are the ones `cargo test -p pm-client` (or `--workspace`) builds into
//! `target/<profile>/examples/`; when they are missing or older than their sources, this
//! test builds them with `cargo build -p pm-client --examples` first.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use pm_client::{
    ids, ActorKind, AnomalyQuery, CheckpointQuery, ClaimRequest, ConversationTaskQuery,
    MessageQuery, TaskStatus, ToolCallQuery, ToolCallState, ToolStatus, TurnInput, TurnQuery,
    TurnState,
};
use pm_tests::{on_both_backends, TestDb, TestService, ADMIN, ANALYST, INGRESS, LLM};

use crate::support::{client, log_len, settle, start};

/// Serializes the build of the examples between the tests of this binary.
static BUILD: Mutex<()> = Mutex::new(());

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let modified = if path.is_dir() {
            newest_source(&path)
        } else {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH)
        };
        newest = newest.max(modified);
    }
    newest
}

/// The path of example `name`, built if missing or stale.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/…");
    let path = profile_dir.join("examples").join(name);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sources = [
        "client/src",
        "client/examples",
        "domain/src",
        "application/src",
    ]
    .iter()
    .map(|d| newest_source(&root.join(d)))
    .max()
    .unwrap_or(SystemTime::UNIX_EPOCH);
    let _guard = BUILD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
    if built.is_none_or(|b| b < sources) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-p", "pm-client", "--examples"]);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        let target = profile_dir.parent().expect("target dir");
        let status = build
            .env("CARGO_TARGET_DIR", target)
            .current_dir(&root)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the examples failed");
    }
    path
}

/// Runs example `name` against `svc` with `token`; asserts exit 0 and returns its output.
async fn run(svc: &TestService, name: &str, token: &str, args: &[&str]) -> String {
    let path = example(name);
    let mut command = Command::new(&path);
    command
        .args(args)
        .env("PM_URL", &svc.base)
        .env("PM_TOKEN", token)
        // The llm_service example sets its tool's policy with it (the others ignore it).
        .env("PM_ADMIN_TOKEN", ADMIN)
        .env("RUST_LOG", "warn");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{name} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

async fn the_examples_do_what_they_say(db: TestDb) {
    let svc = start(&db).await;
    let thread = format!("thread-{}", db.kind);
    let out = run(
        &svc,
        "ingress",
        INGRESS,
        &["--thread", &thread, "--messages", "3"],
    )
    .await;
    let cid = ids::conversation_id("example", &thread);
    assert!(
        out.contains(&format!("conversation {cid} has 3 messages by Alice")),
        "{out}"
    );
    assert!(out.contains("redelivered message 1"), "{out}");
    let after_ingress = log_len(&svc).await;
    assert_eq!(
        after_ingress,
        2 + 1 + 3,
        "two actors, the conversation, three messages"
    );
    // A rerun (every delivery again) writes nothing.
    run(
        &svc,
        "ingress",
        INGRESS,
        &["--thread", &thread, "--messages", "3"],
    )
    .await;
    assert_eq!(log_len(&svc).await, after_ingress);

    // A fleet of four workers claims the assistant's turns until six are completed. Each
    // task turn waits for a `run_checks` call that needs approval; the approver (an
    // ingress relaying a person) denies the one about item 2 and approves the others,
    // which the fleet's executor runs; the resumed turns complete the tasks.
    let args = ["--workers", "4", "--max-turns", "6", "--timeout-secs", "60"];
    let approver_args = [
        "--deny",
        "item 2",
        "--max-calls",
        "3",
        "--timeout-secs",
        "60",
    ];
    let (out, decided) = tokio::join!(
        run(&svc, "llm_service", LLM, &args),
        run(&svc, "approver", INGRESS, &approver_args),
    );
    assert!(
        out.contains("worked 3 message turns and 3 task turns"),
        "{out}"
    );
    assert!(out.contains("3 tool calls reported, 2 run"), "{out}");
    // The calls waited because the example's policy says so: its worker asks for nothing.
    assert!(out.contains("tool policy run-checks"), "{out}");
    assert!(out.contains("released 0 turn(s)"), "{out}");
    assert!(
        decided.contains("approved 2, denied 1 call(s); 0 decided elsewhere"),
        "{decided}"
    );
    let after_llm = log_len(&svc).await;
    assert_eq!(
        after_llm,
        after_ingress + 1 + 3 * 5,
        "the tool policy; per message: reply, checkpoint, task (its turn); started, completed (the task's turn)"
    );
    // Running the fleet again writes nothing: a completed turn is never claimable again.
    let again = run(&svc, "llm_service", LLM, &["--idle-secs", "2"]).await;
    assert!(
        again.contains("worked 0 message turns and 0 task turns"),
        "{again}"
    );
    assert_eq!(log_len(&svc).await, after_llm);

    let admin = client(&svc, ADMIN);
    let (_, head) = settle(&svc).await;
    let read = admin.at(head);
    let conversation = read.conversation(cid).await.expect("conversation");
    assert_eq!(conversation.message_count, 6);
    assert_eq!(conversation.checkpoint_count, 3);
    let assistant = ids::actor_id("example:assistant");
    assert_eq!(
        read.actor(assistant).await.expect("assistant").kind,
        ActorKind::Ai
    );
    let replies = read
        .messages(&MessageQuery::of(cid).actor_id(assistant))
        .await
        .expect("messages");
    assert_eq!(replies.items.len(), 3);
    let checkpoints = read
        .checkpoints(&CheckpointQuery::of(cid))
        .await
        .expect("checkpoints");
    assert!(checkpoints
        .items
        .iter()
        .all(|c| c.checkpoint_type == pm_client::CheckpointType::BeginWork));
    let tasks = read
        .conversation_tasks(&ConversationTaskQuery::of(cid))
        .await
        .expect("tasks");
    assert_eq!(tasks.items.len(), 3);
    for t in &tasks.items {
        assert_eq!(t.task.assigned_to, Some(assistant));
        assert_eq!(
            t.status,
            TaskStatus::Latest(pm_client::TaskCheckpointType::WorkCompleted)
        );
    }

    // The sagas ran the message turns one at a time to completion, with no anomaly.
    let turns = read
        .turns(&TurnQuery::new().conversation_id(cid))
        .await
        .expect("turns");
    let answered: Vec<_> = turns
        .items
        .iter()
        .filter(|t| matches!(t.input, TurnInput::Message { .. }))
        .collect();
    assert_eq!(answered.len(), 3, "{:?}", turns.items);
    assert!(answered.iter().all(|t| t.state == TurnState::Completed));
    let worked: Vec<_> = turns
        .items
        .iter()
        .filter(|t| matches!(t.input, TurnInput::Task { .. }))
        .collect();
    assert_eq!(worked.len(), 3, "{:?}", turns.items);
    assert!(worked.iter().all(|t| t.state == TurnState::Completed));
    // Each task turn was claimed twice: before its tool call and after its result.
    assert!(worked.iter().all(|t| t.claims == 2), "{worked:?}");
    let mut results: Vec<ToolStatus> = worked
        .iter()
        .flat_map(|t| &t.tool_calls)
        .filter_map(|c| c.result.as_ref().map(|r| r.status))
        .collect();
    results.sort_by_key(|s| s.as_str());
    assert_eq!(
        results,
        [ToolStatus::Denied, ToolStatus::Success, ToolStatus::Success]
    );
    let calls = read
        .tool_calls(&ToolCallQuery::new().conversation_id(cid))
        .await
        .expect("tool calls");
    assert_eq!(calls.items.len(), 3);
    for call in &calls.items {
        assert_eq!(call.tool_name, "run_checks");
        assert!(call.requires_approval);
        match call.state {
            ToolCallState::Success => {
                // The approver example's token's principal, as the service signed it in.
                assert_eq!(call.approver.as_deref(), Some("ingress"));
                assert_eq!(call.policy.as_deref(), Some("run-checks"));
            }
            ToolCallState::Denied => {
                assert!(call.arguments.to_string().contains("item 2"), "{call:?}");
            }
            other => panic!("{other}: {call:?}"),
        }
    }
    let anomalies = read
        .anomalies(&AnomalyQuery::new().conversation_id(cid))
        .await
        .expect("anomalies");
    assert!(anomalies.items.is_empty(), "{:?}", anomalies.items);

    let out = run(&svc, "analyst", ANALYST, &["--page-size", "2"]).await;
    for line in [
        "tasks WORK_COMPLETED: 3",
        "tasks NOT_STARTED: 0",
        "conversations: 1 in 1 page(s)",
        "latest checkpoint BEGIN_WORK",
        "stats: total 3 [WORK_COMPLETED 3]",
        &format!("stats for {assistant}: total 3"),
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
    assert_eq!(log_len(&svc).await, after_llm, "the analyst only reads");
    svc.stop().await;
}

/// The LLM fleet stopped by Ctrl-C (SIGINT) while its "model" thinks about a turn: it
/// exits 0 and releases the turn, which the next worker claims at once.
async fn the_llm_fleet_releases_its_turns_on_ctrl_c(db: TestDb) {
    let svc = start(&db).await;
    let thread = format!("ctrl-c-{}", db.kind);
    run(
        &svc,
        "ingress",
        INGRESS,
        &["--thread", &thread, "--messages", "1"],
    )
    .await;
    let cid = ids::conversation_id("example", &thread);
    let mut fleet = Command::new(example("llm_service"))
        .args(["--workers", "2", "--think-ms", "60000"])
        .env("PM_URL", &svc.base)
        .env("PM_TOKEN", LLM)
        .env("PM_ADMIN_TOKEN", ADMIN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the example runs");
    let admin = client(&svc, ADMIN);
    let deadline = Instant::now() + Duration::from_secs(20);
    let turn = loop {
        let turns = admin
            .read()
            .turns(&TurnQuery::new().conversation_id(cid))
            .await
            .expect("turns");
        if let Some(t) = turns.items.into_iter().find(|t| t.lease.is_some()) {
            break t;
        }
        assert!(
            Instant::now() < deadline,
            "the fleet never claimed the turn"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let worker = turn
        .lease
        .as_ref()
        .map(|l| l.worker.clone())
        .unwrap_or_default();
    assert!(worker.starts_with("llm-"), "{worker}");
    let kill = Command::new("kill")
        .args(["-INT", &fleet.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    while fleet.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = fleet.kill();
            panic!("the fleet did not stop on SIGINT");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let output = fleet.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}\n{stdout}", output.status);
    assert!(
        stdout.contains("stopping (Ctrl-C): released 1 turn(s)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("worked 0 message turns and 0 task turns"),
        "{stdout}"
    );
    // Released, not expired: claimable at once, under the next epoch.
    let llm = client(&svc, LLM);
    let next = llm
        .claim(
            ClaimRequest::new()
                .conversation_id(cid)
                .wait(Duration::from_secs(5)),
        )
        .await
        .expect("claim")
        .expect("claimable again");
    assert_eq!(next.turn.id, turn.id);
    assert_eq!(Some(next.turn_epoch), turn.turn_epoch.map(|e| e + 1));
    assert_eq!(next.turn.claims, 2);
    svc.stop().await;
}

/// The MCP variant works the assistant's conversation turns through `/mcp`, each on a
/// connection scoped to its claim: every turn completes with the message the "model" added
/// as its deliverable, and those messages carry the claim's fence; with no turn left it
/// ends after `--idle-secs`.
async fn the_mcp_worker_works_turns_through_mcp(db: TestDb) {
    let svc = start(&db).await;
    let thread = format!("mcp-{}", db.kind);
    run(
        &svc,
        "ingress",
        INGRESS,
        &["--thread", &thread, "--messages", "2"],
    )
    .await;
    let cid = ids::conversation_id("example", &thread);
    // The worker starts once the sagas have queued a turn for each message: a message they
    // decide only after the first turn was claimed steers (interrupts) that turn instead.
    let reader = client(&svc, ANALYST).read();
    let deadline = Instant::now() + Duration::from_secs(10);
    while reader
        .turns(&TurnQuery::new().conversation_id(cid))
        .await
        .expect("turns")
        .items
        .len()
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "the sagas never queued both turns"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = run(
        &svc,
        "mcp_worker",
        LLM,
        // One turn more than there are: the worker ends by its idle close.
        &["--max-turns", "3", "--idle-secs", "2"],
    )
    .await;
    assert!(out.contains("2 turn(s) worked through MCP"), "{out}");
    assert!(out.contains("of the conversation"), "{out}");
    // The sagas complete a turn a moment after its checkpoint's fact.
    let deadline = Instant::now() + Duration::from_secs(10);
    let turns = loop {
        let turns = reader
            .turns(&TurnQuery::new().conversation_id(cid))
            .await
            .expect("turns")
            .items;
        let all = turns.len() == 2 && turns.iter().all(|t| t.state == TurnState::Completed);
        if all || Instant::now() > deadline {
            break turns;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let completed: Vec<_> = turns
        .iter()
        .filter(|t| t.state == TurnState::Completed)
        .collect();
    assert_eq!(completed.len(), 2, "{turns:?}");
    // The read model trails the sagas: wait until it shows every delivered message.
    let deadline = Instant::now() + Duration::from_secs(10);
    let messages = loop {
        let messages = reader
            .messages(&MessageQuery::of(cid))
            .await
            .expect("messages")
            .items;
        let all = completed
            .iter()
            .all(|t| messages.iter().any(|m| Some(m.id) == t.deliverable));
        if all || Instant::now() > deadline {
            break messages;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for turn in completed {
        let deliverable = turn.deliverable.expect("a deliverable");
        let message = messages
            .iter()
            .find(|m| m.id == deliverable)
            .expect("the deliverable is a message of the conversation");
        assert_eq!(message.content.as_str(), "On it — answered through MCP.");
    }
    svc.stop().await;
}

on_both_backends!(
    the_examples_do_what_they_say,
    the_llm_fleet_releases_its_turns_on_ctrl_c,
    the_mcp_worker_works_turns_through_mcp,
);
