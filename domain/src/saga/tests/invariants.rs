//! The invariants of docs/SAGAS.md and WORKERS.md, checked after every step of every test.

use std::collections::HashMap;

use uuid::Uuid;

use super::support::Rows;
use crate::saga::rune::turn::TurnRune;
use crate::saga::*;

/// Panics unless, for the recorded log and the live state:
/// (a) every rune is an edge (replayed with [`Sagas::check`] before each apply);
/// (b) INV-TURN-SEQUENTIAL: at most one turn per agent outside `queued` and not terminal;
/// (c) no turn has two terminal runes, every terminal rune has a deliverable or a reason,
///     and once the session is closed every turn has exactly one;
/// (d) folding the log from scratch gives the live state;
/// (f) a closed session has only terminated agents;
/// (h) INV-TOOL-TERMINAL and INV-TOOL-CALL-BEFORE-RESULT: a `tool.result` only after its
///     call's `tool.call`, at most one per call, and a terminal turn owes none.
/// (j) a step (its runes: the last `step` of the log) that makes a turn claimable — by
///     its runes, or by making its session `active` — records a rune of
///     [`CLAIMABLE_AFTER`], so that the claim bell and the doorbells ring for it.
/// (g), [`check_lease_rows`], needs the deadline table as well.
pub fn check_invariants(live: &Sagas, log: &[Recorded], step: usize) {
    let mut replay = Sagas::restore(live.last_position(), []);
    let step_start = log.len().saturating_sub(step);
    let mut before = Vec::new();
    for (i, rec) in log.iter().enumerate() {
        if i == step_start {
            before = claimable_turns(&replay);
        }
        if let Err(err) = replay.check(rec) {
            panic!("(a) not an edge: {err}: {rec:?}");
        }
        replay.apply(rec);
    }
    // A step without runes changes nothing (the state is the fold of the log, (d)).
    let became: Vec<Uuid> = if step_start == log.len() {
        Vec::new()
    } else {
        claimable_turns(&replay)
            .into_iter()
            .filter(|t| !before.contains(t))
            .collect()
    };
    if !became.is_empty() {
        let runes: Vec<&str> = log[step_start..].iter().map(Recorded::event_type).collect();
        assert!(
            runes.iter().any(|r| CLAIMABLE_AFTER.contains(r)),
            "(j) turns {became:?} became claimable after {runes:?}, none of CLAIMABLE_AFTER"
        );
    }
    assert_eq!(
        &replay, live,
        "(d) the fold of the log differs from the live state"
    );

    let mut running: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    for (id, turn) in live.turns() {
        if turn.is_running() {
            let agent = turn.agent_id().expect("a queued turn has an agent");
            running.entry(agent).or_default().push(*id);
        }
    }
    for (agent, turns) in &running {
        assert!(turns.len() <= 1, "(b) agent {agent} runs {turns:?}");
    }

    let mut terminal: HashMap<Uuid, usize> = HashMap::new();
    for rec in log {
        if let (Instance::Turn(id), Rune::Turn(rune)) = (&rec.instance, &rec.rune) {
            if let Some((deliverable, reason)) = rune.delivery() {
                *terminal.entry(*id).or_default() += 1;
                assert!(
                    deliverable.is_some() || reason.is_some(),
                    "(c) null deliverable without a reason: {rune:?}"
                );
            }
            if matches!(rune, TurnRune::Queued(_)) {
                terminal.entry(*id).or_default();
            }
        }
    }
    for (turn, n) in &terminal {
        assert!(*n <= 1, "(c) turn {turn} has {n} terminal runes");
    }
    let mut called: HashMap<Uuid, usize> = HashMap::new();
    for rec in log {
        if let (Instance::ToolCall(id), Rune::Tool(rune)) = (&rec.instance, &rec.rune) {
            match rune {
                ToolRune::Call(_) => {
                    assert!(called.insert(*id, 0).is_none(), "(h) {id} called twice")
                }
                ToolRune::Result(_) => {
                    let results = called.get_mut(id).expect("(h) a result before its call");
                    *results += 1;
                    assert_eq!(*results, 1, "(h) call {id} has two results");
                }
                _ => {}
            }
        }
    }
    for (id, turn) in live.turns() {
        if turn.is_terminal() {
            let open = live.open_calls(*id);
            assert!(
                open.is_empty(),
                "(h) ended turn {id} owes results for {open:?}"
            );
        }
    }
    let closed = live
        .session()
        .and_then(Session::state)
        .is_some_and(|s| matches!(s, SessionState::Closed | SessionState::Archived));
    if closed {
        for (turn, n) in &terminal {
            assert_eq!(
                *n, 1,
                "(c) closed session: turn {turn} has {n} terminal runes"
            );
        }
        for (id, agent) in live.agents() {
            assert_eq!(
                agent.state(),
                Some(AgentState::Terminated),
                "(f) closed session with agent {id} not terminated"
            );
        }
    }
}

/// The turns a claim may take now: claimable, their session `active`.
fn claimable_turns(sagas: &Sagas) -> Vec<Uuid> {
    let active = sagas.session().and_then(Session::state) == Some(SessionState::Active);
    if !active {
        return Vec::new();
    }
    sagas
        .turns()
        .iter()
        .filter(|(_, t)| t.is_claimable())
        .map(|(id, _)| *id)
        .collect()
}

/// (g) WORKERS.md: a turn holds a worker's lease exactly while its `turn_lease` row is
/// armed under the claim's epoch (a release, an expiry and every terminal rune take the
/// row away with the lease).
pub fn check_lease_rows(live: &Sagas, rows: &Rows) {
    for (id, turn) in live.turns() {
        let row = rows.get(&(Instance::Turn(*id), DeadlineKind::TurnLease));
        assert_eq!(
            turn.lease().map(|l| l.turn_epoch),
            row.map(|r| r.epoch),
            "(g) turn {id} ({}): lease and lease row disagree",
            turn.state_name()
        );
    }
    for (instance, kind) in rows.keys() {
        if *kind == DeadlineKind::TurnLease {
            let Instance::Turn(id) = instance else {
                panic!("(g) a lease row on {instance:?}");
            };
            assert!(
                live.turns().get(id).and_then(Turn::lease).is_some(),
                "(g) a lease row for turn {id}, which holds no lease"
            );
        }
    }
}

/// (i) a tool call's deadline row is armed exactly while it waits for what the row bounds:
/// `tool_approval` while awaiting approval, `tool_execution` while executing; a turn's
/// `tool_resume` row only while it is `tool_executing`.
pub fn check_tool_rows(live: &Sagas, rows: &Rows) {
    for (id, call) in live.tool_calls() {
        let state = call.state();
        for (kind, waiting) in [
            (DeadlineKind::ToolApproval, ToolCallState::AwaitingApproval),
            (DeadlineKind::ToolExecution, ToolCallState::Executing),
        ] {
            let armed = rows.contains_key(&(Instance::ToolCall(*id), kind));
            assert_eq!(
                armed,
                state == Some(waiting),
                "(i) call {id} is {}: {kind} row armed = {armed}",
                call.state_name()
            );
        }
    }
    for (instance, kind) in rows.keys() {
        if *kind == DeadlineKind::ToolResume {
            let Instance::Turn(id) = instance else {
                panic!("(i) a resume row on {instance:?}");
            };
            assert_eq!(
                live.turns().get(id).and_then(Turn::state),
                Some(TurnState::ToolExecuting),
                "(i) a resume row for turn {id}, which is not suspended"
            );
        }
    }
}
