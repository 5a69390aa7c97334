//! An approver (by default role `admin`, or `ingress` relaying a person's decision; a tool
//! policy may name others): follows the tool calls waiting for approval (WORKERS.md
//! "Tools") and decides each by a simple rule —
//! a call whose tool name or arguments contain the `--deny` text is denied with a reason,
//! every other one approved. An approved call is run by an executor (the `llm_service`
//! example runs one); a denied one ends at once with the result `denied`, which the
//! worker reads when its turn resumes.
//!
//! ```sh
//! PM_URL=http://127.0.0.1:8080 PM_TOKEN=<admin or ingress token> \
//!   cargo run -p pm-client --example approver -- --deny "item 2" --idle-secs 10
//! ```
//!
//! Stops on Ctrl-C, after deciding `--max-calls` calls, after `--timeout-secs`, or after
//! `--idle-secs` without a call to decide; `--comment` is recorded with each decision,
//! `--conversation` limits it to one conversation's calls. The service records the
//! token's principal as the approver (`GET /v1/me` says which); it refuses a call the
//! same principal reported (`self_approval_forbidden`) or whose policy does not list it
//! (`approver_forbidden`).
//!
//! A call is decided once: one another approver (or the approval timeout,
//! `PM_TOOL_APPROVAL_TIMEOUT_SECS`) decided first is reported as such, not as an error.

mod common;

use common::{arg, secs};

use std::time::{Duration, Instant};

use futures::StreamExt;
use pm_client::{ApprovalNote, Client, ToolCallView};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The rule: why `call` is denied, or `None` to approve it.
fn denial(call: &ToolCallView, deny: Option<&str>) -> Option<String> {
    let deny = deny?;
    let arguments = call.arguments.to_string();
    (call.tool_name.contains(deny) || arguments.contains(deny))
        .then(|| format!("policy: calls mentioning {deny:?} are not allowed"))
}

#[tokio::main]
async fn main() -> Result<()> {
    let client = Client::from_env()?;
    let deny = arg("--deny");
    let approver = client.me().await?.principal;
    let note = match arg("--comment") {
        Some(comment) => ApprovalNote::default().with_comment(comment),
        None => ApprovalNote::default(),
    };
    let max_calls: Option<usize> = arg("--max-calls").map(|n| n.parse()).transpose()?;
    let (timeout, idle) = (secs("--timeout-secs")?, secs("--idle-secs")?);

    let mut approvals = client.approvals().interval(Duration::from_millis(200));
    if let Some(conversation) = arg("--conversation") {
        approvals = approvals.conversation_id(conversation.parse()?);
    }
    println!(
        "approving tool calls as {approver}{}",
        deny.as_deref()
            .map(|d| format!(", denying those mentioning {d:?}"))
            .unwrap_or_default()
    );

    let (mut approved, mut denied, mut missed) = (0usize, 0usize, 0usize);
    let started = Instant::now();
    let mut last = Instant::now();
    let mut waiting = approvals.follow();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let why = loop {
        if max_calls.is_some_and(|m| approved + denied >= m) {
            break "done".to_string();
        }
        if timeout.is_some_and(|t| started.elapsed() >= t) {
            break format!("no more calls within {timeout:?}");
        }
        if idle.is_some_and(|i| last.elapsed() >= i) {
            break format!("idle for {idle:?}");
        }
        // Wake up now and then to check the limits above.
        let next = tokio::select! {
            _ = &mut ctrl_c => break "Ctrl-C".to_string(),
            next = tokio::time::timeout(Duration::from_millis(200), waiting.next()) => next,
        };
        let call = match next {
            Err(_) => continue,
            Ok(None) => break "the stream ended".to_string(),
            Ok(Some(call)) => call?,
        };
        last = Instant::now();
        let reason = call.policy_reason.as_deref().unwrap_or("-");
        println!(
            "call {} of turn {}: {} {} (asked because: {reason})",
            call.call_id, call.turn_id, call.tool_name, call.arguments
        );
        let decided = match denial(&call, deny.as_deref()) {
            Some(why) => {
                let decided = approvals.deny(&call, Some(&why), &note).await?;
                if decided.is_some() {
                    denied += 1;
                    println!("  denied: {why}");
                }
                decided
            }
            None => {
                let decided = approvals.approve(&call, &note).await?;
                if decided.is_some() {
                    approved += 1;
                    println!("  approved by {approver}");
                }
                decided
            }
        };
        if decided.is_none() {
            missed += 1;
            println!("  decided elsewhere first (another approver, or its approval timed out)");
        }
    };
    println!(
        "approver done ({why}): approved {approved}, denied {denied} call(s); {missed} decided elsewhere"
    );
    Ok(())
}
