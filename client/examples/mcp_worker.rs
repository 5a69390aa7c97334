//! The LLM service's MCP variant (docs/MCP.md): a [`Worker`] claims the assistant's
//! conversation turns over HTTP (and keeps each lease alive), and for each claim opens an
//! MCP connection to `/mcp` scoped to that turn (`PM-Turn-Id`, `PM-Turn-Epoch`) — what a
//! worker hands its model. The "model" here is scripted: it reads the `work_turn` prompt,
//! answers with `add_message` as the assistant and decides with
//! `create_conversation_checkpoint` (`BEGIN_WORK`), which completes the turn. A refusal is
//! a tool result with `isError` and the problem: `turn_fenced` means the claim was lost.
//!
//! ```sh
//! PM_URL=http://127.0.0.1:8080 PM_TOKEN=<llm token> \
//!   cargo run -p pm-client --example mcp_worker -- --max-turns 3 --idle-secs 10
//! ```
//!
//! Stops after `--max-turns` turns (default 1), or `--idle-secs` (default 10) without one.

use std::collections::HashMap;
use std::time::Duration;

use pm_client::{ids, Client, TurnKind, Worker};
use rmcp::model::{CallToolRequestParams, GetPromptRequestParams};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The value of `--name <value>`, parsed.
fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Calls `tool` on `model`; answers its structured content, or the problem as an error.
async fn call(
    model: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    arguments: Value,
) -> Result<Value> {
    let mut params = CallToolRequestParams::new(tool);
    params.arguments = arguments.as_object().cloned();
    let result = model.call_tool(params).await?;
    let content = result.structured_content.unwrap_or(Value::Null);
    if result.is_error == Some(true) {
        return Err(format!(
            "{tool} refused: {} ({})",
            content["code"], content["detail"]
        )
        .into());
    }
    Ok(content)
}

#[tokio::main]
async fn main() -> Result<()> {
    let url = std::env::var("PM_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let token = std::env::var("PM_TOKEN").unwrap_or_default();
    let max_turns: usize = arg("--max-turns", 1);
    let idle = Duration::from_secs(arg("--idle-secs", 10));
    let client = Client::builder(&url).token(&token).build()?;
    let assistant = ids::actor_id("example:assistant");
    let worker = Worker::builder(client, "mcp-1")
        .actor_id(assistant)
        .kind(TurnKind::Conversation)
        .build()?;
    let mut done = 0;
    while done < max_turns {
        // `--idle-secs` without a turn ends the worker: by closing it, not by dropping
        // `next()` — a claim the service granted meanwhile would be lost with the future
        // (its turn waiting for its lease); closed, `next()` keeps it for the shutdown to
        // release and answers `None`.
        let next = worker.next();
        tokio::pin!(next);
        let next = tokio::select! {
            next = &mut next => next,
            () = tokio::time::sleep(idle) => {
                worker.close();
                next.await
            }
        };
        let Some(turn) = next? else {
            break;
        };
        let view = turn.turn().clone();
        // The turn's own MCP connection: every write on it is fenced to this claim.
        let mut headers = HashMap::new();
        headers.insert("pm-turn-id".parse()?, view.id.to_string().parse()?);
        headers.insert("pm-turn-epoch".parse()?, turn.epoch().to_string().parse()?);
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp"))
            .auth_header(token.clone())
            .custom_headers(headers);
        let model = ().serve(StreamableHttpClientTransport::from_config(config)).await?;
        let mut prompt = GetPromptRequestParams::new("work_turn");
        prompt.arguments = json!({"turn_id": view.id}).as_object().cloned();
        let prompt = model.get_prompt(prompt).await?;
        let context = serde_json::to_value(&prompt.messages)?;
        let first_line = context[0]["content"]["text"]
            .as_str()
            .and_then(|t| t.lines().next())
            .unwrap_or("")
            .to_string();
        let conversation = view.conversation_id;
        let message = call(
            &model,
            "add_message",
            json!({"conversation_id": conversation, "actor_id": assistant,
                   "content": "On it — answered through MCP."}),
        )
        .await?;
        call(
            &model,
            "create_conversation_checkpoint",
            json!({"conversation_id": conversation, "checkpoint_type": "BEGIN_WORK",
                   "summary": "Decided through MCP"}),
        )
        .await?;
        model.cancel().await?;
        turn.finish();
        done += 1;
        println!(
            "turn {} worked through MCP: message {} ({first_line})",
            view.id, message["id"]
        );
    }
    worker.shutdown().await;
    println!("{done} turn(s) worked through MCP");
    Ok(())
}
