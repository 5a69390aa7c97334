//! The request bodies of the command API (API.md). The service deserializes them directly,
//! so a field that breaks its type's rule (an empty title) is rejected naming the field;
//! pm-client serializes them.

use chrono::{DateTime, Utc};
use pm_domain::tool_policy::{Approver, PolicyAction};
use pm_domain::types::{ActorKind, CheckpointType, TaskCheckpointType};
use pm_domain::{Label, NonEmptyText};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Body of `POST /v1/actors`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterActorInput {
    /// `human` or `ai`.
    pub kind: ActorKind,
    /// The name shown.
    pub display_name: NonEmptyText,
    /// Identity in an external system; the id is then derived from it (UUIDv5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_identity: Option<Label>,
}

/// Body of `POST /v1/conversations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StartConversationInput {
    /// Participating actors: at least one, each registered.
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub actor_ids: Vec<Uuid>,
    /// Title.
    pub title: NonEmptyText,
    /// Id in the external source; with `external_source` the id is derived (UUIDv5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<Label>,
    /// External source, e.g. `github`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_source: Option<Label>,
    /// Status given by the ingress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Label>,
    /// Organization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<Label>,
}

/// Body of `POST /v1/conversations/{id}/checkpoints`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateConversationCheckpointInput {
    /// The decision.
    pub checkpoint_type: CheckpointType,
    /// LLM-optimized representation of the conversation state.
    pub summary: NonEmptyText,
}

/// Body of `POST /v1/conversations/{id}/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTaskInput {
    /// A `BEGIN_WORK` checkpoint of this conversation.
    pub checkpoint_id: Uuid,
    /// What is to be done.
    pub instructions: NonEmptyText,
    /// A registered actor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned_to: Option<Uuid>,
}

/// Body of `POST /v1/tasks/{id}/checkpoints`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTaskCheckpointInput {
    /// The kind of progress.
    #[serde(rename = "type")]
    pub checkpoint_type: TaskCheckpointType,
}

/// Body of `POST /v1/conversations/{id}/messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AddMessageInput {
    /// The author: a registered actor.
    pub actor_id: Uuid,
    /// The text.
    pub content: NonEmptyText,
    /// A task of this conversation the message is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// Identity in an external system; the id is then derived from it (UUIDv5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_identity: Option<Label>,
    /// When the message was written (RFC 3339, any offset; its UTC year 0001–9999);
    /// default: the server time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "pm_domain::time::deserialize_bounded_option"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub time: Option<DateTime<Utc>>,
}

/// Body of `PUT /v1/tool-policies/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolPolicyInput {
    /// A glob over tool names (`*` any run of characters, `?` one), 1–200 characters.
    pub tools: String,
    /// `allow`, `require_approval` or `deny`.
    pub action: PolicyAction,
    /// Who may approve (`require_approval` only): principal names and `role:<role>`;
    /// absent, roles `admin` and `ingress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<String>>))]
    pub approvers: Option<Vec<Approver>>,
    /// The organizations whose conversations it governs; absent, every conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organizations: Option<Vec<String>>,
    /// Shown to approvers as the call's `policy_reason` (default: the policy's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
