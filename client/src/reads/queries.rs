//! The list queries: typed filters plus paging (`limit`, `cursor`), each knowing its path
//! and answer type ([`ListQuery`]), so [`Reader::list`](crate::Reader::list) and
//! [`Reader::walk`](crate::Reader::walk) serve them all.

use chrono::{DateTime, Utc};
use pm_api_types::views::{
    AgentView, AnomalyView, ConversationView, SessionView, TaskView, ToolCallView, TurnView,
};
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use pm_domain::saga::{AgentState, ConversationState, SessionState, ToolCallState, TurnState};
use pm_domain::types::{CheckpointType, TaskStatus};
use uuid::Uuid;

/// Query parameters: name and value.
pub(crate) type Params = Vec<(&'static str, String)>;

mod sealed {
    pub trait Sealed {}
}

/// A paginated list of the API. Implemented by the query types of this crate only.
pub trait ListQuery: sealed::Sealed + Clone + Send + Sync + 'static {
    /// What the list holds.
    type Item: super::Shown;
    /// The path, relative to the base URL.
    fn path(&self) -> String;
    /// The filters, as query parameters.
    fn filters(&self, params: &mut Params);
    /// The paging.
    fn paging(&self) -> &Paging;
    /// The same query from another cursor.
    fn with_cursor(self, cursor: Option<String>) -> Self;
}

/// Page size and position in a list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paging {
    /// Items per page, 1–500 (the service's default: 50).
    pub limit: Option<u32>,
    /// The previous page's `next_cursor` (opaque; valid for the list that issued it).
    pub cursor: Option<String>,
}

impl Paging {
    pub(crate) fn params(&self, params: &mut Params) {
        push(params, "limit", self.limit);
        push(params, "cursor", self.cursor.as_ref());
    }
}

fn push(params: &mut Params, name: &'static str, value: Option<impl ToString>) {
    if let Some(v) = value {
        params.push((name, v.to_string()));
    }
}

fn time(t: DateTime<Utc>) -> String {
    pm_domain::time::format(&t)
}

/// Defines a list query: a struct with public filter fields and `paging`, builder setters,
/// and its [`ListQuery`] impl. `root` lists are constructed with `new()` (or `default()`),
/// `child` lists (of one conversation) with `of(conversation_id)`.
macro_rules! list_query {
    (root $(#[$meta:meta])* $name:ident => $item:ty, $path:literal; $($fields:tt)*) => {
        list_query!(@struct [Default] $(#[$meta])* $name; ; $($fields)*);
        impl $name {
            /// Every item (no filter), default paging.
            pub fn new() -> Self {
                Self::default()
            }
        }
        list_query!(@impl $name => $item, |_q| $path.to_string(); $($fields)*);
    };
    (child $(#[$meta:meta])* $name:ident => $item:ty, $path:literal;
        $( $(#[$fmeta:meta])* $field:ident : $ty:ty => $param:literal, $conv:expr; )*
    ) => {
        list_query!(@struct [] $(#[$meta])* $name;
            /// The conversation (a path parameter).
            conversation_id: Uuid;
            $( $(#[$fmeta])* $field : $ty => $param, $conv; )*);
        impl $name {
            /// The list of one conversation, no filter, default paging.
            pub fn of(conversation_id: Uuid) -> Self {
                Self { conversation_id, $($field: None,)* paging: Paging::default() }
            }
        }
        list_query!(@impl $name => $item, |q| format!($path, q.conversation_id);
            $( $(#[$fmeta])* $field : $ty => $param, $conv; )*);
    };
    (@struct [$($derive:ident)?] $(#[$meta:meta])* $name:ident;
        $($(#[$pmeta:meta])* $parent:ident : $pty:ty)?;
        $( $(#[$fmeta:meta])* $field:ident : $ty:ty => $param:literal, $conv:expr; )*
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq $(, $derive)?)]
        #[non_exhaustive]
        pub struct $name {
            $( $(#[$pmeta])* pub $parent: $pty, )?
            $( $(#[$fmeta])* pub $field: Option<$ty>, )*
            /// Page size and cursor.
            pub paging: Paging,
        }
    };
    (@impl $name:ident => $item:ty, $path:expr;
        $( $(#[$fmeta:meta])* $field:ident : $ty:ty => $param:literal, $conv:expr; )*
    ) => {
        impl $name {
            $(
                $(#[$fmeta])*
                pub fn $field(mut self, value: impl Into<$ty>) -> Self {
                    self.$field = Some(value.into());
                    self
                }
            )*

            /// Items per page (1–500).
            pub fn limit(mut self, limit: u32) -> Self {
                self.paging.limit = Some(limit);
                self
            }

            /// Continue after a previous page's `next_cursor`.
            pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
                self.paging.cursor = Some(cursor.into());
                self
            }
        }

        impl sealed::Sealed for $name {}

        impl ListQuery for $name {
            type Item = $item;
            fn path(&self) -> String {
                let path: fn(&Self) -> String = $path;
                path(self)
            }
            #[allow(unused_variables)]
            fn filters(&self, params: &mut Params) {
                $(
                    let conv: fn(&$ty) -> String = $conv;
                    push(params, $param, self.$field.as_ref().map(conv));
                )*
            }
            fn paging(&self) -> &Paging {
                &self.paging
            }
            fn with_cursor(mut self, cursor: Option<String>) -> Self {
                self.paging.cursor = cursor;
                self
            }
        }
    };
}

list_query! { root
    /// `GET /v1/conversations`, by `created_at`.
    ConversationQuery => ConversationView, "/v1/conversations";
    /// Exact organization.
    organization: String => "organization", String::clone;
    /// Exact status (as the ingress gave it).
    status: String => "status", String::clone;
    /// Exact external source.
    external_source: String => "external_source", String::clone;
    /// Conversations this actor takes part in.
    actor_id: Uuid => "actor_id", Uuid::to_string;
    /// Created at or after.
    created_after: DateTime<Utc> => "created_after", |t| time(*t);
    /// Created before.
    created_before: DateTime<Utc> => "created_before", |t| time(*t);
    /// The type of the latest checkpoint.
    latest_checkpoint_type: CheckpointType => "latest_checkpoint_type", |t| t.as_str().into();
}

list_query! { root
    /// `GET /v1/tasks`, by `created_at`.
    TaskQuery => TaskView, "/v1/tasks";
    /// Derived status.
    status: TaskStatus => "status", |s| s.as_str().into();
    /// Assignee.
    assigned_to: Uuid => "assigned_to", Uuid::to_string;
    /// Conversation.
    conversation_id: Uuid => "conversation_id", Uuid::to_string;
    /// The `BEGIN_WORK` checkpoint the task was created under.
    checkpoint_id: Uuid => "checkpoint_id", Uuid::to_string;
    /// The conversation's organization.
    organization: String => "organization", String::clone;
}

list_query! { child
    /// `GET /v1/conversations/{id}/messages`, in `time` order.
    MessageQuery => MessageAdded, "/v1/conversations/{}/messages";
    /// Only messages about this task.
    task_id: Uuid => "task_id", Uuid::to_string;
    /// Only messages by this actor.
    actor_id: Uuid => "actor_id", Uuid::to_string;
}

list_query! { child
    /// `GET /v1/conversations/{id}/checkpoints`, oldest first.
    CheckpointQuery => ConversationCheckpointCreated, "/v1/conversations/{}/checkpoints";
}

list_query! { child
    /// `GET /v1/conversations/{id}/tasks`, by `created_at`, with derived status.
    ConversationTaskQuery => TaskView, "/v1/conversations/{}/tasks";
}

list_query! { root
    /// `GET /v1/sessions`, by `created_at`: the operators' overview.
    SessionQuery => SessionView, "/v1/sessions";
    /// Sessions in this lifecycle state.
    state: SessionState => "state", |s| s.as_str().into();
    /// Sessions whose conversation is in this FCMP state (`WaitingUser`: a person owes a
    /// reply).
    conversation_state: ConversationState => "conversation_state", |s| s.as_str().into();
}

list_query! { root
    /// `GET /v1/agents`, by `created_at`.
    AgentQuery => AgentView, "/v1/agents";
    /// Agents of this conversation.
    conversation_id: Uuid => "conversation_id", Uuid::to_string;
    /// Agents acting for this actor.
    actor_id: Uuid => "actor_id", Uuid::to_string;
    /// Agents in this state.
    state: AgentState => "state", |s| s.as_str().into();
}

list_query! { root
    /// `GET /v1/turns`, by `created_at`.
    TurnQuery => TurnView, "/v1/turns";
    /// Turns of this conversation.
    conversation_id: Uuid => "conversation_id", Uuid::to_string;
    /// Turns of this agent.
    agent_id: Uuid => "agent_id", Uuid::to_string;
    /// Turns for this task.
    task_id: Uuid => "task_id", Uuid::to_string;
    /// Turns in this state.
    state: TurnState => "state", |s| s.as_str().into();
}

list_query! { root
    /// `GET /v1/tool-calls`, oldest first: approvers look for `awaiting_approval`,
    /// executors for `executing` (see [`Approvals`](crate::Approvals) and
    /// [`Executor`](crate::Executor), which poll these).
    ToolCallQuery => ToolCallView, "/v1/tool-calls";
    /// Calls in this state.
    state: ToolCallState => "state", |s| s.as_str().into();
    /// Calls of this conversation's turns.
    conversation_id: Uuid => "conversation_id", Uuid::to_string;
    /// Calls of this turn.
    turn_id: Uuid => "turn_id", Uuid::to_string;
}

list_query! { root
    /// `GET /v1/anomalies`, by `created_at`: inputs a saga had no edge for.
    AnomalyQuery => AnomalyView, "/v1/anomalies";
    /// Anomalies of this conversation.
    conversation_id: Uuid => "conversation_id", Uuid::to_string;
}
