//! Read-side views of the composite: the rows of `GET /v1/sessions/{id}`, `/v1/agents`
//! and `/v1/turns` (API.md), with the composite-derived fields filled in. Times
//! (`waiting_since`, `updated_at`) are the log's: the time of the rune that changed a row.

use std::collections::BTreeSet;

use serde::Serialize;
use uuid::Uuid;

use super::rune::Instance;
use super::types::{
    AgentRole, AgentState, ConversationState, HeadStatus, SessionState, ToolCallState, ToolStatus,
    TurnKind, TurnState,
};
use super::{Agent, Lease, Outcome, Sagas, ToolCall, Turn, TurnInput};
use crate::PmAggregate;

/// A session row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionView {
    /// The conversation (= the session's id).
    pub conversation_id: Uuid,
    /// The lifecycle state.
    pub state: SessionState,
    /// The FCMP state, null before the first human message or decision.
    pub conversation_state: Option<ConversationState>,
    /// The root agent.
    pub root_agent_id: Option<Uuid>,
    /// Every agent of the session.
    pub agent_ids: Vec<Uuid>,
    /// The `NEED_INFORMATION` checkpoint while `waiting_user`.
    pub waiting_checkpoint_id: Option<Uuid>,
    /// Consecutive turn errors (composite).
    pub consecutive_errors: u32,
    /// Tokens its turns reported (composite).
    pub tokens_used: u64,
    /// Its token budget; `None`: unlimited.
    pub token_budget: Option<u64>,
}

/// An agent row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentView {
    /// The agent.
    pub id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// The actor it acts for.
    pub actor_id: Option<Uuid>,
    /// `root` or `worker`.
    pub role: AgentRole,
    /// Its state (composite: idle once its leased turn is terminal).
    pub state: AgentState,
    /// The epoch of its last lease.
    pub turn_epoch: i64,
    /// The turn it runs (composite: null once terminal).
    pub active_turn_id: Option<Uuid>,
    /// The L0 head: what its active turn is doing.
    pub head_status: HeadStatus,
    /// Its inbox, oldest first.
    pub queued_turn_ids: Vec<Uuid>,
    /// Tokens its turns reported (composite).
    pub tokens_used: u64,
}

/// A turn row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnView {
    /// The turn.
    pub id: Uuid,
    /// Its agent.
    pub agent_id: Uuid,
    /// Its conversation.
    pub conversation_id: Uuid,
    /// `conversation` or `task`.
    pub kind: TurnKind,
    /// The task of a task turn.
    pub task_id: Option<Uuid>,
    /// What it was enqueued to do.
    pub input: TurnInput,
    /// Its state.
    pub state: TurnState,
    /// Its lease's epoch.
    pub turn_epoch: Option<i64>,
    /// The name of its terminal rune.
    pub terminal_rune: Option<String>,
    /// The delivered message.
    pub deliverable: Option<Uuid>,
    /// Why the deliverable is what it is.
    pub deliverable_reason: Option<String>,
    /// The worker's claim holding it, if one does.
    pub lease: Option<Lease>,
    /// How many times it was claimed.
    pub claims: u32,
    /// Prompt tokens its workers reported.
    pub input_tokens: u64,
    /// Completion tokens its workers reported.
    pub output_tokens: u64,
    /// Its tool calls with their results, in the order it reported them.
    pub tool_calls: Vec<ToolCallView>,
}

/// A tool call row (WORKERS.md reads): the turn view's `tool_calls`, `GET /v1/tool-calls`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallView {
    /// The worker's id of the call, unique within its turn.
    pub call_id: String,
    /// Its turn.
    pub turn_id: Uuid,
    /// The turn's conversation.
    pub conversation_id: Uuid,
    /// The tool.
    pub tool_name: String,
    /// Its arguments.
    pub arguments: serde_json::Value,
    /// Its lifecycle state.
    pub state: ToolCallState,
    /// Whether it waits (or waited) for an approver.
    pub requires_approval: bool,
    /// Why the policy asks a person.
    pub policy_reason: Option<String>,
    /// The principal that approved or denied it.
    pub approver: Option<String>,
    /// Its own execution timeout, if the worker gave one.
    pub timeout_ms: Option<u64>,
    /// Its one result, once it has it.
    pub result: Option<ToolResultView>,
    /// The tool policy it was reported under.
    pub policy: Option<String>,
    /// The principal that reported it.
    pub reported_by: Option<String>,
    /// Who may decide it, when it needs (or needed) a person.
    pub approvers: Option<Vec<String>>,
    /// The `human` actor whose decision its approver relayed.
    pub on_behalf_of: Option<Uuid>,
    /// Its approver's comment.
    pub comment: Option<String>,
}

/// A call's `tool.result`, as the reads show it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ToolResultView {
    /// How it ended.
    pub status: ToolStatus,
    /// The tool's answer.
    pub output: Option<serde_json::Value>,
    /// What went wrong.
    pub error: Option<String>,
    /// Why the service ended it (a denial's reason, which deadline, the turn's end).
    pub reason: Option<String>,
}

impl Sagas {
    /// The session row; `None` before `session.created`.
    pub fn session_view(&self) -> Option<SessionView> {
        let session = self.session()?;
        Some(SessionView {
            conversation_id: session.conversation_id()?,
            state: session.state()?,
            conversation_state: session.conversation_state(),
            root_agent_id: self.root_agent().and_then(Agent::id),
            agent_ids: self.agent_views().iter().map(|a| a.id).collect(),
            waiting_checkpoint_id: session.waiting_checkpoint_id(),
            consecutive_errors: self.consecutive_errors(),
            tokens_used: self.tokens_used(),
            token_budget: session.token_budget(),
        })
    }

    /// An agent row; `None` for an unknown agent.
    pub fn agent_view(&self, agent_id: Uuid) -> Option<AgentView> {
        let agent = self.agents().get(&agent_id)?;
        Some(AgentView {
            id: agent.id()?,
            conversation_id: agent.conversation_id()?,
            actor_id: agent.actor_id(),
            role: agent.role()?,
            state: self.agent_state(agent_id)?,
            turn_epoch: agent.turn_epoch(),
            active_turn_id: self.active_turn(agent_id).and_then(Turn::id),
            head_status: match self.active_turn(agent_id).and_then(Turn::state) {
                Some(TurnState::Dispatched) => HeadStatus::Dispatched,
                Some(TurnState::Streaming) => HeadStatus::Running,
                Some(TurnState::ToolExecuting) => HeadStatus::Suspended,
                _ => HeadStatus::Idle,
            },
            queued_turn_ids: agent.inbox().to_vec(),
            tokens_used: self.agent_tokens(agent_id),
        })
    }

    /// Every agent row, by id.
    pub fn agent_views(&self) -> Vec<AgentView> {
        self.agents()
            .keys()
            .filter_map(|id| self.agent_view(*id))
            .collect()
    }

    /// A turn row; `None` for an unknown turn.
    pub fn turn_view(&self, turn_id: Uuid) -> Option<TurnView> {
        let turn = self.turns().get(&turn_id)?;
        Some(TurnView {
            id: turn.id()?,
            agent_id: turn.agent_id()?,
            conversation_id: turn.conversation_id()?,
            kind: turn.kind()?,
            task_id: turn.task_id(),
            input: turn.input()?.clone(),
            state: turn.state()?,
            turn_epoch: turn.turn_epoch(),
            terminal_rune: turn.terminal_rune().map(str::to_string),
            deliverable: turn.deliverable(),
            deliverable_reason: turn.deliverable_reason().map(str::to_string),
            lease: turn.lease().cloned(),
            claims: turn.claims(),
            input_tokens: turn.usage().map_or(0, |(input, _)| input),
            output_tokens: turn.usage().map_or(0, |(_, output)| output),
            tool_calls: self
                .turn_tool_calls(turn_id)
                .into_iter()
                .filter_map(|call| self.call_view(call))
                .collect(),
        })
    }

    /// A tool call row by its instance id; `None` for an unknown call.
    pub fn tool_call_view(&self, id: Uuid) -> Option<ToolCallView> {
        self.call_view(self.tool_calls().get(&id)?)
    }

    fn call_view(&self, call: &ToolCall) -> Option<ToolCallView> {
        let turn_id = call.turn_id()?;
        Some(ToolCallView {
            call_id: call.call_id()?.to_string(),
            turn_id,
            conversation_id: self.turns().get(&turn_id)?.conversation_id()?,
            tool_name: call.tool_name().to_string(),
            arguments: call.arguments().clone(),
            state: call.state()?,
            requires_approval: call.requires_approval(),
            policy_reason: call.policy_reason().map(str::to_string),
            approver: call.approver().map(str::to_string),
            timeout_ms: call.timeout_ms(),
            result: call.result().map(|r| ToolResultView {
                status: r.status,
                output: r.output.clone(),
                error: r.error.clone(),
                reason: r.reason.clone(),
            }),
            policy: call.policy().map(str::to_string),
            reported_by: call.reported_by().map(str::to_string),
            approvers: call
                .requires_approval()
                .then(|| call.approvers().iter().map(ToString::to_string).collect()),
            on_behalf_of: call.on_behalf_of(),
            comment: call.comment().map(str::to_string),
        })
    }

    /// Every turn row, in enqueue order.
    pub fn turn_views(&self) -> Vec<TurnView> {
        self.turn_order()
            .iter()
            .filter_map(|id| self.turn_view(*id))
            .collect()
    }

    /// The rows an outcome changed: each rune's instance, plus the agent of every turn
    /// that changed (its composite state and active turn follow the turn).
    pub fn touched(&self, outcome: &Outcome) -> BTreeSet<Instance> {
        let mut touched = BTreeSet::new();
        for rec in &outcome.runes {
            touched.insert(rec.instance);
            if let Instance::Turn(id) = rec.instance {
                if let Some(agent) = self.turns().get(&id).and_then(Turn::agent_id) {
                    touched.insert(Instance::Agent(agent));
                }
            }
        }
        touched
    }
}
