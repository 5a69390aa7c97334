//! The policy's arithmetic, the encoding's round trip (a snapshot plus the runes after it
//! folds to what all the runes fold to) and the golden bytes that pin [`FORMAT`].

use std::collections::HashMap;

use pm_domain::saga::{Instance, Recorded, Sagas};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{decode, encode, SnapshotPolicy, FORMAT};

const CONVERSATION: &str = "01a2105c-e5d8-777e-9cc1-f0db33b1e7d0";
const AGENT: &str = "6dd6bf99-36fc-5884-8841-b890cfc3a080";

fn rune(aggregate: &str, id: &str, name: &str, payload: &str) -> Recorded {
    let id: Uuid = id.parse().expect("an id");
    Recorded::from_stored(aggregate, id, name, payload).expect("a stored rune")
}

/// The runes of a conversation whose AI agent has `turns` human messages queued, the first
/// dispatched — payloads as the log stores them.
fn conversation(turns: u128) -> Vec<Recorded> {
    let c = CONVERSATION;
    let mut runes = vec![
        rune(
            "session",
            c,
            "session.created",
            &format!(
                r#"{{"config":{{"error_threshold":3,"session_timeout_secs":300,"turn_timeout_secs":600}},"conversation_id":"{c}"}}"#
            ),
        ),
        rune(
            "agent",
            AGENT,
            "agent.spawning",
            &format!(
                r#"{{"actor_id":"09167fa7-1e40-52e5-a29d-26204ce6e961","agent_id":"{AGENT}","conversation_id":"{c}","model":null,"parent_id":null,"role":"root"}}"#
            ),
        ),
        rune(
            "agent",
            AGENT,
            "agent.ready",
            &format!(r#"{{"agent_id":"{AGENT}"}}"#),
        ),
        rune(
            "session",
            c,
            "session.activated",
            &format!(r#"{{"root_agent_id":"{AGENT}"}}"#),
        ),
        rune(
            "plan",
            c,
            "plan.goal_received",
            &format!(r#"{{"conversation_id":"{c}","goal_description":"a long one"}}"#),
        ),
        rune(
            "session",
            c,
            "conversation.state.changed",
            r#"{"from":null,"to":"queued"}"#,
        ),
    ];
    for n in 0..turns {
        let turn = Uuid::from_u128(0x7000 + n);
        let message = Uuid::from_u128(0x9000 + n);
        runes.push(rune("turn", &turn.to_string(), "turn.queued", &format!(
            r#"{{"agent_id":"{AGENT}","conversation_id":"{c}","input":{{"kind":"message","message_id":"{message}"}},"kind":"conversation","task_id":null,"turn_id":"{turn}"}}"#)));
        runes.push(rune(
            "agent",
            AGENT,
            "agent.turn_enqueued",
            &format!(r#"{{"turn_id":"{turn}"}}"#),
        ));
        if n == 0 {
            runes.push(rune(
                "turn",
                &turn.to_string(),
                "turn.dispatched",
                &format!(r#"{{"turn_epoch":1,"turn_id":"{turn}"}}"#),
            ));
            runes.push(rune(
                "agent",
                AGENT,
                "agent.turn_dispatched",
                &format!(r#"{{"turn_epoch":1,"turn_id":"{turn}"}}"#),
            ));
            tool_calls(&mut runes, turn);
        }
    }
    runes
}

/// Tool calls of `turn` whose results skip a field before one they have (no `output`, an
/// `error`), skip two, and have none skipped.
fn tool_calls(runes: &mut Vec<Recorded>, turn: Uuid) {
    for (call, result) in [
        ("c1", r#"{"call_id":"c1","status":"error","error":"boom"}"#),
        (
            "c2",
            r#"{"call_id":"c2","status":"timeout","reason":"slow"}"#,
        ),
        (
            "c3",
            r#"{"call_id":"c3","status":"success","output":{"n":[1,2.5,"x",null]}}"#,
        ),
    ] {
        let id = Uuid::new_v5(&turn, call.as_bytes()).to_string();
        let called = format!(
            r#"{{"call_id":"{call}","tool_name":"search","arguments":{{"q":"x"}},"turn_id":"{turn}","timeout_ms":5000}}"#
        );
        runes.push(rune("tool_call", &id, "tool.call", &called));
        runes.push(rune("tool_call", &id, "tool.result", result));
    }
}

fn streams(runes: &[Recorded]) -> HashMap<Instance, i64> {
    let mut streams = HashMap::new();
    for r in runes {
        *streams.entry(r.instance).or_insert(0) += 1;
    }
    streams
}

#[test]
fn given_the_policy_then_a_snapshot_is_due_after_every_runes_and_a_quarter_of_the_covered() {
    let policy = SnapshotPolicy { every: 100 };
    // Given no snapshot yet: due once `every` runes are folded.
    assert!(!policy.due(99, 0));
    assert!(policy.due(100, 0));
    // Given a snapshot of 1,000 runes: due after max(every, 250) more.
    assert!(!policy.due(1_249, 1_000));
    assert!(policy.due(1_250, 1_000));
    // Given a small snapshot: `every` still bounds how often.
    assert!(!policy.due(150, 100));
    assert!(policy.due(200, 100));
    // Given `every` 0: never.
    assert!(!SnapshotPolicy { every: 0 }.due(1_000_000, 0));
}

#[test]
fn given_a_snapshot_of_a_prefix_when_the_rest_is_folded_on_it_then_the_machines_equal_the_whole_fold(
) {
    let runes = conversation(40);
    let whole = Sagas::restore(Some(77), &runes);
    for cut in [0, 1, 6, 9, 50, runes.len() - 1, runes.len()] {
        let (head, tail) = runes.split_at(cut);
        let state =
            encode(&Sagas::restore(Some(70), head), &streams(head), cut as u64).expect("encodes");
        let mut decoded = decode(&state).expect("decodes");
        assert_eq!(decoded.runes, cut as u64);
        assert_eq!(decoded.streams, streams(head));
        decoded.sagas.apply_all(Some(77), tail);
        assert_eq!(decoded.sagas, whole, "cut at {cut}");
        assert_eq!(decoded.sagas.last_position(), Some(77));
    }
}

#[test]
fn given_bytes_that_are_no_snapshot_when_decoded_then_an_error_not_a_panic() {
    let state =
        encode(&Sagas::restore(None, &conversation(3)), &HashMap::new(), 9).expect("encodes");
    for bad in [
        &b""[..],
        b"\xc1",
        b"not a snapshot",
        &state[..state.len() / 2],
    ] {
        assert!(decode(bad).is_err());
    }
}

/// The bytes of a fixed conversation, pinned: a change of how the machines serialize
/// changes them, and must bump [`FORMAT`] (old snapshots are then ignored, not misread).
/// Update both together.
#[test]
fn given_a_fixed_conversation_then_its_snapshot_bytes_are_the_pinned_ones_of_this_format() {
    let runes = conversation(3);
    let state = encode(&Sagas::restore(Some(5), &runes), &streams(&runes), 12).expect("encodes");
    let digest: String = Sha256::digest(&state)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        (FORMAT, digest.as_str()),
        (
            3,
            "b87b7226d8a2f9541a2d2adb04a1a5413bdbef03beb64ce1fdcc0f06dcab0b7f"
        ),
        "the snapshot encoding changed: bump snapshot::FORMAT and pin the new digest"
    );
}
