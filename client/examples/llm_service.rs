//! The LLM service: follows the log for people's messages and answers each with an AI
//! message, a `BEGIN_WORK` checkpoint, a task for the assistant and its `WORK_STARTED`
//! checkpoint — then reads the task back at once (read-your-writes). (Once the sagas
//! exist it will follow `agent.turn_dispatched` instead.)
//!
//! ```sh
//! PM_URL=http://127.0.0.1:8080 PM_TOKEN=<llm token> \
//!   cargo run -p pm-client --example llm_service -- --max-events 3 --timeout-secs 60
//! ```
//!
//! The assistant is the actor the ingress registered with the external identity
//! `example:assistant`; its id is derived offline. Answers are keyed by the message they
//! answer, so processing a message again (a restart, a redelivery) writes nothing new.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use pm_client::{
    ids, label, text, ActorKind, AddMessageInput, CheckpointType, Client,
    CreateConversationCheckpointInput, CreateTaskCheckpointInput, CreateTaskInput, EventContent,
    EventQuery, Fact, LogEvent, MessageAdded, Position, TaskCheckpointType, Uuid,
};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The value of `--name <value>`.
fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main]
async fn main() -> Result<()> {
    let client = Client::from_env()?;
    let max_events: usize = arg("--max-events").map_or(Ok(3), |n| n.parse())?;
    let timeout = Duration::from_secs(arg("--timeout-secs").map_or(Ok(60), |n| n.parse())?);
    let after = arg("--after").map_or(Ok(Position::start()), |p| p.parse())?;

    let assistant = ids::actor_id("example:assistant");
    let me = client.read().actor(assistant).await.map_err(|e| {
        format!("the assistant {assistant} is not registered (run the ingress example): {e}")
    })?;
    println!("answering as {} ({})", me.display_name.as_str(), me.id);

    let query = EventQuery::new().with_type(MessageAdded::NAME).after(after);
    let mut log = client.follow(query);
    let mut kinds: HashMap<Uuid, ActorKind> = HashMap::new();
    let mut answered = 0;
    let deadline = tokio::time::Instant::now() + timeout;
    while answered < max_events {
        let event = match tokio::time::timeout_at(deadline, log.next()).await {
            Err(_) => {
                println!("stopping: no more messages within {timeout:?}");
                break;
            }
            Ok(None) => break,
            Ok(Some(event)) => event?,
        };
        let EventContent::Fact(Fact::MessageAdded(message)) = &event.content else {
            continue;
        };
        // The author's registration precedes the message in the log: read the actor as
        // of this event's position.
        let kind = match kinds.get(&message.actor_id) {
            Some(kind) => *kind,
            None => {
                let actor = client
                    .at(event.position.clone())
                    .actor(message.actor_id)
                    .await?;
                kinds.insert(actor.id, actor.kind);
                actor.kind
            }
        };
        if kind != ActorKind::Human {
            continue;
        }
        answer(&client, assistant, &event, message).await?;
        answered += 1;
    }
    println!("llm_service done: answered {answered} messages");
    Ok(())
}

/// Answers one message; every write is keyed by the message, so a repeat is a replay.
async fn answer(
    client: &Client,
    assistant: Uuid,
    event: &LogEvent,
    message: &MessageAdded,
) -> Result<()> {
    let cause = event.id().unwrap_or_default();
    let correlation = event.correlation_id().unwrap_or(cause);
    let conversation = message.conversation_id;
    let key = |what: &str| format!("llm-{what}-{}", message.id);

    let reply = client
        .add_message(
            conversation,
            AddMessageInput {
                actor_id: assistant,
                content: text(format!("On it: {}", message.content.as_str()))?,
                task_id: None,
                external_identity: Some(label(format!("reply-to-{}", message.id))?),
                time: None,
            },
        )
        .causation_id(cause)
        .correlation_id(correlation)
        .await?;
    let decision = client
        .create_conversation_checkpoint(
            conversation,
            CreateConversationCheckpointInput {
                checkpoint_type: CheckpointType::BeginWork,
                summary: text(format!("User asked: {}", message.content.as_str()))?,
            },
        )
        .idempotency_key(key("begin-work"))
        .causation_id(cause)
        .correlation_id(correlation)
        .await?;
    let task = client
        .create_task(
            conversation,
            CreateTaskInput {
                checkpoint_id: decision.entity.id,
                instructions: text(format!("Handle: {}", message.content.as_str()))?,
                assigned_to: Some(assistant),
            },
        )
        .idempotency_key(key("task"))
        .causation_id(cause)
        .correlation_id(correlation)
        .await?;
    let started = client
        .create_task_checkpoint(
            task.entity.id,
            CreateTaskCheckpointInput {
                checkpoint_type: TaskCheckpointType::WorkStarted,
            },
        )
        .idempotency_key(key("work-started"))
        .causation_id(cause)
        .correlation_id(correlation)
        .await?;
    // Read-your-writes: the read model has applied the task checkpoint before answering.
    let view = client.after(&started).task(task.entity.id).await?;
    println!(
        "answered message {} at {}: reply {} ({:?}), checkpoint {}, task {} is {} with {} checkpoint(s)",
        message.id,
        event.position,
        reply.entity.id,
        reply.status,
        decision.entity.id,
        view.task.task.id,
        view.task.status,
        view.checkpoints.len(),
    );
    Ok(())
}
