//! Given/when/then tests of the planner.

use chrono::TimeZone;
use serde_json::json;

use super::*;

fn at(second: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 0, 0, second)
        .single()
        .expect("valid time")
}

fn event(seq: i64, event_type: &str, sequence: i64, payload: serde_json::Value) -> LoggedEvent {
    LoggedEvent {
        position: LogPosition(seq),
        aggregate_type: "task".into(),
        aggregate_id: "x".into(),
        sequence,
        event_type: event_type.into(),
        event_version: "1.0".into(),
        payload: payload.into(),
        metadata: json!({"recorded_at": format!("2026-11-22T00:00:{seq:02}.000000Z")}).into(),
        conversation_id: None,
        organization: None,
    }
}

const C: Uuid = Uuid::from_u128(0xc);
const T: Uuid = Uuid::from_u128(0xa);

fn task_created() -> LoggedEvent {
    event(
        1,
        TaskCreated::NAME,
        1,
        json!({
        "id": T, "conversation_id": C, "checkpoint_id": C, "instructions": "do",
        "created_at": "2026-11-22T00:00:01.000000Z"}),
    )
}

fn checkpoint(seq: i64, sequence: i64, kind: &str) -> LoggedEvent {
    event(
        seq,
        TaskCheckpointCreated::NAME,
        sequence,
        json!({
        "id": Uuid::from_u128(seq as u128), "task_id": T, "type": kind,
        "created_at": format!("2026-11-22T00:00:{seq:02}.000000Z")}),
    )
}

fn status(t: TaskCheckpointType) -> usize {
    TaskStatus::Latest(t).index()
}

#[test]
fn given_a_new_task_and_checkpoints_in_one_batch_then_status_is_the_last_one() {
    let events = vec![
        task_created(),
        checkpoint(2, 2, "WORK_STARTED"),
        checkpoint(3, 3, "WORK_COMPLETED"),
    ];
    let facts = read(&events).expect("facts");
    assert!(earlier_tasks(&facts).is_empty());
    let p = plan(&facts, HashMap::new()).expect("plan");
    let task = &p.tasks[&T];
    assert_eq!(
        task.status,
        TaskStatus::Latest(TaskCheckpointType::WorkCompleted)
    );
    assert_eq!(task.status_sequence, 3);
    assert_eq!(task.added_checkpoints, 2);
    assert_eq!(task.first_started, Some(at(2)));
    assert_eq!(task.last_completed, Some(at(3)));
    let c = &p.conversations[&C];
    assert_eq!(c.tasks, 1);
    // NOT_STARTED +1 -1, WORK_STARTED +1 -1, WORK_COMPLETED +1
    let mut expected = [0; TaskStatus::COUNT];
    expected[status(TaskCheckpointType::WorkCompleted)] = 1;
    assert_eq!(c.statuses, expected);
    assert_eq!(c.updated_at, Some(at(3)));
}

#[test]
fn given_a_stored_task_when_planned_then_counts_move_from_its_stored_status() {
    let events = vec![checkpoint(9, 4, "WORK_PAUSED")];
    let facts = read(&events).expect("facts");
    assert_eq!(earlier_tasks(&facts), vec![T]);
    let started = TaskStatus::Latest(TaskCheckpointType::WorkStarted);
    let stored = HashMap::from([(T, TaskState::stored(C, started, 3))]);
    let p = plan(&facts, stored).expect("plan");
    let mut expected = [0; TaskStatus::COUNT];
    expected[started.index()] = -1;
    expected[status(TaskCheckpointType::WorkPaused)] = 1;
    assert_eq!(p.conversations[&C].statuses, expected);
}

#[test]
fn given_an_older_sequence_when_planned_then_status_does_not_move() {
    let events = vec![checkpoint(9, 2, "WORK_PAUSED")];
    let facts = read(&events).expect("facts");
    let started = TaskStatus::Latest(TaskCheckpointType::WorkStarted);
    let stored = HashMap::from([(T, TaskState::stored(C, started, 3))]);
    let p = plan(&facts, stored).expect("plan");
    assert_eq!(p.tasks[&T].status, started);
    assert_eq!(p.conversations[&C].statuses, [0; TaskStatus::COUNT]);
}

#[test]
fn given_a_checkpoint_of_an_unknown_task_then_unplannable() {
    let events = vec![checkpoint(9, 2, "WORK_PAUSED")];
    let facts = read(&events).expect("facts");
    assert!(plan(&facts, HashMap::new()).is_err());
    let bad = vec![event(1, MessageAdded::NAME, 1, json!({"id": T}))];
    assert!(read(&bad).is_err());
}

#[test]
fn given_a_fact_whose_texts_read_null_when_planned_then_its_row_is_planned_unreadable() {
    let forgotten = event(
        1,
        TaskCreated::NAME,
        1,
        json!({
        "id": T, "conversation_id": C, "checkpoint_id": C, "instructions": null,
        "created_at": "2026-11-22T00:00:01.000000Z", "forgotten": true}),
    );
    let events = vec![task_created(), forgotten];
    let facts = read(&events).expect("facts");
    let p = plan(&facts, HashMap::new()).expect("plan");
    let unreadable: Vec<bool> = p.new_tasks.iter().map(|(_, _, u)| *u).collect();
    assert_eq!(unreadable, [false, true]);
}

#[test]
fn given_forgettings_when_planned_then_they_are_listed_in_log_order() {
    let forget = |seq: i64, name: &str, id: Uuid| {
        event(
            seq,
            name,
            2,
            json!({"id": id, "forgotten_at": "2026-11-22T00:00:09.000000Z"}),
        )
    };
    let events = vec![
        forget(1, pm_domain::forgetting::CONVERSATION_FORGOTTEN, C),
        forget(2, pm_domain::forgetting::ACTOR_FORGOTTEN, T),
    ];
    let facts = read(&events).expect("facts");
    let p = plan(&facts, HashMap::new()).expect("plan");
    assert_eq!(p.forgotten, [(Party::Conversation, C), (Party::Actor, T)]);
}
