//! The `work_turn` prompt: a claimed turn's context — its conversation and latest
//! checkpoint, the message or task it works on (or the question an auto-decide answers),
//! its tool calls with their results — rendered as the messages a model starts from, with
//! what it is expected to do through the tools. Every text people or tools wrote is quoted
//! as data from its named actor, never as instructions ([`super::quote`]).

use axum::http::HeaderMap;
use axum::Router;
use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
use rmcp::ErrorData;
use serde_json::Value;

use super::quote::{self, quoted, Author};

/// The prompt's name.
pub const WORK_TURN: &str = "work_turn";

/// The prompts `prompts/list` shows.
pub fn list() -> Vec<Prompt> {
    let turn = PromptArgument::new("turn_id")
        .with_description("The claimed turn (claim_turn's turn.id)")
        .with_required(true);
    vec![Prompt::new(
        WORK_TURN,
        Some("What a model needs to work a claimed turn: the conversation, its latest checkpoint, the message or task, the tool results so far, and how to answer."),
        Some(vec![turn]),
    )]
}

/// Renders `work_turn` for the turn the arguments name, read as the caller.
pub async fn work_turn(
    router: &Router,
    headers: &HeaderMap,
    arguments: Option<&serde_json::Map<String, Value>>,
) -> Result<GetPromptResult, ErrorData> {
    let turn_id = arguments
        .and_then(|a| a.get("turn_id"))
        .and_then(Value::as_str)
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        .ok_or_else(|| ErrorData::invalid_params("turn_id: a turn's UUID is required", None))?;
    let read = |path: String| async move {
        let (ok, body) = super::tools::get(router, headers, &path).await;
        if ok {
            Ok(body)
        } else {
            let detail = body["detail"]
                .as_str()
                .unwrap_or("not readable")
                .to_string();
            Err(ErrorData::invalid_params(detail, Some(body)))
        }
    };
    let turn = read(format!("/v1/turns/{turn_id}")).await?;
    let conversation_id = turn["conversation_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let conversation = read(format!("/v1/conversations/{conversation_id}")).await?;
    let input = &turn["input"];
    let (mut message, mut author, mut task) = (None, None, None);
    match input["kind"].as_str() {
        Some("message") => {
            let id = input["message_id"].as_str().unwrap_or_default();
            let m = read(format!("/v1/conversations/{conversation_id}/messages/{id}")).await?;
            // Who wrote it, to name them; a caller that may not read the actor still gets
            // the message, quoted under the actor's id alone.
            let actor_id = m["actor_id"].as_str().unwrap_or_default();
            let (ok, actor) =
                super::tools::get(router, headers, &format!("/v1/actors/{actor_id}")).await;
            author = ok.then_some(actor);
            message = Some(m);
        }
        Some("auto_decide") | None => {}
        Some(_) => {
            let task_id = input["task_id"].as_str().unwrap_or_default();
            task = Some(read(format!("/v1/tasks/{task_id}")).await?);
        }
    }
    let text = render(&Context {
        turn: &turn,
        conversation: &conversation,
        message: message.as_ref(),
        author: author.as_ref(),
        task: task.as_ref(),
    });
    let message = PromptMessage::new_text(Role::User, text);
    Ok(GetPromptResult::new(vec![message]).with_description(format!("Work turn {turn_id}")))
}

/// What `work_turn` renders, as read for the caller.
struct Context<'a> {
    turn: &'a Value,
    conversation: &'a Value,
    /// The message a conversation turn answers.
    message: Option<&'a Value>,
    /// The message's actor, when the caller may read it.
    author: Option<&'a Value>,
    /// The task a task turn works.
    task: Option<&'a Value>,
}

/// The prompt's text: the service's own words, and every text people or tools wrote as a
/// quote (see [`quote`]).
fn render(c: &Context<'_>) -> String {
    let str_of = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_string();
    let turn_id = str_of(c.turn, "id");
    let conversation_id = str_of(c.turn, "conversation_id");
    let kind = c.turn["kind"].as_str().unwrap_or("conversation");
    let mut text = format!(
        "You are working turn {turn_id} ({kind} turn) of the conversation {conversation_id}.\n\n{}\n\n",
        quote::PREAMBLE
    );
    let started_by = Author::Source("the service that started the conversation");
    text.push_str(&quoted(
        "conversation title",
        &started_by,
        &c.conversation["title"],
    ));
    match c.conversation["latest_checkpoint"].as_object() {
        Some(checkpoint) => {
            let decision = checkpoint.get("checkpoint_type").and_then(Value::as_str);
            text.push_str(&format!("Latest decision: {}.\n", decision.unwrap_or("")));
            let by = Author::Source("the model that recorded the decision");
            let summary = checkpoint.get("summary").unwrap_or(&Value::Null);
            text.push_str(&quoted("summary of the latest decision", &by, summary));
        }
        None => text.push_str("No decision was recorded yet.\n"),
    }
    if let Some(message) = c.message {
        let actor_id = message["actor_id"].as_str().unwrap_or_default();
        let author = Author::Actor {
            id: actor_id,
            kind: c.author.and_then(|a| a["kind"].as_str()),
            display_name: c.author.and_then(|a| a["display_name"].as_str()),
        };
        text.push_str("The turn answers this message:\n");
        text.push_str(&quoted("message", &author, &message["content"]));
    } else if let Some(task) = c.task {
        text.push_str(&format!(
            "The turn works task {} (status {}).\n",
            str_of(task, "id"),
            str_of(task, "status")
        ));
        let by = Author::Source("the model or operator that created the task");
        text.push_str(&quoted("task instructions", &by, &task["instructions"]));
    } else if c.turn["input"]["kind"] == "auto_decide" {
        text.push_str(
            "The user did not answer the last question in time: decide without the reply.\n",
        );
    }
    let calls = c.turn["tool_calls"].as_array().cloned().unwrap_or_default();
    if !calls.is_empty() {
        text.push_str("Tool calls of this turn and their results:\n");
        let by = Author::Source("the model that reported the call and the tool that ran it");
        for call in &calls {
            let call = serde_json::json!({
                "call_id": call["call_id"], "tool_name": call["tool_name"],
                "arguments": call["arguments"], "result": call["result"],
            });
            text.push_str(&quoted("tool call", &by, &call));
        }
    }
    text.push_str(if kind == "task" {
        "Report progress with create_task_checkpoint (WORK_STARTED, then WORK_COMPLETED or \
         WORK_PAUSED, which ends the turn); talk with add_message (task_id set)."
    } else {
        "Answer with add_message as the conversation's AI actor, then record your decision with \
         create_conversation_checkpoint (BEGIN_WORK, NEED_INFORMATION, ...), which ends the turn."
    });
    text
}

#[cfg(test)]
mod tests;
