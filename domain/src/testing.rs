//! Test support: an in-memory [`Lookup`] and fixed values for given/when/then tests.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use crate::lookup::TurnInfo;
use crate::types::{ActorKind, CheckpointType};
use crate::{CheckpointInfo, Lookup, LookupError, Services, TaskInfo};

/// An in-memory lookup: what other aggregates exist, as a test's "given".
#[derive(Debug, Default, Clone)]
pub struct FakeLookup {
    pub conversations: HashSet<Uuid>,
    pub actors: HashMap<Uuid, ActorKind>,
    pub checkpoints: HashMap<Uuid, CheckpointInfo>,
    pub tasks: HashMap<Uuid, TaskInfo>,
    pub turns: HashMap<Uuid, TurnInfo>,
    /// When set, every lookup fails (the store is unreachable).
    pub broken: bool,
}

impl FakeLookup {
    pub fn with_conversation(mut self, id: Uuid) -> Self {
        self.conversations.insert(id);
        self
    }
    /// A registered `human` actor.
    pub fn with_actor(self, id: Uuid) -> Self {
        self.with_actor_of_kind(id, ActorKind::Human)
    }
    pub fn with_actor_of_kind(mut self, id: Uuid, kind: ActorKind) -> Self {
        self.actors.insert(id, kind);
        self
    }
    pub fn with_checkpoint(mut self, id: Uuid, conversation_id: Uuid, t: CheckpointType) -> Self {
        self.checkpoints.insert(
            id,
            CheckpointInfo {
                conversation_id,
                checkpoint_type: t,
            },
        );
        self
    }
    pub fn with_task(mut self, id: Uuid, conversation_id: Uuid) -> Self {
        self.tasks.insert(id, TaskInfo { conversation_id });
        self
    }
    pub fn broken() -> Self {
        Self {
            broken: true,
            ..Self::default()
        }
    }
    pub fn services(self) -> Services {
        Services::new(Arc::new(self))
    }
    fn check(&self) -> Result<(), LookupError> {
        if self.broken {
            Err(LookupError("store unreachable".into()))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Lookup for FakeLookup {
    async fn conversation_exists(&self, id: Uuid) -> Result<bool, LookupError> {
        self.check()?;
        Ok(self.conversations.contains(&id))
    }
    async fn actor_kind(&self, id: Uuid) -> Result<Option<ActorKind>, LookupError> {
        self.check()?;
        Ok(self.actors.get(&id).copied())
    }
    async fn checkpoint(&self, id: Uuid) -> Result<Option<CheckpointInfo>, LookupError> {
        self.check()?;
        Ok(self.checkpoints.get(&id).copied())
    }
    async fn task(&self, id: Uuid) -> Result<Option<TaskInfo>, LookupError> {
        self.check()?;
        Ok(self.tasks.get(&id).copied())
    }
    async fn turn(&self, id: Uuid) -> Result<Option<TurnInfo>, LookupError> {
        self.check()?;
        Ok(self.turns.get(&id).copied())
    }
}

/// A fixed server time.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 5, 35, 27)
        .single()
        .expect("valid time")
}

/// A fixed id from a small number.
pub fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// Non-empty text for tests.
pub fn text(s: &str) -> crate::NonEmptyText {
    crate::NonEmptyText::parse(s).expect("non-empty")
}

/// A label for tests.
pub fn label(s: &str) -> crate::Label {
    crate::Label::parse(s).expect("a label")
}

/// A tool policy without approvers, organizations or reason, set at [`now`].
pub fn tool_policy(
    name: &str,
    tools: &str,
    action: crate::tool_policy::PolicyAction,
) -> crate::tool_policy::ToolPolicySet {
    crate::tool_policy::ToolPolicySet {
        name: name.into(),
        tools: tools.into(),
        action,
        approvers: None,
        organizations: None,
        reason: None,
        set_at: now(),
    }
}
