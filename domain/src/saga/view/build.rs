//! The rows built from the composite, as of a rune's time `at`: a row written then is
//! created at `at` if it is new (the tables keep the first `created_at`) and changed at
//! `at`.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{AgentView, SessionView, ToolCallView, ToolResultView, TurnView};
use crate::saga::rune::Instance;
use crate::saga::types::{ConversationState, HeadStatus, TurnState};
use crate::saga::{Agent, Outcome, Sagas, ToolCall, Turn};
use crate::PmAggregate;

impl Sagas {
    /// The session row as of `at`; `None` before `session.created`. It waits for the user
    /// since `at` when it does (the table keeps an earlier `waiting_since` while it still
    /// waits).
    pub fn session_view(&self, at: DateTime<Utc>) -> Option<SessionView> {
        let session = self.session()?;
        let conversation_state = session.conversation_state();
        Some(SessionView {
            conversation_id: session.conversation_id()?,
            state: session.state()?,
            conversation_state,
            root_agent_id: self.root_agent().and_then(Agent::id),
            agent_ids: self.agent_views(at).iter().map(|a| a.id).collect(),
            waiting_checkpoint_id: session.waiting_checkpoint_id(),
            waiting_since: (conversation_state == Some(ConversationState::WaitingUser))
                .then_some(at),
            consecutive_errors: self.consecutive_errors(),
            tokens_used: self.tokens_used(),
            token_budget: session.token_budget(),
            created_at: at,
            updated_at: at,
        })
    }

    /// An agent row as of `at`; `None` for an unknown agent.
    pub fn agent_view(&self, agent_id: Uuid, at: DateTime<Utc>) -> Option<AgentView> {
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
            created_at: at,
            updated_at: at,
        })
    }

    /// Every agent row as of `at`, by id.
    pub fn agent_views(&self, at: DateTime<Utc>) -> Vec<AgentView> {
        self.agents()
            .keys()
            .filter_map(|id| self.agent_view(*id, at))
            .collect()
    }

    /// A turn row as of `at`; `None` for an unknown turn.
    pub fn turn_view(&self, turn_id: Uuid, at: DateTime<Utc>) -> Option<TurnView> {
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
                .filter_map(|call| self.call_view(call, at))
                .collect(),
            created_at: at,
            updated_at: at,
        })
    }

    /// A tool call row by its instance id, as of `at`; `None` for an unknown call.
    pub fn tool_call_view(&self, id: Uuid, at: DateTime<Utc>) -> Option<ToolCallView> {
        self.call_view(self.tool_calls().get(&id)?, at)
    }

    /// A call's place in its turn's report order (0 for the first it reported): a turn
    /// lists its calls in that order although a batch's calls share one time.
    pub fn tool_call_place(&self, turn_id: Uuid, call_id: &str) -> Option<usize> {
        self.turns()
            .get(&turn_id)?
            .tool_call_ids()
            .iter()
            .position(|c| c == call_id)
    }

    fn call_view(&self, call: &ToolCall, at: DateTime<Utc>) -> Option<ToolCallView> {
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
            created_at: at,
            updated_at: at,
        })
    }

    /// Every turn row as of `at`, in enqueue order.
    pub fn turn_views(&self, at: DateTime<Utc>) -> Vec<TurnView> {
        self.turn_order()
            .iter()
            .filter_map(|id| self.turn_view(*id, at))
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
