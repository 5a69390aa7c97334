//! The LLM service: follows the sagas' work feed — every `agent.turn_dispatched` — and
//! works each turn of its assistant's agents with the commands it already has:
//!
//! - a **conversation turn** answering a human message: an AI reply, a `BEGIN_WORK`
//!   checkpoint (which completes the turn) and a task for the assistant;
//! - a **task turn** (for the task's assignee): `WORK_STARTED` on the task, the work,
//!   `WORK_COMPLETED` (which completes the turn), then reads the task back at once
//!   (read-your-writes).
//!
//! ```sh
//! PM_URL=http://127.0.0.1:8080 PM_TOKEN=<llm token> \
//!   cargo run -p pm-client --example llm_service -- --max-turns 6 --timeout-secs 60
//! ```
//!
//! The assistant is the `ai` actor the ingress registered with the external identity
//! `example:assistant` and made a participant of the conversation, so the conversation's
//! root agent acts for it; its id is derived offline. Every write is keyed by the turn it
//! works, so working a turn again (a restart from the start of the log) writes nothing new.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use pm_client::{
    ids, label, text, AddMessageInput, CheckpointType, Client, CreateConversationCheckpointInput,
    CreateTaskCheckpointInput, CreateTaskInput, EventContent, EventQuery, LogEvent, Position,
    TaskCheckpointType, TurnDispatched, TurnInput, TurnView, Uuid, AGENT_TURN_DISPATCHED,
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
    let max_turns: usize = arg("--max-turns").map_or(Ok(6), |n| n.parse())?;
    let timeout = Duration::from_secs(arg("--timeout-secs").map_or(Ok(60), |n| n.parse())?);
    let after = arg("--after").map_or(Ok(Position::start()), |p| p.parse())?;

    let assistant = ids::actor_id("example:assistant");
    let me = client.read().actor(assistant).await.map_err(|e| {
        format!("the assistant {assistant} is not registered (run the ingress example): {e}")
    })?;
    println!("working turns as {} ({})", me.display_name.as_str(), me.id);

    let query = EventQuery::new()
        .with_type(AGENT_TURN_DISPATCHED)
        .after(after);
    let mut log = client.follow(query);
    // Whether an agent acts for the assistant, by agent id.
    let mut mine: HashMap<Uuid, bool> = HashMap::new();
    let (mut messages, mut tasks) = (0, 0);
    let deadline = tokio::time::Instant::now() + timeout;
    while messages + tasks < max_turns {
        let event = match tokio::time::timeout_at(deadline, log.next()).await {
            Err(_) => {
                println!("stopping: no more turns within {timeout:?}");
                break;
            }
            Ok(None) => break,
            Ok(Some(event)) => event?,
        };
        let EventContent::Other { data, .. } = &event.content else {
            continue;
        };
        let dispatched: TurnDispatched = data.parse()?;
        // The turn as of this event: the saga tables hold it once they reach the position.
        let read = client.at(event.position.clone());
        let turn = read.turn(dispatched.turn_id).await?;
        let is_mine = match mine.get(&turn.agent_id) {
            Some(is_mine) => *is_mine,
            None => {
                let agent = read.agent(turn.agent_id).await?;
                let is_mine = agent.actor_id == Some(assistant);
                mine.insert(agent.id, is_mine);
                is_mine
            }
        };
        if !is_mine {
            continue;
        }
        match turn.input {
            TurnInput::Message { message_id } => {
                answer_message(&client, assistant, &event, &turn, message_id).await?;
                messages += 1;
            }
            TurnInput::Task { task_id } => {
                start_task(&client, &event, &turn, task_id).await?;
                tasks += 1;
            }
            other => println!("turn {} ({other:?}): not worked by this example", turn.id),
        }
    }
    println!("llm_service done: worked {messages} message turns and {tasks} task turns");
    Ok(())
}

/// The idempotency key of a write of `turn`.
fn key(what: &str, turn: &TurnView) -> String {
    format!("llm-{what}-{}", turn.id)
}

/// A conversation turn: reply, decide `BEGIN_WORK` (completes the turn), create a task.
async fn answer_message(
    client: &Client,
    assistant: Uuid,
    event: &LogEvent,
    turn: &TurnView,
    message_id: Uuid,
) -> Result<()> {
    let cause = event.id().unwrap_or_default();
    let correlation = event.correlation_id().unwrap_or(cause);
    let conversation = turn.conversation_id;
    let message = client
        .at(event.position.clone())
        .message(conversation, message_id)
        .await?;
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
        .idempotency_key(key("begin-work", turn))
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
        .idempotency_key(key("task", turn))
        .causation_id(cause)
        .correlation_id(correlation)
        .await?;
    println!(
        "worked turn {} for message {}: reply {} ({:?}), checkpoint {}, task {}",
        turn.id, message.id, reply.entity.id, reply.status, decision.entity.id, task.entity.id,
    );
    Ok(())
}

/// A task turn: report `WORK_STARTED`, work, report `WORK_COMPLETED` (the turn
/// completes and the agent's next turn is dispatched), then read the task back.
async fn start_task(
    client: &Client,
    event: &LogEvent,
    turn: &TurnView,
    task_id: Uuid,
) -> Result<()> {
    let cause = event.id().unwrap_or_default();
    let correlation = event.correlation_id().unwrap_or(cause);
    let report = |checkpoint_type, label| {
        client
            .create_task_checkpoint(task_id, CreateTaskCheckpointInput { checkpoint_type })
            .idempotency_key(key(label, turn))
            .causation_id(cause)
            .correlation_id(correlation)
    };
    let started = report(TaskCheckpointType::WorkStarted, "work-started").await?;
    // … the work itself, reported as messages about the task …
    let completed = report(TaskCheckpointType::WorkCompleted, "work-completed").await?;
    let view = client.after(&completed).task(task_id).await?;
    println!(
        "worked turn {} for task {} (started {}): {} with {} checkpoint(s)",
        turn.id,
        task_id,
        started.entity.id,
        view.task.status,
        view.checkpoints.len(),
    );
    Ok(())
}
