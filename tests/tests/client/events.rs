//! The log through the client: typed JSON pages with filters and cursors, and the
//! follower receiving every event in order — the snapshot first for a conversation, live
//! events as they are written — with the CloudEvent attributes the commands set.
//!
//! The log also holds the sagas' runes, appended a moment after the facts that cause
//! them; these tests are about the facts, so they read and follow [`facts`] alone.

use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use pm_client::{
    CheckpointType, Client, EventContent, EventQuery, Fact, LogEvent, Position, TaskCheckpointType,
    Uuid,
};
use pm_tests::{on_both_backends, TestDb, ADMIN, ANALYST, LLM};

use crate::support::{checkpoint_input, client, facts, log_until, progress, start, world, FACTS};

/// The next `n` items of a follower, each an event.
pub async fn next_n(
    log: &mut (impl Stream<Item = Result<LogEvent, pm_client::Error>> + Unpin),
    n: usize,
) -> Vec<LogEvent> {
    let mut events = Vec::new();
    while events.len() < n {
        let next = tokio::time::timeout(Duration::from_secs(10), log.next())
            .await
            .expect("the follower delivers within 10 s")
            .expect("the follower goes on");
        events.push(next.expect("an event"));
    }
    events
}

/// Waits until the session saga has created `cid`'s session — its `session.created` rune
/// is in the log (appended in the transaction that writes the session) — so that a stream
/// of the conversation opens with the session in its snapshot.
async fn wait_for_session(c: &Client, cid: Uuid) {
    let query = EventQuery::new()
        .with_type("session.created")
        .conversation(cid);
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.events(&query).await.expect("page").items.is_empty() {
        assert!(
            Instant::now() < deadline,
            "no session.created for {cid} within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn positions(events: &[LogEvent]) -> Vec<String> {
    events.iter().map(|e| e.position.to_string()).collect()
}

async fn pages_are_typed_filtered_and_resumable(db: TestDb) {
    let svc = start(&db).await;
    let w = world(&client(&svc, ADMIN), "acme").await;
    let analyst = client(&svc, ANALYST);
    log_until(&svc, w.message.position.as_ref().expect("position")).await;
    let all = analyst.events(&facts()).await.expect("page");
    assert_eq!(all.items.len(), 7);
    assert!(all
        .items
        .iter()
        .all(|e| matches!(e.content, EventContent::Fact(_))));
    assert_eq!(all.next_cursor, all.items[6].position);
    assert!(matches!(all.items[0].fact(), Some(Fact::ActorRegistered(a)) if *a == w.human.entity));
    assert!(matches!(all.items[6].fact(), Some(Fact::MessageAdded(m)) if *m == w.message.entity));
    assert_eq!(Some(&all.items[6].position), w.message.position.as_ref());
    // Unfiltered, the log holds the same facts in the same order, and the sagas' runes
    // between them, typed as `Other`.
    let everything = analyst
        .events(&EventQuery::new().limit(500))
        .await
        .expect("page");
    let (in_log, runes): (Vec<&LogEvent>, Vec<&LogEvent>) = everything
        .items
        .iter()
        .partition(|e| e.event_type().starts_with(FACTS.trim_end_matches('*')));
    assert_eq!(in_log, all.items.iter().collect::<Vec<_>>());
    for rune in runes {
        assert!(
            matches!(&rune.content, EventContent::Other { event_type, .. } if event_type == rune.event_type()),
            "{rune:?}"
        );
    }

    let tasks = EventQuery::new().with_type("project_manager.task.*");
    let page = analyst.events(&tasks).await.expect("page");
    assert_eq!(
        page.items
            .iter()
            .map(LogEvent::event_type)
            .collect::<Vec<_>>(),
        [
            "project_manager.task.created",
            "project_manager.task.checkpoint.created"
        ]
    );
    let exact = EventQuery::new().types(["project_manager.actor.registered"]);
    assert_eq!(analyst.events(&exact).await.expect("page").items.len(), 2);
    let one = facts().conversation(w.conversation.entity.id);
    let page = analyst.events(&one).await.expect("page");
    assert_eq!(
        page.items.len(),
        5,
        "its own fact, checkpoint, task, task checkpoint, message"
    );
    assert!(page
        .items
        .iter()
        .all(|e| e.conversation_id() == Some(w.conversation.entity.id)));

    let first = analyst.events(&facts().limit(4)).await.expect("page");
    let rest = analyst
        .events(&facts().limit(4).after(first.next_cursor.clone()))
        .await
        .expect("page");
    let both: Vec<_> = first.items.iter().chain(&rest.items).cloned().collect();
    assert_eq!(positions(&both), positions(&all.items));
    let end = analyst
        .events(&facts().after(rest.next_cursor.clone()))
        .await
        .expect("page");
    assert!(end.items.is_empty());
    assert_eq!(end.next_cursor, rest.next_cursor);
    let from_start = analyst
        .events(&facts().after(Position::start()))
        .await
        .expect("page");
    assert_eq!(positions(&from_start.items), positions(&all.items));
    svc.stop().await;
}

async fn the_follower_delivers_the_log_in_order_and_live(db: TestDb) {
    let svc = start(&db).await;
    let admin = client(&svc, ADMIN);
    let w = world(&admin, "acme").await;
    let analyst = client(&svc, ANALYST);
    let mut log = analyst.follow(facts());
    let history = next_n(&mut log, 7).await;
    let page = analyst.events(&facts()).await.expect("page");
    assert_eq!(history, page.items);

    // Live: written after the follower caught up, with the attributes the command set.
    let llm = client(&svc, LLM);
    let written = llm
        .create_conversation_checkpoint(
            w.conversation.entity.id,
            checkpoint_input(CheckpointType::WorkCompleted),
        )
        .causation_id("cause-1")
        .correlation_id("corr-1")
        .await
        .expect("checkpoint");
    let live = next_n(&mut log, 1).await.remove(0);
    assert_eq!(Some(&live.position), written.position.as_ref());
    assert!(
        matches!(live.fact(), Some(Fact::ConversationCheckpointCreated(c)) if *c == written.entity)
    );
    let a = live.attributes.as_ref().expect("attributes");
    assert_eq!(a.causation_id.as_deref(), Some("cause-1"));
    assert_eq!(a.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(written.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(a.role.as_deref(), Some("llm"));
    assert_eq!(a.subject, written.entity.id.to_string());
    assert_eq!(a.sequence, 1);
    assert!(a.time.is_some());
    svc.stop().await;
}

async fn a_conversation_stream_opens_with_its_snapshot(db: TestDb) {
    let svc = start(&db).await;
    let admin = client(&svc, ADMIN);
    let w = world(&admin, "acme").await;
    let other = world(&admin, "globex").await;
    let cid = w.conversation.entity.id;
    let analyst = client(&svc, ANALYST);
    wait_for_session(&analyst, cid).await;
    let after = w.checkpoint.position.clone().expect("position");
    let query = facts().conversation(cid).after(after.clone());
    let mut log = analyst.follow(query);
    let first = next_n(&mut log, 3).await;
    let EventContent::Snapshot(snapshot) = &first[0].content else {
        panic!("snapshot first: {:?}", first[0]);
    };
    assert_eq!((snapshot.conversation_id, &snapshot.cursor), (cid, &after));
    let session = snapshot.session.as_ref().expect("the session exists");
    let session: serde_json::Value = session.parse().expect("a session");
    assert_eq!(session["conversation_id"], cid.to_string(), "{session}");
    assert_eq!(first[0].position, after);
    assert!(matches!(first[1].fact(), Some(Fact::TaskCreated(t)) if t.id == w.task.entity.id));
    assert!(matches!(
        first[2].fact(),
        Some(Fact::TaskCheckpointCreated(_))
    ));
    // Other conversations' events are not in this stream.
    client(&svc, LLM)
        .create_task_checkpoint(
            other.task.entity.id,
            progress(TaskCheckpointType::WorkPaused),
        )
        .await
        .expect("elsewhere");
    let mine = client(&svc, LLM)
        .create_task_checkpoint(
            w.task.entity.id,
            progress(TaskCheckpointType::WorkCompleted),
        )
        .await
        .expect("here");
    let next = next_n(&mut log, 2).await;
    assert!(matches!(next[0].fact(), Some(Fact::MessageAdded(_))));
    assert_eq!(Some(&next[1].position), mine.position.as_ref());
    svc.stop().await;
}

on_both_backends!(
    pages_are_typed_filtered_and_resumable,
    the_follower_delivers_the_log_in_order_and_live,
    a_conversation_stream_opens_with_its_snapshot,
);
