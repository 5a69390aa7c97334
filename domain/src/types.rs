//! The enumerations of TRANSITIONS.md and API.md.

use serde::{Deserialize, Serialize};

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $wire)] $variant),+
        }

        impl $name {
            /// Every value, in the order the specification lists them.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The value as it is written on the wire.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $wire),+ }
            }

            /// Parses the wire form; `None` for an unknown value.
            pub fn parse(raw: &str) -> Option<Self> {
                match raw { $($wire => Some(Self::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                crate::types::string_enum_schema(Self::ALL.iter().map(|v| v.as_str()))
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}
    };
}

wire_enum! {
    /// The type of a conversation checkpoint.
    CheckpointType {
        /// Initial checkpoint when the conversation begins.
        ConversationStarted = "CONVERSATION_STARTED",
        /// Understanding is sufficient and work may be initiated.
        BeginWork = "BEGIN_WORK",
        /// Progress requires additional input.
        NeedInformation = "NEED_INFORMATION",
        /// No further work will occur.
        CloseConversation = "CLOSE_CONVERSATION",
        /// All work for this conversation has been completed.
        WorkCompleted = "WORK_COMPLETED",
    }
}

wire_enum! {
    /// The type of a task checkpoint; a task's status is the type of its latest one.
    TaskCheckpointType {
        /// Work on the task has begun.
        WorkStarted = "WORK_STARTED",
        /// Work on the task has completed.
        WorkCompleted = "WORK_COMPLETED",
        /// A human has signified that the work meets the requirements.
        WorkApproved = "WORK_APPROVED",
        /// A human has rejected the work.
        WorkRejected = "WORK_REJECTED",
        /// Work has paused.
        WorkPaused = "WORK_PAUSED",
    }
}

wire_enum! {
    /// Whether an actor is a person or an AI.
    ActorKind {
        /// A person.
        Human = "human",
        /// An AI (LLM) actor.
        Ai = "ai",
    }
}

/// A task's derived status: the type of its most recent task checkpoint (in the task's
/// own event order), or `NOT_STARTED` while it has none. Every status a task can have is
/// [`TaskStatus::all`]: adding a [`TaskCheckpointType`] adds a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// The task has no checkpoint yet.
    NotStarted,
    /// The type of the task's latest checkpoint.
    Latest(TaskCheckpointType),
}

impl TaskStatus {
    /// The wire name of [`TaskStatus::NotStarted`].
    pub const NOT_STARTED: &'static str = "NOT_STARTED";

    /// Every status, `NOT_STARTED` first, then the checkpoint types in specification order.
    pub fn all() -> impl Iterator<Item = Self> {
        std::iter::once(Self::NotStarted)
            .chain(TaskCheckpointType::ALL.iter().map(|t| Self::Latest(*t)))
    }

    /// How many statuses there are.
    pub const COUNT: usize = 1 + TaskCheckpointType::ALL.len();

    /// The status's place in [`TaskStatus::all`].
    pub fn index(self) -> usize {
        match self {
            Self::NotStarted => 0,
            Self::Latest(t) => {
                1 + TaskCheckpointType::ALL
                    .iter()
                    .position(|x| *x == t)
                    .unwrap_or_default()
            }
        }
    }

    /// The wire name (`NOT_STARTED`, `WORK_STARTED`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotStarted => Self::NOT_STARTED,
            Self::Latest(t) => t.as_str(),
        }
    }

    /// Parses a wire name; `None` for an unknown one.
    pub fn parse(raw: &str) -> Option<Self> {
        if raw == Self::NOT_STARTED {
            Some(Self::NotStarted)
        } else {
            TaskCheckpointType::parse(raw).map(Self::Latest)
        }
    }

    /// The checkpoint type, unless `NOT_STARTED`.
    pub fn checkpoint_type(self) -> Option<TaskCheckpointType> {
        match self {
            Self::NotStarted => None,
            Self::Latest(t) => Some(t),
        }
    }
}

impl From<Option<TaskCheckpointType>> for TaskStatus {
    fn from(latest: Option<TaskCheckpointType>) -> Self {
        latest.map_or(Self::NotStarted, Self::Latest)
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for TaskStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The OpenAPI schema of an enumeration of strings.
#[cfg(feature = "openapi")]
pub(crate) fn string_enum_schema<'a>(
    values: impl Iterator<Item = &'a str>,
) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(values))
        .into()
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for TaskStatus {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        string_enum_schema(Self::all().map(Self::as_str))
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for TaskStatus {}

impl<'de> Deserialize<'de> for TaskStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown task status {raw:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_the_checkpoint_types_then_statuses_are_not_started_and_each_type_in_order() {
        let all: Vec<_> = TaskStatus::all().collect();
        assert_eq!(all.len(), TaskStatus::COUNT);
        assert_eq!(all[0], TaskStatus::NotStarted);
        for (i, s) in all.iter().enumerate() {
            assert_eq!(s.index(), i);
            assert_eq!(TaskStatus::parse(s.as_str()), Some(*s));
        }
        assert_eq!(TaskStatus::from(None), TaskStatus::NotStarted);
        assert_eq!(
            TaskStatus::from(Some(TaskCheckpointType::WorkPaused)).as_str(),
            "WORK_PAUSED"
        );
        assert_eq!(TaskStatus::parse("DONE"), None);
    }
}
