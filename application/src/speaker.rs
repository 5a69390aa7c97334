//! Who a principal may speak for (TRUST.md "Who a principal may speak for"): the rule is
//! stated once, in [`may_speak_as`], and applied by every command that names the actor it
//! speaks as (today `POST …/messages`' `actor_id`). A model can be talked into claiming to
//! be anyone, so who a command may speak as is decided from the caller's credentials and
//! the actor's registered kind — never from the body.
//!
//! A conversation's `actor_ids` and a task's `assigned_to` name actors without speaking as
//! them: they are not checked here.

use std::collections::BTreeSet;

use pm_domain::lookup::TurnInfo;
use pm_domain::types::ActorKind;
use pm_domain::{DomainError, Lookup};
use uuid::Uuid;

use crate::bus::CommandContext;
use crate::AppError;

/// What a principal may speak as: the roles that grant a voice, and its `actors` list.
/// The default speaks as nobody.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Voice {
    /// Role `ingress`: `human` actors.
    pub ingress: bool,
    /// Role `llm`: `ai` actors.
    pub llm: bool,
    /// Role `admin`: anyone.
    pub admin: bool,
    /// When given, only these actors (whatever the roles grant besides).
    pub actors: Option<BTreeSet<Uuid>>,
}

impl Voice {
    /// An admin's voice without an `actors` list: anyone (tests, tools of the operator).
    pub fn anyone() -> Self {
        Self {
            admin: true,
            ..Self::default()
        }
    }
}

/// The turn a fenced command acts for, and what it knows of the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FencedTurn {
    /// The turn (`PM-Turn-Id`).
    pub turn_id: Uuid,
    /// What the turn's agent acts for.
    pub info: TurnInfo,
}

/// Why a principal may not speak as an actor (`403 actor_forbidden`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpeakRefused {
    /// None of the principal's roles lets it speak as this kind of actor.
    #[error("this principal may not speak as {kind} actor {actor_id}: `human` actors need the role ingress, `ai` actors the role llm, anyone admin")]
    Kind {
        /// The actor named.
        actor_id: Uuid,
        /// Its registered kind.
        kind: ActorKind,
    },
    /// The principal has an `actors` list without this actor.
    #[error("actor {0} is not one of this principal's actors")]
    NotListed(Uuid),
    /// A fenced command names another actor than the one the turn's agent acts for.
    #[error("a command fenced by turn {turn_id} speaks only as the actor its agent acts for ({}), not as {actor_id}", .turn_actor.map_or_else(|| "none".to_string(), |a| a.to_string()))]
    NotTurnActor {
        /// The turn.
        turn_id: Uuid,
        /// The actor its agent acts for, if any.
        turn_actor: Option<Uuid>,
        /// The actor named.
        actor_id: Uuid,
    },
}

/// The rule: `voice` may speak as `actor_id` of `kind` when a role grants that kind
/// (`ingress` → `human`, `llm` → `ai`, `admin` → anyone), the `actors` list (if any) holds
/// it, and, for a command fenced by a turn, it is the actor the turn's agent acts for.
/// Every condition must hold: a list or a fence narrows what the roles grant, never widens.
///
/// # Errors
/// The first condition that fails.
pub fn may_speak_as(
    voice: &Voice,
    actor_id: Uuid,
    kind: ActorKind,
    fence: Option<FencedTurn>,
) -> Result<(), SpeakRefused> {
    let granted = voice.admin
        || match kind {
            ActorKind::Human => voice.ingress,
            ActorKind::Ai => voice.llm,
        };
    if !granted {
        return Err(SpeakRefused::Kind { actor_id, kind });
    }
    if voice
        .actors
        .as_ref()
        .is_some_and(|a| !a.contains(&actor_id))
    {
        return Err(SpeakRefused::NotListed(actor_id));
    }
    if let Some(fence) = fence {
        if fence.info.actor_id != Some(actor_id) {
            return Err(SpeakRefused::NotTurnActor {
                turn_id: fence.turn_id,
                turn_actor: fence.info.actor_id,
                actor_id,
            });
        }
    }
    Ok(())
}

/// Applies [`may_speak_as`] to a command of `ctx` speaking as `actor_id`, reading the
/// actor's kind and the fenced turn's actor through `lookup` (both remembered by the
/// store's lookup: neither ever changes). An unregistered actor passes here: the aggregate
/// answers `actor_not_found` as before. A fenced command naming no turn answers
/// [`AppError::TurnNotFound`], as its append would.
///
/// # Errors
/// [`AppError::ActorForbidden`], [`AppError::TurnNotFound`], or a lookup failure.
pub async fn require_voice(
    lookup: &dyn Lookup,
    actor_id: Uuid,
    ctx: &CommandContext,
) -> Result<(), AppError> {
    let Some(kind) = lookup
        .actor_kind(actor_id)
        .await
        .map_err(DomainError::from)?
    else {
        return Ok(());
    };
    let fence = match ctx.turn {
        None => None,
        Some(turn) => {
            let info = lookup
                .turn(turn.turn_id)
                .await
                .map_err(DomainError::from)?
                .ok_or(AppError::TurnNotFound)?;
            Some(FencedTurn {
                turn_id: turn.turn_id,
                info,
            })
        }
    };
    Ok(may_speak_as(&ctx.voice, actor_id, kind, fence)?)
}

#[cfg(test)]
mod tests;
