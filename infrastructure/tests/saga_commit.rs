//! `DbSagaStore`'s commit on both stores, where it lives: each conversation's version is a
//! compare-and-set (a stale writer writes nothing), writers of different conversations
//! commit in parallel, only one of several writers of one conversation commits, a batch
//! moves the cursor only from where it started, a fired deadline is spent once, and an
//! agent's inbox rows follow its runes (a turn enqueued, dispatched, the agent terminated).

mod support;

use chrono::Utc;
use pm_application::bus::EventMetadata;
use pm_application::log::LogPosition;
use pm_application::sagas::{CommitError, NewRune, SagaStore, SagaWrite};
use pm_domain::conversation::ConversationStarted;
use pm_domain::saga::{
    AgentRune, Deadline, DeadlineKind, DeadlineOp, Input, Instance, Recorded, Rune, SagaConfig,
    Sagas,
};
use pm_infrastructure::append::Appender;
use pm_infrastructure::db::Args;
use pm_infrastructure::sagas::DbSagaStore;
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use serde_json::json;
use std::time::Duration;
use tokio::sync::watch;
use uuid::Uuid;

async fn store(db: &TestDb) -> (DbSagaStore, Database) {
    let database = support::migrated(db, 8).await;
    let (doorbell, _) = watch::channel(0);
    let appender = Appender::new(database.clone(), support::keys(&database).await, doorbell);
    (DbSagaStore::new(database.clone(), appender), database)
}

/// The runes a conversation's start records (session created, root agent spawned, …),
/// numbered from 1 in their streams.
fn started(conversation: Uuid) -> Vec<NewRune> {
    let fact: ConversationStarted = serde_json::from_value(json!({
        "id": conversation, "actor_ids": [Uuid::new_v4()], "title": "a title",
        "created_at": "2026-11-24T10:00:00Z", "updated_at": "2026-11-24T10:00:00Z",
    }))
    .expect("a fact");
    let outcome = Sagas::default()
        .handle(
            Input::ConversationStarted {
                fact: &fact,
                ai_actors: &[],
            },
            Utc::now(),
            &SagaConfig::default(),
        )
        .expect("decided");
    let mut streams = std::collections::HashMap::new();
    outcome
        .runes
        .into_iter()
        .map(|recorded| {
            let sequence = streams.entry(recorded.instance).or_insert(0);
            *sequence += 1;
            new_rune(conversation, recorded, *sequence)
        })
        .collect()
}

/// The first write of a conversation: its start's runes, from version 0.
fn start(conversation: Uuid) -> SagaWrite {
    SagaWrite {
        runes: started(conversation),
        ..write(conversation, 0)
    }
}

fn deadline(conversation: Uuid) -> Deadline {
    Deadline {
        instance: Instance::Session(conversation),
        kind: DeadlineKind::SessionTimeout,
        due_at: pm_domain::time::truncate(Utc::now()),
        epoch: 1,
    }
}

fn write(conversation: Uuid, version: i64) -> SagaWrite {
    SagaWrite {
        conversations: vec![(conversation, version)],
        ..SagaWrite::default()
    }
}

async fn cursor(db: &Database) -> i64 {
    db.fetch_optional(
        "SELECT cursor_seq FROM processors WHERE name = $1",
        Args::new().text("sagas"),
    )
    .await
    .expect("read")
    .map_or(0, |row| row.int("cursor_seq").expect("cursor"))
}

async fn a_stale_version_is_a_conflict_that_writes_nothing(db: TestDb) {
    let (store, _db) = store(&db).await;
    let c = Uuid::new_v4();
    let first = SagaWrite {
        runes: started(c),
        ..write(c, 0)
    };
    let runes = first.runes.len();
    let committed = store.commit(first, None).await.expect("first commit");
    assert!(committed.last_position.is_some());
    let loaded = store.load(c, None).await.expect("load");
    assert_eq!((loaded.version, loaded.runes.len()), (1, runes));

    // A writer that loaded before the first commit: version 0.
    let stale = SagaWrite {
        deadlines: vec![(c, DeadlineOp::Arm(deadline(c)))],
        ..write(c, 0)
    };
    match store.commit(stale, None).await {
        Err(CommitError::Conflict { conversations }) => assert_eq!(conversations, vec![c]),
        other => panic!("a stale writer committed: {other:?}"),
    }
    let loaded = store.load(c, None).await.expect("load");
    assert_eq!((loaded.version, loaded.runes.len()), (1, runes));
    let due = store
        .due(Utc::now() + chrono::Duration::days(1), 10)
        .await
        .expect("due");
    assert!(
        due.is_empty(),
        "the stale writer's deadline was written: {due:?}"
    );
}

async fn different_conversations_commit_in_parallel(db: TestDb) {
    let (store, database) = store(&db).await;
    let conversations: Vec<Uuid> = (0..16).map(|_| Uuid::new_v4()).collect();
    let tasks: Vec<_> = conversations
        .iter()
        .map(|c| {
            let (store, c) = (store.clone(), *c);
            tokio::spawn(async move {
                store.commit(start(c), None).await?;
                for version in 1..5 {
                    store.commit(write(c, version), None).await?;
                }
                Ok::<_, CommitError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await
            .expect("joined")
            .expect("every commit of its own conversation lands");
    }
    for c in &conversations {
        assert_eq!(store.load(*c, None).await.expect("load").version, 5);
    }
    if db.kind != "postgres" {
        return; // SQLite has one writer: nothing runs beside an open write.
    }
    // A transaction holding the first conversation's version row open: a commit of that
    // conversation waits for it, a commit of another one does not.
    let (held, other) = (conversations[0], conversations[1]);
    let mut open = database.begin().await.expect("begin");
    open.execute(
        "UPDATE saga_conversations SET version = version WHERE conversation_id = $1",
        Args::new().uuid(held),
    )
    .await
    .expect("lock the row");
    let waits = tokio::time::timeout(
        Duration::from_millis(300),
        store.commit(write(held, 5), None),
    );
    assert!(
        waits.await.is_err(),
        "a commit of the held conversation went past its lock"
    );
    let beside = tokio::time::timeout(Duration::from_secs(5), store.commit(write(other, 5), None));
    beside
        .await
        .expect("a commit of another conversation does not wait")
        .expect("and lands");
    drop(open);
    store
        .commit(write(held, 5), None)
        .await
        .expect("the held conversation commits once the lock is gone");
}

async fn of_several_writers_of_one_conversation_one_commits(db: TestDb) {
    let (store, _db) = store(&db).await;
    let c = Uuid::new_v4();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.commit(start(c), None).await })
        })
        .collect();
    let mut committed = 0;
    for task in tasks {
        match task.await.expect("joined") {
            Ok(_) => committed += 1,
            Err(CommitError::Conflict { .. }) => {}
            Err(e) => panic!("not a conflict: {e}"),
        }
    }
    assert_eq!(committed, 1);
    let loaded = store.load(c, None).await.expect("load");
    assert_eq!(loaded.version, 1);
    assert_eq!(
        loaded.runes.len(),
        started(c).len(),
        "one writer's runes only"
    );
}

async fn a_batch_moves_the_cursor_only_from_where_it_started(db: TestDb) {
    let (store, database) = store(&db).await;
    // The runner claims its processor's row before it applies anything.
    support::processor_row(&database, "sagas").await;
    let c = Uuid::new_v4();
    let batch = SagaWrite {
        runes: started(c),
        ..write(c, 0)
    };
    store
        .commit(batch, Some((LogPosition(0), LogPosition(10))))
        .await
        .expect("the batch commits");
    assert_eq!(cursor(&database).await, 10);

    // Without runes the cursor moves too.
    store
        .commit(write(c, 1), Some((LogPosition(10), LogPosition(12))))
        .await
        .expect("an empty batch commits");
    assert_eq!(cursor(&database).await, 12);

    let replayed = store
        .commit(write(c, 2), Some((LogPosition(10), LogPosition(20))))
        .await;
    assert!(
        matches!(replayed, Err(CommitError::CursorMoved)),
        "{replayed:?}"
    );
    assert_eq!(cursor(&database).await, 12);
    assert_eq!(
        store.load(c, None).await.expect("load").version,
        2,
        "nothing written"
    );
}

async fn a_fired_deadline_is_spent_once(db: TestDb) {
    let (store, _db) = store(&db).await;
    let c = Uuid::new_v4();
    let d = deadline(c);
    let armed = SagaWrite {
        deadlines: vec![(c, DeadlineOp::Arm(d))],
        ..write(c, 0)
    };
    store.commit(armed, None).await.expect("armed");
    assert_eq!(store.due(Utc::now(), 10).await.expect("due"), vec![(c, d)]);

    let fire = |version| SagaWrite {
        fired: vec![(c, d)],
        ..write(c, version)
    };
    store.commit(fire(1), None).await.expect("fired");
    assert!(store.due(Utc::now(), 10).await.expect("due").is_empty());
    // Even at the right version, a deadline that is gone does not fire again.
    match store.commit(fire(2), None).await {
        Err(CommitError::Conflict { .. }) => {}
        other => panic!("a spent deadline fired again: {other:?}"),
    }
    assert_eq!(store.load(c, None).await.expect("load").version, 2);
}

/// `recorded` as rune `sequence` of its stream, with the metadata the engine records.
fn new_rune(conversation: Uuid, recorded: Recorded, sequence: i64) -> NewRune {
    NewRune {
        conversation_id: conversation,
        recorded,
        sequence,
        metadata: EventMetadata {
            correlation_id: "test".into(),
            causation_id: None,
            role: "saga".into(),
            principal: "system".into(),
            recorded_at: Utc::now(),
            turn: None,
            trace: None,
        },
    }
}

/// A rune of `agent`'s stream at `sequence`.
fn agent_rune(conversation: Uuid, agent: Uuid, sequence: i64, rune: serde_json::Value) -> NewRune {
    let recorded = Recorded {
        instance: Instance::Agent(agent),
        rune: Rune::Agent(serde_json::from_value::<AgentRune>(rune).expect("a rune")),
    };
    new_rune(conversation, recorded, sequence)
}

/// The turns in `agent`'s stored inbox, in its order.
async fn inbox(db: &Database, agent: Uuid) -> Vec<String> {
    db.fetch_all(
        "SELECT CAST(turn_id AS TEXT) AS turn_id FROM saga_agent_inbox WHERE agent_id = $1 ORDER BY position",
        Args::new().uuid(agent),
    )
    .await
    .expect("read")
    .iter()
    .map(|row| row.string("turn_id").expect("turn"))
    .collect()
}

async fn an_agents_inbox_rows_follow_its_runes(db: TestDb) {
    let (store, db) = store(&db).await;
    let c = Uuid::new_v4();
    let first = start(c);
    let (agent, last) = first
        .runes
        .iter()
        .rev()
        .find_map(|r| match r.recorded.instance {
            Instance::Agent(a) => Some((a, r.sequence)),
            _ => None,
        })
        .expect("the start spawns an agent");
    store.commit(first, None).await.expect("started");
    let turns: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let enqueued = turns
        .iter()
        .zip(1..)
        .map(|(t, i)| {
            agent_rune(
                c,
                agent,
                last + i,
                json!({"rune": "agent.turn_enqueued", "turn_id": t}),
            )
        })
        .collect();
    let queue = SagaWrite {
        runes: enqueued,
        ..write(c, 1)
    };
    store.commit(queue, None).await.expect("enqueued");
    let names = |ts: &[Uuid]| ts.iter().map(Uuid::to_string).collect::<Vec<_>>();
    assert_eq!(inbox(&db, agent).await, names(&turns));

    // When the head is dispatched, it alone leaves, by its key.
    let dispatch = SagaWrite {
        runes: vec![agent_rune(
            c,
            agent,
            last + 4,
            json!({"rune": "agent.turn_dispatched", "turn_id": turns[0], "turn_epoch": 1}),
        )],
        ..write(c, 2)
    };
    store.commit(dispatch, None).await.expect("dispatched");
    assert_eq!(inbox(&db, agent).await, names(&turns[1..]));

    // When the agent is terminated, its inbox is cleared; another agent's is untouched.
    let other = Uuid::new_v4();
    let kept = Uuid::new_v4();
    let end = SagaWrite {
        runes: vec![
            agent_rune(
                c,
                other,
                1,
                json!({"rune": "agent.turn_enqueued", "turn_id": kept}),
            ),
            agent_rune(
                c,
                agent,
                last + 5,
                json!({"rune": "agent.terminated", "agent_id": agent, "reason": "killed", "stats": {
                    "turn_epoch": 1, "turns": {"completed": 0, "interrupted": 0, "error": 0}}}),
            ),
        ],
        ..write(c, 3)
    };
    store.commit(end, None).await.expect("terminated");
    assert_eq!(inbox(&db, agent).await, Vec::<String>::new());
    assert_eq!(inbox(&db, other).await, names(&[kept]));
}

on_both_backends!(
    an_agents_inbox_rows_follow_its_runes,
    a_stale_version_is_a_conflict_that_writes_nothing,
    different_conversations_commit_in_parallel,
    of_several_writers_of_one_conversation_one_commits,
    a_batch_moves_the_cursor_only_from_where_it_started,
    a_fired_deadline_is_spent_once,
);
