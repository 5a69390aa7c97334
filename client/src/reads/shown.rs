//! How a read's answer becomes its type: an entity whose personal texts were forgotten
//! (TRUST.md "Forgetting a person") is answered with `null` in them and `"forgotten":
//! true`; read as its type, each such text holds [`pm_domain::personal::STAND_IN`], so a
//! read of a forgotten actor, message or conversation succeeds — and shows no text.

use pm_api_types::views::{
    AgentView, AnomalyView, ConversationView, Forgettable, Page, SessionView, TaskCheckpointView,
    TaskDetail, TaskStatsView, TaskView, ToolCallView, TurnView,
};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use serde::de::DeserializeOwned;

/// A type a read answers: what its JSON is read as, and the type made of that.
pub trait Shown: Sized + Send + 'static {
    /// What the answer's JSON is read as.
    type Wire: DeserializeOwned + Send;
    /// The type of what was read.
    fn shown(wire: Self::Wire) -> Self;
}

/// Entities without personal texts: read as they are.
macro_rules! plain {
    ($($t:ty),* $(,)?) => {$(
        impl Shown for $t {
            type Wire = Self;
            fn shown(wire: Self) -> Self {
                wire
            }
        }
    )*};
}

/// Entities whose personal texts may have been forgotten.
macro_rules! personal {
    ($($t:ty),* $(,)?) => {$(
        impl Shown for $t {
            type Wire = Forgettable<Self>;
            fn shown(wire: Forgettable<Self>) -> Self {
                wire.entity
            }
        }
    )*};
}

plain!(
    AgentView,
    AnomalyView,
    SessionView,
    TaskCheckpointView,
    TaskStatsView,
    ToolCallView,
    TurnView,
);
personal!(
    ActorRegistered,
    ConversationCheckpointCreated,
    ConversationView,
    MessageAdded,
    TaskDetail,
    TaskView,
);

impl<T: Shown> Shown for Page<T> {
    type Wire = Page<T::Wire>;
    fn shown(wire: Page<T::Wire>) -> Self {
        Page {
            items: wire.items.into_iter().map(T::shown).collect(),
            next_cursor: wire.next_cursor,
        }
    }
}
