//! `POST /v1/actors/{id}/forget` and `POST /v1/conversations/{id}/forget` (TRUST.md
//! "Forgetting a person"): one fact on the party's own stream; the log's writer destroys
//! the party's key in the transaction that appends it. Forgetting again answers the first
//! forgetting and writes nothing.

use pm_domain::actor::{Actor, ActorCommand, ActorEvent};
use pm_domain::conversation::{Conversation, ConversationCommand, ConversationEvent};
use pm_domain::forgetting::Forgotten;
use uuid::Uuid;

use super::{expect, CommandStore, Commands};
use crate::bus::{CommandContext, Load, Outcome};
use crate::AppError;

impl<S: CommandStore> Commands<S> {
    /// `project_manager.actor.forgotten`, once.
    ///
    /// # Errors
    /// [`AppError::Domain`] (`ActorNotFound`); see [`crate::bus::CommandBus::execute`].
    pub async fn forget_actor(
        &self,
        id: Uuid,
        ctx: &CommandContext,
    ) -> Result<Outcome<Forgotten>, AppError> {
        let now = self.clock.now();
        let outcome = self
            .bus
            .execute::<Actor>(id, Load::Read, ActorCommand::Forget { id, now }, ctx, now)
            .await?;
        expect(outcome, |e| match e {
            ActorEvent::ActorForgotten(fact) => Some(fact),
            ActorEvent::ActorRegistered(_) => None,
        })
    }

    /// `project_manager.conversation.forgotten`, once.
    ///
    /// # Errors
    /// [`AppError::Domain`] (`ConversationNotFound`); see
    /// [`crate::bus::CommandBus::execute`].
    pub async fn forget_conversation(
        &self,
        id: Uuid,
        ctx: &CommandContext,
    ) -> Result<Outcome<Forgotten>, AppError> {
        let now = self.clock.now();
        let command = ConversationCommand::Forget { id, now };
        let outcome = self
            .bus
            .execute::<Conversation>(id, Load::Read, command, ctx, now)
            .await?;
        expect(outcome, |e| match e {
            ConversationEvent::ConversationForgotten(fact) => Some(fact),
            ConversationEvent::ConversationStarted(_) => None,
        })
    }
}
