//! The `work_turn` prompt: a claimed turn's context — its conversation and latest
//! checkpoint, the message or task it works on (or the question an auto-decide answers),
//! its tool calls with their results — rendered as the messages a model starts from, with
//! what it is expected to do through the tools.

use axum::http::HeaderMap;
use axum::Router;
use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
use rmcp::ErrorData;
use serde_json::Value;

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
    let mut text = format!(
        "You are working turn {turn_id} ({} turn) of the conversation \"{}\" ({conversation_id}).\n",
        turn["kind"].as_str().unwrap_or("conversation"),
        conversation["title"].as_str().unwrap_or(""),
    );
    match conversation["latest_checkpoint"].as_object() {
        Some(c) => text.push_str(&format!(
            "Latest decision: {} — {}\n",
            c.get("checkpoint_type")
                .and_then(Value::as_str)
                .unwrap_or(""),
            c.get("summary").and_then(Value::as_str).unwrap_or("")
        )),
        None => text.push_str("No decision was recorded yet.\n"),
    }
    let input = &turn["input"];
    match input["kind"].as_str() {
        Some("message") => {
            let id = input["message_id"].as_str().unwrap_or_default();
            let message =
                read(format!("/v1/conversations/{conversation_id}/messages/{id}")).await?;
            text.push_str(&format!(
                "The turn answers this message (from actor {}):\n{}\n",
                message["actor_id"].as_str().unwrap_or(""),
                message["content"].as_str().unwrap_or("")
            ));
        }
        Some("auto_decide") => text.push_str(
            "The user did not answer the last question in time: decide without the reply.\n",
        ),
        Some(_) => {
            let task_id = input["task_id"].as_str().unwrap_or_default();
            let task = read(format!("/v1/tasks/{task_id}")).await?;
            text.push_str(&format!(
                "The turn works task {task_id} (status {}):\n{}\n",
                task["status"].as_str().unwrap_or(""),
                task["instructions"].as_str().unwrap_or("")
            ));
        }
        None => {}
    }
    let calls = turn["tool_calls"].as_array().cloned().unwrap_or_default();
    if !calls.is_empty() {
        text.push_str("Tool calls of this turn and their results:\n");
        for call in &calls {
            text.push_str(&format!(
                "- {} {}({}): {}\n",
                call["call_id"].as_str().unwrap_or(""),
                call["tool_name"].as_str().unwrap_or(""),
                call["arguments"],
                call["result"]
            ));
        }
    }
    text.push_str(if turn["kind"] == "task" {
        "Report progress with create_task_checkpoint (WORK_STARTED, then WORK_COMPLETED or \
         WORK_PAUSED, which ends the turn); talk with add_message (task_id set)."
    } else {
        "Answer with add_message as the conversation's AI actor, then record your decision with \
         create_conversation_checkpoint (BEGIN_WORK, NEED_INFORMATION, ...), which ends the turn."
    });
    let message = PromptMessage::new_text(Role::User, text);
    Ok(GetPromptResult::new(vec![message]).with_description(format!("Work turn {turn_id}")))
}
