//! Given a principal's voice and an actor, when it speaks as the actor, then the rule of
//! TRUST.md "Who a principal may speak for" answers — one test per line of the rule.

use std::collections::BTreeSet;

use super::*;

const HUMAN: Uuid = Uuid::from_u128(1);
const AI: Uuid = Uuid::from_u128(2);
const TURN: Uuid = Uuid::from_u128(9);

fn voice(ingress: bool, llm: bool, admin: bool) -> Voice {
    Voice {
        ingress,
        llm,
        admin,
        actors: None,
    }
}

fn fenced(actor_id: Option<Uuid>) -> Option<FencedTurn> {
    Some(FencedTurn {
        turn_id: TURN,
        info: TurnInfo { actor_id },
    })
}

#[test]
fn ingress_speaks_as_humans_only() {
    let ingress = voice(true, false, false);
    assert_eq!(
        may_speak_as(&ingress, HUMAN, ActorKind::Human, None),
        Ok(())
    );
    assert_eq!(
        may_speak_as(&ingress, AI, ActorKind::Ai, None),
        Err(SpeakRefused::Kind {
            actor_id: AI,
            kind: ActorKind::Ai
        })
    );
}

#[test]
fn llm_speaks_as_ais_only() {
    let llm = voice(false, true, false);
    assert_eq!(may_speak_as(&llm, AI, ActorKind::Ai, None), Ok(()));
    assert_eq!(
        may_speak_as(&llm, HUMAN, ActorKind::Human, None),
        Err(SpeakRefused::Kind {
            actor_id: HUMAN,
            kind: ActorKind::Human
        })
    );
}

#[test]
fn ingress_and_llm_together_speak_as_both() {
    let both = voice(true, true, false);
    assert_eq!(may_speak_as(&both, HUMAN, ActorKind::Human, None), Ok(()));
    assert_eq!(may_speak_as(&both, AI, ActorKind::Ai, None), Ok(()));
}

#[test]
fn admin_speaks_as_anyone() {
    let admin = Voice::anyone();
    assert_eq!(may_speak_as(&admin, HUMAN, ActorKind::Human, None), Ok(()));
    assert_eq!(may_speak_as(&admin, AI, ActorKind::Ai, None), Ok(()));
}

#[test]
fn other_roles_speak_as_nobody() {
    let analyst = Voice::default();
    assert!(may_speak_as(&analyst, HUMAN, ActorKind::Human, None).is_err());
    assert!(may_speak_as(&analyst, AI, ActorKind::Ai, None).is_err());
}

#[test]
fn an_actors_list_allows_only_those() {
    let listed = Voice {
        actors: Some(BTreeSet::from([HUMAN])),
        ..voice(true, false, false)
    };
    let other = Uuid::from_u128(3);
    assert_eq!(may_speak_as(&listed, HUMAN, ActorKind::Human, None), Ok(()));
    assert_eq!(
        may_speak_as(&listed, other, ActorKind::Human, None),
        Err(SpeakRefused::NotListed(other))
    );
}

#[test]
fn an_actors_list_narrows_admin_too() {
    let listed = Voice {
        actors: Some(BTreeSet::from([AI])),
        ..Voice::anyone()
    };
    assert_eq!(may_speak_as(&listed, AI, ActorKind::Ai, None), Ok(()));
    assert_eq!(
        may_speak_as(&listed, HUMAN, ActorKind::Human, None),
        Err(SpeakRefused::NotListed(HUMAN))
    );
}

#[test]
fn an_actors_list_does_not_widen_the_roles() {
    let listed = Voice {
        actors: Some(BTreeSet::from([HUMAN])),
        ..voice(false, true, false)
    };
    assert_eq!(
        may_speak_as(&listed, HUMAN, ActorKind::Human, None),
        Err(SpeakRefused::Kind {
            actor_id: HUMAN,
            kind: ActorKind::Human
        })
    );
}

#[test]
fn a_fenced_command_speaks_as_the_turns_actor() {
    let llm = voice(false, true, false);
    assert_eq!(
        may_speak_as(&llm, AI, ActorKind::Ai, fenced(Some(AI))),
        Ok(())
    );
}

#[test]
fn a_fenced_command_refuses_another_actor_even_for_admin() {
    let other_ai = Uuid::from_u128(4);
    assert_eq!(
        may_speak_as(&Voice::anyone(), other_ai, ActorKind::Ai, fenced(Some(AI))),
        Err(SpeakRefused::NotTurnActor {
            turn_id: TURN,
            turn_actor: Some(AI),
            actor_id: other_ai
        })
    );
}

#[test]
fn a_fenced_command_of_an_agent_without_actor_speaks_as_nobody() {
    let refused = may_speak_as(&Voice::anyone(), AI, ActorKind::Ai, fenced(None));
    assert_eq!(
        refused,
        Err(SpeakRefused::NotTurnActor {
            turn_id: TURN,
            turn_actor: None,
            actor_id: AI
        })
    );
    assert!(refused.is_err_and(|e| e.to_string().contains("(none)")));
}

#[test]
fn a_fence_does_not_widen_the_roles() {
    let llm = voice(false, true, false);
    assert!(matches!(
        may_speak_as(&llm, HUMAN, ActorKind::Human, fenced(Some(HUMAN))),
        Err(SpeakRefused::Kind { .. })
    ));
}
