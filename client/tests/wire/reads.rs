//! Reads: filters, paging and `min_position` become the documented query parameters;
//! walking follows `next_cursor` until it is null.

use chrono::{TimeZone, Utc};
use futures::TryStreamExt;
use pm_client::{
    CheckpointType, ConversationQuery, Error, MessageQuery, Position, StatsGroup,
    TaskCheckpointType, TaskQuery, TaskStatus, Uuid,
};

use crate::client;
use crate::fake::{Fake, Reply};

const CONVERSATION: &str = "0190a0b0-0000-7000-8000-000000000001";

fn message(n: u32) -> String {
    format!(
        r#"{{"id":"0190a0b0-0000-7000-8000-00000000010{n}","time":"2026-11-22T05:35:27.123456Z","actor_id":"0190a0b0-0000-7000-8000-000000000009","conversation_id":"{CONVERSATION}","content":"m{n}"}}"#
    )
}

fn page(items: &[String], next: Option<&str>) -> String {
    let next = next.map_or("null".to_string(), |c| format!("\"{c}\""));
    format!(r#"{{"items":[{}],"next_cursor":{next}}}"#, items.join(","))
}

fn empty_page() -> Reply {
    Reply::Answer(200, vec![], page(&[], None))
}

#[tokio::test]
async fn filters_paging_and_min_position_are_query_parameters() {
    let fake = Fake::start(|_, _| empty_page()).await;
    let c = client(&fake.base);
    let at = c.at(Position::new("12.3").expect("position"));
    let someone: Uuid = CONVERSATION.parse().expect("uuid");
    at.tasks(
        &TaskQuery::new()
            .status(TaskStatus::Latest(TaskCheckpointType::WorkStarted))
            .assigned_to(someone)
            .organization("acme & co")
            .limit(10)
            .cursor("abc"),
    )
    .await
    .expect("page");
    c.read()
        .conversations(
            &ConversationQuery::new()
                .created_after(
                    Utc.with_ymd_and_hms(2026, 11, 22, 5, 35, 27)
                        .single()
                        .expect("time"),
                )
                .latest_checkpoint_type(CheckpointType::NeedInformation)
                .actor_id(someone),
        )
        .await
        .expect("page");
    let seen = fake.seen();
    assert_eq!(
        seen[0].target,
        format!("/v1/tasks?status=WORK_STARTED&assigned_to={CONVERSATION}&organization=acme+%26+co&limit=10&cursor=abc&min_position=12.3")
    );
    assert_eq!(
        seen[1].target,
        format!("/v1/conversations?actor_id={CONVERSATION}&created_after=2026-11-22T05%3A35%3A27.000000Z&latest_checkpoint_type=NEED_INFORMATION")
    );
    assert!(seen.iter().all(|s| s.method == "GET"));
}

#[tokio::test]
async fn stats_are_grouped_by_parameter() {
    let fake = Fake::start(|_, _| {
        Reply::Answer(
            200,
            vec![],
            r#"{"group_by":"organization","groups":[]}"#.into(),
        )
    })
    .await;
    let stats = client(&fake.base)
        .read()
        .task_stats(StatsGroup::Organization)
        .await
        .expect("stats");
    assert!(matches!(stats, pm_client::TaskStatsView::Grouped { .. }));
    assert_eq!(
        fake.seen()[0].target,
        "/v1/stats/tasks?group_by=organization"
    );
}

#[tokio::test]
async fn walking_follows_next_cursor_to_the_end() {
    let fake = Fake::start(|n, _| {
        let body = match n {
            0 => page(&[message(1), message(2)], Some("c1")),
            _ => page(&[message(3)], None),
        };
        Reply::Answer(200, vec![], body)
    })
    .await;
    let conversation: Uuid = CONVERSATION.parse().expect("uuid");
    let all: Vec<_> = client(&fake.base)
        .read()
        .walk(MessageQuery::of(conversation).limit(2))
        .try_collect()
        .await
        .expect("walks");
    let contents: Vec<_> = all.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["m1", "m2", "m3"]);
    let seen = fake.seen();
    let path = format!("/v1/conversations/{CONVERSATION}/messages");
    assert_eq!(seen[0].target, format!("{path}?limit=2"));
    assert_eq!(seen[1].target, format!("{path}?limit=2&cursor=c1"));
}

#[tokio::test]
async fn a_list_that_repeats_its_cursor_ends_the_walk_with_an_error() {
    let fake =
        Fake::start(|_, _| Reply::Answer(200, vec![], page(&[message(1)], Some("same")))).await;
    let conversation: Uuid = CONVERSATION.parse().expect("uuid");
    let walked: Result<Vec<_>, Error> = client(&fake.base)
        .read()
        .walk(MessageQuery::of(conversation))
        .try_collect()
        .await;
    assert!(matches!(walked, Err(Error::Decode { .. })));
    assert_eq!(fake.seen().len(), 2);
}
