//! The workers' rules that need no store: the claim bell's runes, a claim's compensation,
//! a refused heartbeat's reason, and whether a claim's context shows the turn's cause.

use chrono::{TimeZone, Utc};
use pm_domain::conversation::ConversationStarted;
use pm_domain::message::MessageAdded;
use pm_domain::saga::rune::{
    AGENT_TURN_DISPATCHED, SESSION_RESUMED, TURN_ASSISTANT_DELTA, TURN_CLAIMED, TURN_STARTED,
    TURN_TOOLS_FINISHED,
};
use pm_domain::saga::{TurnInput, TurnKind, TurnState};
use pm_domain::NonEmptyText;

use super::*;
use crate::views::{ConversationView, LeaseView, TaskCounts};

fn lease(turn_epoch: i64) -> Lease {
    Lease {
        turn_epoch,
        worker: "w1".into(),
        lease_expires_at: Utc
            .timestamp_opt(1_800_000_000, 0)
            .single()
            .expect("a time"),
    }
}

fn turn_row(state: TurnState, turn_epoch: i64, lease_epoch: Option<i64>) -> TurnView {
    let at = Utc
        .timestamp_opt(1_800_000_000, 0)
        .single()
        .expect("a time");
    TurnView {
        id: Uuid::from_u128(1),
        agent_id: Uuid::from_u128(2),
        conversation_id: Uuid::from_u128(3),
        kind: TurnKind::Conversation,
        task_id: None,
        input: TurnInput::Message {
            message_id: Uuid::from_u128(4),
        },
        state,
        turn_epoch: Some(turn_epoch),
        terminal_rune: None,
        deliverable: None,
        deliverable_reason: None,
        lease: lease_epoch.map(|turn_epoch| LeaseView {
            worker: "w1".into(),
            turn_epoch,
            lease_expires_at: at,
        }),
        claims: u32::from(lease_epoch.is_some()),
        input_tokens: 0,
        output_tokens: 0,
        tool_calls: Vec::new(),
        created_at: at,
        updated_at: at,
    }
}

fn conversation() -> ConversationView {
    let at = Utc
        .timestamp_opt(1_800_000_000, 0)
        .single()
        .expect("a time");
    ConversationView {
        conversation: ConversationStarted {
            id: Uuid::from_u128(3),
            actor_ids: vec![Uuid::from_u128(5)],
            title: NonEmptyText::parse("a title").expect("a title"),
            external_id: None,
            external_source: None,
            status: None,
            organization: None,
            created_at: at,
            updated_at: at,
        },
        latest_checkpoint: None,
        checkpoint_count: 0,
        message_count: 1,
        task_count: 0,
        task_counts: TaskCounts::default(),
    }
}

fn message() -> MessageAdded {
    MessageAdded {
        id: Uuid::from_u128(4),
        time: Utc
            .timestamp_opt(1_800_000_000, 0)
            .single()
            .expect("a time"),
        actor_id: Uuid::from_u128(5),
        conversation_id: Uuid::from_u128(3),
        task_id: None,
        content: NonEmptyText::parse("hello").expect("a text"),
        external_identity: None,
    }
}

fn context(conversation: Option<ConversationView>, message: Option<MessageAdded>) -> ClaimContext {
    let remembered = |e| crate::views::Forgettable::new(e, false);
    ClaimContext {
        conversation: conversation.map(remembered),
        message: message.map(|m| crate::views::Forgettable::new(m, false)),
        checkpoint: None,
        task: None,
        tool_calls: Vec::new(),
    }
}

#[test]
fn given_a_batch_with_a_dispatch_release_tools_finished_or_resume_when_checked_then_the_bell_rings()
{
    for rune in [AGENT_TURN_DISPATCHED, TURN_TOOLS_FINISHED, SESSION_RESUMED] {
        assert!(ClaimBell::rings_for([TURN_STARTED, rune]), "{rune}");
    }
    for rune in CLAIMABLE_AFTER {
        assert!(ClaimBell::rings_for([rune]), "{rune}");
    }
}

#[test]
fn given_a_batch_that_makes_no_turn_claimable_when_checked_then_the_bell_stays_silent() {
    assert!(!ClaimBell::rings_for([
        TURN_STARTED,
        TURN_CLAIMED,
        TURN_ASSISTANT_DELTA
    ]));
    assert!(!ClaimBell::rings_for(std::iter::empty::<&str>()));
}

#[test]
fn given_a_claim_that_could_not_be_answered_then_its_own_epoch_is_released_as_not_answered() {
    let op = unanswered(&lease(7));
    assert_eq!(
        op,
        WorkerOp::Release {
            turn_epoch: 7,
            reason: CLAIM_NOT_ANSWERED.into(),
        }
    );
    assert_eq!(CLAIM_NOT_ANSWERED, "claim_not_answered");
}

#[test]
fn given_no_turn_when_a_heartbeat_is_refused_then_turn_not_found() {
    assert_eq!(heartbeat_refused(None, 1), Refused::TurnNotFound);
}

#[test]
fn given_a_turn_claimed_again_when_the_old_claims_heartbeat_is_refused_then_turn_fenced_saying_stale(
) {
    let row = turn_row(TurnState::Streaming, 3, Some(3));
    let Refused::Conflict { code, detail } = heartbeat_refused(Some(&row), 2) else {
        panic!("a conflict");
    };
    assert_eq!(code, pm_domain::saga::TURN_FENCED);
    assert!(detail.contains("stale"), "{detail}");
}

#[test]
fn given_a_row_showing_the_claim_when_its_heartbeat_is_refused_then_turn_fenced_lease_ended() {
    let row = turn_row(TurnState::Streaming, 3, Some(3));
    let Refused::Conflict { detail, .. } = heartbeat_refused(Some(&row), 3) else {
        panic!("a conflict");
    };
    assert_eq!(detail, Fenced::LeaseEnded { given: 3 }.to_string());
}

#[test]
fn given_a_message_turn_when_the_context_holds_the_conversation_and_message_then_it_shows_the_cause(
) {
    let input = TurnInput::Message {
        message_id: Uuid::from_u128(4),
    };
    assert!(context(Some(conversation()), Some(message())).shows_cause_of(&input));
}

#[test]
fn given_a_message_turn_when_the_read_model_lacks_the_message_or_conversation_then_no_cause_shown()
{
    let input = TurnInput::Message {
        message_id: Uuid::from_u128(4),
    };
    assert!(!context(Some(conversation()), None).shows_cause_of(&input));
    assert!(!context(None, Some(message())).shows_cause_of(&input));
}

#[test]
fn given_an_auto_decide_without_checkpoint_then_only_the_read_after_the_claim_shows_its_cause() {
    let input = TurnInput::AutoDecide {
        checkpoint_id: None,
    };
    assert!(!context(Some(conversation()), Some(message())).shows_cause_of(&input));
}

#[test]
fn given_a_task_turn_when_the_context_has_no_task_then_no_cause_shown() {
    let input = TurnInput::Task {
        task_id: Uuid::from_u128(6),
    };
    assert!(!context(Some(conversation()), None).shows_cause_of(&input));
}
