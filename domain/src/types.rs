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
