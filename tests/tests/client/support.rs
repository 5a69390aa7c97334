//! Shared helpers: clients per role, a small world of entities made through the client,
//! and counting the log.

use std::time::{Duration, Instant};

use pm_client::{
    label, text, ActorKind, ActorRegistered, AddMessageInput, CheckpointType, Client,
    ConversationCheckpointCreated, ConversationStarted, CreateConversationCheckpointInput,
    CreateTaskCheckpointInput, CreateTaskInput, EventQuery, Fact, LogEvent, MessageAdded, Position,
    RegisterActorInput, RetryPolicy, StartConversationInput, TaskCheckpointCreated,
    TaskCheckpointType, TaskCreated, Uuid, Written,
};
use pm_tests::{TestDb, TestService, ADMIN};
use project_manager::Config;

/// A client of `svc` with `token`; retries are quick but real (4 attempts).
pub fn client(svc: &TestService, token: &str) -> Client {
    client_at(&svc.base, token)
}

/// A client of the service at `base`.
pub fn client_at(base: &str, token: &str) -> Client {
    Client::builder(base)
        .token(token)
        .retry(
            RetryPolicy::default()
                .max_attempts(4)
                .base_delay(Duration::from_millis(50))
                .max_delay(Duration::from_millis(500)),
        )
        .build()
        .expect("client")
}

/// The configuration of [`TestService::start`] with every role's token, bound to `bind`.
pub fn config(db: &TestDb, bind: &str) -> Config {
    let mut config = Config::defaults();
    config.bind = bind.parse().expect("addr");
    config.database_url = Some(db.url.clone());
    config.auth_tokens = pm_tests::all_tokens();
    config.db_pool_size = 8;
    config.log_poll_ms = 50;
    config.tool_default_action = pm_tests::WORKER_DECIDES;
    config
}

/// Starts the service with every role's token.
pub async fn start(db: &TestDb) -> TestService {
    TestService::start(db, &pm_tests::all_tokens()).await
}

/// The `project_manager.*` facts alone: the sagas' runes (`session.*`, `agent.*`, `turn.*`,
/// `plan.*`, …), which the saga processor appends a moment after the facts that cause
/// them, left out.
pub const FACTS: &str = "project_manager.*";

/// A query of the facts alone ([`FACTS`]) from the start of the log.
pub fn facts() -> EventQuery {
    EventQuery::new().with_type(FACTS)
}

/// The display name of the actors [`settle`] registers.
const SENTINEL: &str = "__sentinel__";

fn is_sentinel(e: &LogEvent) -> bool {
    matches!(e.fact(), Some(Fact::ActorRegistered(a)) if a.display_name.as_str() == SENTINEL)
}

/// Every fact of the log up to the fact at `position`, once it is readable (on PostgreSQL
/// the log is readable only below every transaction still running in the cluster).
pub async fn log_until(svc: &TestService, position: &Position) -> Vec<LogEvent> {
    let admin = client(svc, ADMIN);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut query = facts().limit(500);
        let mut all = Vec::new();
        loop {
            let page = admin.events(&query).await.expect("events");
            if page.items.is_empty() {
                break;
            }
            all.extend(page.items);
            query = query.after(page.next_cursor);
        }
        if let Some(i) = all.iter().position(|e| e.position == *position) {
            all.truncate(i + 1);
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "{position} never became readable"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The facts of the log once everything written so far is readable, without the sentinel
/// actors this helper registers to know that, and the position of the newest sentinel.
pub async fn settle(svc: &TestService) -> (Vec<LogEvent>, Position) {
    let sentinel = client(svc, ADMIN)
        .register_actor(actor_input(ActorKind::Ai, SENTINEL, None))
        .await
        .expect("sentinel");
    let position = sentinel.position.expect("a position");
    let mut log = log_until(svc, &position).await;
    log.retain(|e| !is_sentinel(e));
    (log, position)
}

/// How many facts the log holds (sentinels excluded), once all are readable.
pub async fn log_len(svc: &TestService) -> usize {
    settle(svc).await.0.len()
}

/// A client whose first retry would wait at least 1.5 s: with it, [`promptly`] tells a
/// refusal that was retried from one that was not.
pub fn strict(svc: &TestService, token: &str) -> Client {
    Client::builder(&svc.base)
        .token(token)
        .retry(
            RetryPolicy::default()
                .base_delay(Duration::from_secs(3))
                .max_delay(Duration::from_secs(3)),
        )
        .build()
        .expect("client")
}

/// Asserts that `f` (a call of a [`strict`] client) fails within 1.5 s: it was not
/// retried.
pub async fn promptly<T: std::fmt::Debug>(
    f: impl std::future::Future<Output = Result<T, pm_client::Error>>,
) -> pm_client::Error {
    let started = Instant::now();
    let err = f.await.expect_err("refused");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        started.elapsed()
    );
    err
}

/// Entities made through the client (as admin).
pub struct World {
    pub human: Written<ActorRegistered>,
    pub ai: Written<ActorRegistered>,
    pub conversation: Written<ConversationStarted>,
    pub checkpoint: Written<ConversationCheckpointCreated>,
    pub task: Written<TaskCreated>,
    pub started: Written<TaskCheckpointCreated>,
    pub message: Written<MessageAdded>,
}

/// An actor input.
pub fn actor_input(kind: ActorKind, name: &str, external: Option<&str>) -> RegisterActorInput {
    RegisterActorInput {
        kind,
        display_name: text(name).expect("text"),
        external_identity: external.map(|e| label(e).expect("text")),
    }
}

/// A conversation input of `actors` in `organization`, keyed when `external` is given.
pub fn conversation_input(
    actors: Vec<Uuid>,
    organization: &str,
    external: Option<&str>,
) -> StartConversationInput {
    StartConversationInput {
        actor_ids: actors,
        title: text(format!("About {organization}")).expect("text"),
        external_id: external.map(|e| label(e).expect("text")),
        external_source: external.map(|_| label("tests").expect("text")),
        status: Some(label("open").expect("text")),
        organization: Some(label(organization).expect("text")),
    }
}

/// A message input.
pub fn message_input(actor: Uuid, content: &str, external: Option<&str>) -> AddMessageInput {
    AddMessageInput {
        actor_id: actor,
        content: text(content).expect("text"),
        task_id: None,
        external_identity: external.map(|e| label(e).expect("text")),
        time: None,
    }
}

/// A checkpoint input.
pub fn checkpoint_input(kind: CheckpointType) -> CreateConversationCheckpointInput {
    CreateConversationCheckpointInput {
        checkpoint_type: kind,
        summary: text(format!("decided {kind}")).expect("text"),
    }
}

/// A task input under `checkpoint`.
pub fn task_input(checkpoint: Uuid, assignee: Option<Uuid>) -> CreateTaskInput {
    CreateTaskInput {
        checkpoint_id: checkpoint,
        instructions: text("do the thing").expect("text"),
        assigned_to: assignee,
    }
}

/// A task checkpoint input.
pub fn progress(kind: TaskCheckpointType) -> CreateTaskCheckpointInput {
    CreateTaskCheckpointInput {
        checkpoint_type: kind,
    }
}

/// A human and an AI actor, a conversation in `organization`, a `BEGIN_WORK` checkpoint, a
/// task assigned to the AI with `WORK_STARTED`, and a human message about it.
pub async fn world(c: &Client, organization: &str) -> World {
    let human = c
        .register_actor(actor_input(ActorKind::Human, "Hu", None))
        .await
        .expect("human");
    let ai = c
        .register_actor(actor_input(ActorKind::Ai, "Al", None))
        .await
        .expect("ai");
    let conversation = c
        .start_conversation(conversation_input(
            vec![human.entity.id, ai.entity.id],
            organization,
            None,
        ))
        .await
        .expect("conversation");
    let cid = conversation.entity.id;
    let checkpoint = c
        .create_conversation_checkpoint(cid, checkpoint_input(CheckpointType::BeginWork))
        .await
        .expect("checkpoint");
    let task = c
        .create_task(cid, task_input(checkpoint.entity.id, Some(ai.entity.id)))
        .await
        .expect("task");
    let started = c
        .create_task_checkpoint(task.entity.id, progress(TaskCheckpointType::WorkStarted))
        .await
        .expect("started");
    let mut input = message_input(human.entity.id, "about the task", None);
    input.task_id = Some(task.entity.id);
    let message = c.add_message(cid, input).await.expect("message");
    World {
        human,
        ai,
        conversation,
        checkpoint,
        task,
        started,
        message,
    }
}
