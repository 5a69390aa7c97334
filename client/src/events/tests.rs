//! Event typing: facts, runes the client does not know, unreadable facts, the snapshot.

use pm_domain::types::TaskCheckpointType;

use super::*;

/// A CloudEvent as the service serializes it (`api`'s `CloudEvent::from`).
pub(crate) fn cloud_event(position: &str, event_type: &str, data: &str) -> String {
    format!(
        r#"{{"specversion":"1.0","id":"task:0190:2","source":"/project-manager/task/0190",
        "type":"{event_type}","subject":"0190","time":"2026-11-22T05:35:27.123456Z",
        "datacontenttype":"application/json","data":{data},"position":"{position}",
        "sequence":"2","eventversion":"1.0","correlationid":"c-1","causationid":"k-1",
        "role":"llm","principal":"llm-1","conversationid":"0190a0b0-0000-7000-8000-000000000001"}}"#
    )
}

const TASK_CHECKPOINT: &str = r#"{"id":"0190a0b0-0000-7000-8000-000000000003","task_id":"0190a0b0-0000-7000-8000-000000000002","type":"WORK_STARTED","created_at":"2026-11-22T05:35:27.123456Z"}"#;

#[test]
fn project_manager_facts_are_typed_with_their_attributes() {
    let json = cloud_event(
        "17.4",
        "project_manager.task.checkpoint.created",
        TASK_CHECKPOINT,
    );
    let event = LogEvent::from_cloud_event(&json).expect("parses");
    assert_eq!(event.position.as_str(), "17.4");
    let Some(Fact::TaskCheckpointCreated(c)) = event.fact() else {
        panic!("not a task checkpoint: {event:?}");
    };
    assert_eq!(c.checkpoint_type, TaskCheckpointType::WorkStarted);
    let a = event.attributes.as_ref().expect("attributes");
    assert_eq!(a.id, "task:0190:2");
    assert_eq!(a.sequence, 2);
    assert_eq!(a.role.as_deref(), Some("llm"));
    assert_eq!(a.principal.as_deref(), Some("llm-1"));
    assert_eq!(a.causation_id.as_deref(), Some("k-1"));
    assert_eq!(a.event_version.as_deref(), Some("1.0"));
    assert_eq!(a.time.map(|t| t.timestamp_subsec_micros()), Some(123_456));
    assert_eq!(
        event.event_type(),
        "project_manager.task.checkpoint.created"
    );
    assert_eq!(event.correlation_id(), Some("c-1"));
    assert_eq!(event.id(), Some("task:0190:2"));
    assert_eq!(
        event.conversation_id().map(|c| c.to_string()).as_deref(),
        Some("0190a0b0-0000-7000-8000-000000000001")
    );
}

#[test]
fn given_a_service_that_names_no_principal_when_read_then_the_principal_is_none() {
    let json = cloud_event("3", "turn.started", "{}").replace(r#""principal":"llm-1","#, "");
    assert!(!json.contains("principal"));
    let event = LogEvent::from_cloud_event(&json).expect("parses");
    let a = event.attributes.as_ref().expect("attributes");
    assert_eq!(a.principal, None);
    assert_eq!(a.role.as_deref(), Some("llm"));
}

#[test]
fn runes_and_unknown_facts_are_other_with_their_data() {
    for event_type in ["turn.started", "saga.anomaly", "project_manager.plan.made"] {
        let json = cloud_event("3", event_type, r#"{"turn_id": "t-1"}"#);
        let event = LogEvent::from_cloud_event(&json).expect("parses");
        match &event.content {
            EventContent::Other {
                event_type: t,
                data,
            } => {
                assert_eq!(t, event_type);
                assert_eq!(data.get(), r#"{"turn_id": "t-1"}"#);
            }
            other => panic!("{event_type}: {other:?}"),
        }
        assert!(event.fact().is_none());
    }
}

#[test]
fn a_known_fact_that_does_not_parse_is_kept_as_unreadable() {
    let data = r#"{"id":"0190a0b0-0000-7000-8000-000000000003","surprise":true}"#;
    let json = cloud_event("9", "project_manager.task.created", data);
    let event = LogEvent::from_cloud_event(&json).expect("the envelope parses");
    match &event.content {
        EventContent::Unreadable {
            event_type,
            data: raw,
            reason,
        } => {
            assert_eq!(event_type, "project_manager.task.created");
            assert_eq!(raw.get(), data);
            assert!(!reason.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn envelopes_that_are_not_cloud_events_are_decode_errors() {
    for bad in [
        "{}",
        "not json",
        &cloud_event("no position", "x", "{}"),
        &cloud_event("1", "x", "{}").replace("2026-11-22T05:35:27.123456Z", "yesterday"),
    ] {
        let err = LogEvent::from_cloud_event(bad).expect_err(bad);
        assert!(matches!(err, Error::Decode { .. }), "{err}");
    }
}

#[test]
fn the_snapshot_is_typed_with_an_opaque_session() {
    let id = "0190a0b0-0000-7000-8000-000000000001";
    let event = LogEvent::from_snapshot(&format!(
        r#"{{"conversation_id":"{id}","cursor":"12","session":null}}"#
    ))
    .expect("parses");
    assert_eq!(event.position.as_str(), "12");
    assert!(event.attributes.is_none());
    assert_eq!(event.event_type(), "snapshot");
    assert_eq!(
        event.conversation_id().map(|c| c.to_string()).as_deref(),
        Some(id)
    );
    let EventContent::Snapshot(s) = &event.content else {
        panic!("{event:?}");
    };
    assert_eq!(s.session, None);
    let later = LogEvent::from_snapshot(&format!(
        r#"{{"conversation_id":"{id}","cursor":"0","session":{{"state":"active"}}}}"#
    ))
    .expect("parses");
    let EventContent::Snapshot(s) = &later.content else {
        panic!("{later:?}");
    };
    assert_eq!(
        s.session.as_ref().map(RawJson::get),
        Some(r#"{"state":"active"}"#)
    );
    assert!(LogEvent::from_snapshot(r#"{"cursor":"0"}"#).is_err());
}

#[test]
fn sequence_is_a_string_of_digits_or_a_number() {
    let json = cloud_event("3", "turn.started", "{}");
    let read =
        |json: &str| LogEvent::from_cloud_event(json).map(|e| e.attributes.map(|a| a.sequence));
    assert_eq!(read(&json).expect("string"), Some(2));
    let number = json.replace(r#""sequence":"2""#, r#""sequence":7"#);
    assert_eq!(read(&number).expect("number"), Some(7));
    for bad in [r#""""#, r#""-1""#, r#""2x""#, r#""0""#, "null"] {
        let json = json.replace(r#""sequence":"2""#, &format!(r#""sequence":{bad}"#));
        assert!(read(&json).is_err(), "sequence {bad} was accepted");
    }
}
