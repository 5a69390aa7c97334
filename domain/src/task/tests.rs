//! Given/when/then tests of the Task aggregate (transitions `TaskCreated` and
//! `TaskCheckpointCreated`) and of its derived status.

use cqrs_es::test::TestFramework;

use super::*;
use crate::testing::{id, now, text, FakeLookup};
use crate::types::TaskStatus;
use crate::LookupError;

type Given = TestFramework<Task>;

const ASSIGNEE: u128 = 1;
const CONVERSATION: u128 = 10;
const OTHER_CONVERSATION: u128 = 11;
const BEGIN_WORK: u128 = 20;
const OTHER_BEGIN_WORK: u128 = 21;
const TASK: u128 = 30;

/// The conversation exists, has a BEGIN_WORK checkpoint, and the assignee is registered.
fn lookup() -> FakeLookup {
    FakeLookup::default()
        .with_conversation(id(CONVERSATION))
        .with_checkpoint(id(BEGIN_WORK), id(CONVERSATION), CheckpointType::BeginWork)
        .with_actor(id(ASSIGNEE))
}

fn create_cmd(instructions: &str) -> CreateTask {
    CreateTask {
        id: id(TASK),
        conversation_id: id(CONVERSATION),
        checkpoint_id: id(BEGIN_WORK),
        instructions: text(instructions),
        assigned_to: Some(id(ASSIGNEE)),
        now: now(),
    }
}

fn create(instructions: &str) -> TaskCommand {
    TaskCommand::CreateTask(create_cmd(instructions))
}

fn created_fact(instructions: &str) -> TaskCreated {
    TaskCreated {
        id: id(TASK),
        conversation_id: id(CONVERSATION),
        checkpoint_id: id(BEGIN_WORK),
        instructions: text(instructions),
        assigned_to: Some(id(ASSIGNEE)),
        created_at: now(),
    }
}

fn created(instructions: &str) -> TaskEvent {
    TaskEvent::TaskCreated(created_fact(instructions))
}

fn created_unassigned(instructions: &str) -> TaskEvent {
    TaskEvent::TaskCreated(TaskCreated {
        assigned_to: None,
        ..created_fact(instructions)
    })
}

/// The `n`th task checkpoint (id `100 + n`).
fn checkpoint(n: u128, t: TaskCheckpointType) -> TaskCommand {
    TaskCommand::CreateTaskCheckpoint(CreateTaskCheckpoint {
        id: id(100 + n),
        task_id: id(TASK),
        checkpoint_type: t,
        now: now(),
    })
}

fn checkpoint_created(n: u128, t: TaskCheckpointType) -> TaskEvent {
    TaskEvent::TaskCheckpointCreated(TaskCheckpointCreated {
        id: id(100 + n),
        task_id: id(TASK),
        checkpoint_type: t,
        created_at: now(),
    })
}

fn sorted_keys(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<_> = value.as_object().expect("object").keys().cloned().collect();
    keys.sort();
    keys
}

// --- TaskCreated: preconditions --------------------------------------------------------

#[tokio::test]
async fn given_begin_work_checkpoint_when_task_created_then_task_created_fact() {
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(create("Fix the login page"))
        .await
        .then_expect_events(vec![created("Fix the login page")]);
}

#[tokio::test]
async fn given_begin_work_checkpoint_when_task_created_without_assignee_then_fact_without_it() {
    let mut cmd = create_cmd("Fix the login page");
    cmd.assigned_to = None;
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(TaskCommand::CreateTask(cmd))
        .await
        .then_expect_events(vec![created_unassigned("Fix the login page")]);
}

#[tokio::test]
async fn given_no_registered_actor_when_task_created_without_assignee_then_task_created_fact() {
    let mut cmd = create_cmd("Fix the login page");
    cmd.assigned_to = None;
    Given::with(
        FakeLookup::default()
            .with_conversation(id(CONVERSATION))
            .with_checkpoint(id(BEGIN_WORK), id(CONVERSATION), CheckpointType::BeginWork)
            .services(),
    )
    .given_no_previous_events()
    .when_async(TaskCommand::CreateTask(cmd))
    .await
    .then_expect_events(vec![created_unassigned("Fix the login page")]);
}

#[tokio::test]
async fn given_begin_work_checkpoint_with_a_task_when_another_task_created_then_task_created_fact()
{
    // There may be one or more tasks per BEGIN_WORK checkpoint.
    let mut cmd = create_cmd("Write the tests");
    cmd.id = id(TASK + 1);
    let mut expected = created_fact("Write the tests");
    expected.id = id(TASK + 1);
    Given::with(lookup().with_task(id(TASK), id(CONVERSATION)).services())
        .given_no_previous_events()
        .when_async(TaskCommand::CreateTask(cmd))
        .await
        .then_expect_events(vec![TaskEvent::TaskCreated(expected)]);
}

#[tokio::test]
async fn given_no_conversation_when_task_created_then_conversation_not_found() {
    Given::with(
        FakeLookup::default()
            .with_checkpoint(id(BEGIN_WORK), id(CONVERSATION), CheckpointType::BeginWork)
            .with_actor(id(ASSIGNEE))
            .services(),
    )
    .given_no_previous_events()
    .when_async(create("Fix the login page"))
    .await
    .then_expect_error(DomainError::ConversationNotFound(id(CONVERSATION)));
}

#[tokio::test]
async fn given_no_conversation_and_no_checkpoint_when_task_created_then_conversation_not_found_first(
) {
    Given::with(FakeLookup::default().services())
        .given_no_previous_events()
        .when_async(create("Fix the login page"))
        .await
        .then_expect_error(DomainError::ConversationNotFound(id(CONVERSATION)));
}

#[tokio::test]
async fn given_no_checkpoint_when_task_created_then_checkpoint_not_found() {
    Given::with(
        FakeLookup::default()
            .with_conversation(id(CONVERSATION))
            .with_actor(id(ASSIGNEE))
            .services(),
    )
    .given_no_previous_events()
    .when_async(create("Fix the login page"))
    .await
    .then_expect_error(DomainError::CheckpointNotFound(id(BEGIN_WORK)));
}

#[tokio::test]
async fn given_checkpoint_of_another_conversation_when_task_created_then_checkpoint_conversation_mismatch(
) {
    let mut cmd = create_cmd("Fix the login page");
    cmd.checkpoint_id = id(OTHER_BEGIN_WORK);
    Given::with(
        lookup()
            .with_conversation(id(OTHER_CONVERSATION))
            .with_checkpoint(
                id(OTHER_BEGIN_WORK),
                id(OTHER_CONVERSATION),
                CheckpointType::BeginWork,
            )
            .services(),
    )
    .given_no_previous_events()
    .when_async(TaskCommand::CreateTask(cmd))
    .await
    .then_expect_error(DomainError::CheckpointConversationMismatch(id(
        OTHER_BEGIN_WORK,
    )));
}

#[tokio::test]
async fn given_checkpoint_that_is_not_begin_work_when_task_created_then_checkpoint_not_begin_work()
{
    let others: Vec<_> = CheckpointType::ALL
        .iter()
        .copied()
        .filter(|t| *t != CheckpointType::BeginWork)
        .collect();
    assert_eq!(
        others,
        [
            CheckpointType::ConversationStarted,
            CheckpointType::NeedInformation,
            CheckpointType::CloseConversation,
            CheckpointType::WorkCompleted,
        ]
    );
    for t in others {
        let result = Given::with(
            FakeLookup::default()
                .with_conversation(id(CONVERSATION))
                .with_checkpoint(id(BEGIN_WORK), id(CONVERSATION), t)
                .with_actor(id(ASSIGNEE))
                .services(),
        )
        .given_no_previous_events()
        .when_async(create("Fix the login page"))
        .await
        .inspect_result();
        assert_eq!(
            result,
            Err(DomainError::CheckpointNotBeginWork(id(BEGIN_WORK))),
            "a {t} checkpoint must be rejected"
        );
    }
}

#[tokio::test]
async fn given_unregistered_assignee_when_task_created_then_actor_not_found() {
    let mut cmd = create_cmd("Fix the login page");
    cmd.assigned_to = Some(id(7));
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(TaskCommand::CreateTask(cmd))
        .await
        .then_expect_error(DomainError::ActorNotFound(id(7)));
}

#[tokio::test]
async fn given_unreachable_store_when_task_created_then_lookup_error_and_no_fact() {
    Given::with(FakeLookup::broken().services())
        .given_no_previous_events()
        .when_async(create("Fix the login page"))
        .await
        .then_expect_error(DomainError::Lookup(LookupError("store unreachable".into())));
}

// --- TaskCreated: tasks are immutable once created -------------------------------------

#[tokio::test]
async fn given_created_task_when_identical_creation_then_no_new_fact() {
    Given::with(lookup().services())
        .given(vec![created("Fix the login page")])
        .when_async(create("Fix the login page"))
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_created_task_with_checkpoints_when_identical_creation_later_then_no_new_fact() {
    let mut cmd = create_cmd("Fix the login page");
    cmd.now = now() + chrono::TimeDelta::minutes(5);
    Given::with(lookup().services())
        .given(vec![
            created("Fix the login page"),
            checkpoint_created(1, TaskCheckpointType::WorkStarted),
        ])
        .when_async(TaskCommand::CreateTask(cmd))
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn given_created_task_when_created_with_other_content_then_already_exists() {
    let variants: Vec<(&str, CreateTask)> = vec![
        ("instructions", create_cmd("Something else")),
        ("assigned_to", {
            let mut c = create_cmd("Fix the login page");
            c.assigned_to = None;
            c
        }),
        ("checkpoint_id", {
            let mut c = create_cmd("Fix the login page");
            c.checkpoint_id = id(OTHER_BEGIN_WORK);
            c
        }),
        ("conversation_id", {
            let mut c = create_cmd("Fix the login page");
            c.conversation_id = id(OTHER_CONVERSATION);
            c
        }),
    ];
    for (field, cmd) in variants {
        let result = Given::with(lookup().services())
            .given(vec![created("Fix the login page")])
            .when_async(TaskCommand::CreateTask(cmd))
            .await
            .inspect_result();
        assert_eq!(
            result,
            Err(DomainError::AlreadyExists {
                entity: "task",
                id: id(TASK),
            }),
            "a different {field} must be rejected"
        );
    }
}

// --- TaskCheckpointCreated -------------------------------------------------------------

#[tokio::test]
async fn given_no_task_when_task_checkpoint_created_then_task_not_found() {
    Given::with(lookup().services())
        .given_no_previous_events()
        .when_async(checkpoint(1, TaskCheckpointType::WorkStarted))
        .await
        .then_expect_error(DomainError::TaskNotFound(id(TASK)));
}

#[tokio::test]
async fn given_created_task_when_task_checkpoint_created_then_task_checkpoint_created_fact() {
    Given::with(lookup().services())
        .given(vec![created("Fix the login page")])
        .when_async(checkpoint(1, TaskCheckpointType::WorkStarted))
        .await
        .then_expect_events(vec![checkpoint_created(1, TaskCheckpointType::WorkStarted)]);
}

#[tokio::test]
async fn given_created_task_when_checkpoint_of_each_type_created_then_fact_of_that_type() {
    assert_eq!(TaskCheckpointType::ALL.len(), 5);
    for &t in TaskCheckpointType::ALL {
        let result = Given::with(lookup().services())
            .given(vec![created("Fix the login page")])
            .when_async(checkpoint(1, t))
            .await
            .inspect_result();
        assert_eq!(result, Ok(vec![checkpoint_created(1, t)]), "type {t}");
    }
}

#[tokio::test]
async fn given_task_with_many_checkpoints_when_another_checkpoint_created_then_fact() {
    Given::with(lookup().services())
        .given(vec![
            created("Fix the login page"),
            checkpoint_created(1, TaskCheckpointType::WorkStarted),
            checkpoint_created(2, TaskCheckpointType::WorkCompleted),
            checkpoint_created(3, TaskCheckpointType::WorkRejected),
            checkpoint_created(4, TaskCheckpointType::WorkStarted),
            checkpoint_created(5, TaskCheckpointType::WorkCompleted),
            checkpoint_created(6, TaskCheckpointType::WorkApproved),
        ])
        .when_async(checkpoint(7, TaskCheckpointType::WorkStarted))
        .await
        .then_expect_events(vec![checkpoint_created(7, TaskCheckpointType::WorkStarted)]);
}

#[tokio::test]
async fn given_task_with_a_checkpoint_when_same_type_recorded_again_then_fact() {
    Given::with(lookup().services())
        .given(vec![
            created("Fix the login page"),
            checkpoint_created(1, TaskCheckpointType::WorkPaused),
        ])
        .when_async(checkpoint(2, TaskCheckpointType::WorkPaused))
        .await
        .then_expect_events(vec![checkpoint_created(2, TaskCheckpointType::WorkPaused)]);
}

// --- Derived status ---------------------------------------------------------------------

#[test]
fn given_new_task_when_status_asked_then_not_started() {
    let mut task = Task::default();
    assert_eq!(task.status(), TaskStatus::NotStarted);
    assert_eq!(task.checkpoint_count(), 0);
    task.apply(created("Fix the login page"));
    assert_eq!(task.status(), TaskStatus::NotStarted);
    assert_eq!(task.checkpoint_count(), 0);
}

#[test]
fn given_sequence_of_checkpoints_when_applied_then_status_is_the_latest_checkpoint_type() {
    use TaskCheckpointType::*;
    let sequence = [
        WorkStarted,
        WorkPaused,
        WorkStarted,
        WorkCompleted,
        WorkRejected,
        WorkStarted,
        WorkCompleted,
        WorkApproved,
    ];
    let mut task = Task::default();
    task.apply(created("Fix the login page"));
    for (n, t) in (1u128..).zip(sequence) {
        task.apply(checkpoint_created(n, t));
        assert_eq!(task.status(), TaskStatus::Latest(t), "after checkpoint {n}");
        assert_eq!(task.checkpoint_count(), u64::try_from(n).expect("small"));
    }
    assert_eq!(task.status(), TaskStatus::Latest(WorkApproved));
    assert_eq!(task.checkpoint_count(), 8);
}

#[test]
fn given_approved_task_when_work_restarted_then_status_follows_event_order_not_rank() {
    let mut task = Task::default();
    task.apply(created("Fix the login page"));
    task.apply(checkpoint_created(1, TaskCheckpointType::WorkApproved));
    task.apply(checkpoint_created(2, TaskCheckpointType::WorkStarted));
    assert_eq!(
        task.status(),
        TaskStatus::Latest(TaskCheckpointType::WorkStarted)
    );
}

#[test]
fn given_checkpoints_with_earlier_clock_when_applied_then_status_follows_event_order() {
    let mut task = Task::default();
    task.apply(created("Fix the login page"));
    task.apply(checkpoint_created(1, TaskCheckpointType::WorkCompleted));
    let mut earlier = TaskCheckpointCreated {
        id: id(102),
        task_id: id(TASK),
        checkpoint_type: TaskCheckpointType::WorkPaused,
        created_at: now() - chrono::TimeDelta::hours(1),
    };
    task.apply(TaskEvent::TaskCheckpointCreated(earlier.clone()));
    assert_eq!(
        task.status(),
        TaskStatus::Latest(TaskCheckpointType::WorkPaused)
    );
    earlier.id = id(103);
    earlier.checkpoint_type = TaskCheckpointType::WorkStarted;
    task.apply(TaskEvent::TaskCheckpointCreated(earlier));
    assert_eq!(
        task.status(),
        TaskStatus::Latest(TaskCheckpointType::WorkStarted)
    );
}

// --- The facts --------------------------------------------------------------------------

#[test]
fn given_task_created_fact_when_serialized_then_payload_has_exactly_the_listed_fields() {
    let value = serde_json::to_value(created("Fix the login page")).expect("serializes");
    assert_eq!(
        sorted_keys(&value),
        [
            "assigned_to",
            "checkpoint_id",
            "conversation_id",
            "created_at",
            "id",
            "instructions"
        ]
    );
    assert_eq!(value["id"], id(TASK).to_string());
    assert_eq!(value["conversation_id"], id(CONVERSATION).to_string());
    assert_eq!(value["checkpoint_id"], id(BEGIN_WORK).to_string());
    assert_eq!(value["instructions"], "Fix the login page");
    assert_eq!(value["assigned_to"], id(ASSIGNEE).to_string());
    assert_eq!(value["created_at"], "2026-11-22T05:35:27.000000Z");
}

#[test]
fn given_unassigned_task_created_fact_when_serialized_then_assigned_to_is_omitted() {
    let value = serde_json::to_value(created_unassigned("Fix the login page")).expect("serializes");
    assert_eq!(
        sorted_keys(&value),
        [
            "checkpoint_id",
            "conversation_id",
            "created_at",
            "id",
            "instructions"
        ]
    );
}

#[test]
fn given_task_checkpoint_created_fact_when_serialized_then_payload_has_exactly_the_listed_fields() {
    let value = serde_json::to_value(checkpoint_created(1, TaskCheckpointType::WorkStarted))
        .expect("serializes");
    assert_eq!(sorted_keys(&value), ["created_at", "id", "task_id", "type"]);
    assert_eq!(value["id"], id(101).to_string());
    assert_eq!(value["task_id"], id(TASK).to_string());
    assert_eq!(value["type"], "WORK_STARTED");
    assert_eq!(value["created_at"], "2026-11-22T05:35:27.000000Z");
}

#[test]
fn given_each_task_checkpoint_type_when_serialized_then_wire_name_of_transitions_md() {
    let expected = [
        (TaskCheckpointType::WorkStarted, "WORK_STARTED"),
        (TaskCheckpointType::WorkCompleted, "WORK_COMPLETED"),
        (TaskCheckpointType::WorkApproved, "WORK_APPROVED"),
        (TaskCheckpointType::WorkRejected, "WORK_REJECTED"),
        (TaskCheckpointType::WorkPaused, "WORK_PAUSED"),
    ];
    for (t, wire) in expected {
        let value = serde_json::to_value(checkpoint_created(1, t)).expect("serializes");
        assert_eq!(value["type"], wire);
    }
}

#[test]
fn given_task_created_fact_when_event_type_asked_then_task_created_version_1_0() {
    let fact = created("Fix the login page");
    assert_eq!(fact.event_type(), "project_manager.task.created");
    assert_eq!(fact.event_version(), "1.0");
}

#[test]
fn given_task_checkpoint_created_fact_when_event_type_asked_then_task_checkpoint_created_version_1_0(
) {
    let fact = checkpoint_created(1, TaskCheckpointType::WorkStarted);
    assert_eq!(fact.event_type(), "project_manager.task.checkpoint.created");
    assert_eq!(fact.event_version(), "1.0");
}

#[test]
fn given_task_created_payload_when_deserialized_then_same_task_created_variant() {
    for fact in [
        created("Fix the login page"),
        created_unassigned("Fix the login page"),
    ] {
        let json = serde_json::to_string(&fact).expect("serializes");
        let back: TaskEvent = serde_json::from_str(&json).expect("deserializes");
        assert!(matches!(back, TaskEvent::TaskCreated(_)), "got {back:?}");
        assert_eq!(back, fact);
    }
}

#[test]
fn given_task_checkpoint_created_payload_when_deserialized_then_same_task_checkpoint_variant() {
    for &t in TaskCheckpointType::ALL {
        let fact = checkpoint_created(1, t);
        let json = serde_json::to_string(&fact).expect("serializes");
        let back: TaskEvent = serde_json::from_str(&json).expect("deserializes");
        assert!(
            matches!(back, TaskEvent::TaskCheckpointCreated(_)),
            "got {back:?}"
        );
        assert_eq!(back, fact);
    }
}

#[test]
fn given_payload_with_unknown_field_when_deserialized_then_rejected() {
    for fact in [
        created("Fix the login page"),
        checkpoint_created(1, TaskCheckpointType::WorkStarted),
    ] {
        let mut value = serde_json::to_value(&fact).expect("serializes");
        value["surprise"] = serde_json::json!(true);
        assert!(
            serde_json::from_value::<TaskEvent>(value).is_err(),
            "{fact:?} with an unknown field must not deserialize"
        );
    }
}
