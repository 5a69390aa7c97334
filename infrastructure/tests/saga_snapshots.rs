//! `DbSagaStore`'s snapshots on both stores: a load asked for a snapshot of a format gets
//! the stored one of that format and only the runes after its position (in log order);
//! without one, or of another format, every rune; an older snapshot never replaces a newer
//! one of the same format, and a new format replaces an old one. A rune names the position
//! of the fact that caused it only when the sagas wrote it (not a caller's causation).

mod support;

use chrono::Utc;
use pm_application::bus::EventMetadata;
use pm_application::log::LogPosition;
use pm_application::sagas::{NewRune, SagaStore, SagaWrite, StoredConversation, StoredSnapshot};
use pm_domain::saga::rune::session::Reason;
use pm_domain::saga::{Instance, Recorded, Rune, SessionRune};
use pm_infrastructure::append::Appender;
use pm_infrastructure::sagas::DbSagaStore;
use pm_test_db::{on_both_backends, TestDb};
use tokio::sync::watch;
use uuid::Uuid;

async fn store(db: &TestDb) -> DbSagaStore {
    let database = support::migrated(db, 4).await;
    let (doorbell, _) = watch::channel(0);
    let keys = support::keys(&database).await;
    DbSagaStore::new(database.clone(), Appender::new(database, keys, doorbell))
}

/// Commits `count` runes of `conversation`'s session stream from `sequence` + 1, at
/// `version`; answers the position of the last.
async fn commit(
    store: &DbSagaStore,
    conversation: Uuid,
    version: i64,
    sequence: i64,
    count: i64,
) -> LogPosition {
    let runes = (1..=count)
        .map(|n| NewRune {
            conversation_id: conversation,
            recorded: Recorded {
                instance: Instance::Session(conversation),
                rune: Rune::Session(SessionRune::Paused(Reason {
                    reason: format!("pause {}", sequence + n),
                })),
            },
            sequence: sequence + n,
            metadata: EventMetadata {
                correlation_id: "test".into(),
                causation_id: Some((1_000 + sequence + n).to_string()),
                role: "saga".into(),
                principal: "system".into(),
                recorded_at: Utc::now(),
                turn: None,
                trace: None,
            },
        })
        .collect();
    let write = SagaWrite {
        conversations: vec![(conversation, version)],
        runes,
        ..SagaWrite::default()
    };
    let committed = store.commit(write, None).await.expect("committed");
    committed.last_position.expect("runes were appended")
}

fn snapshot(position: LogPosition, format: i32, state: &[u8]) -> StoredSnapshot {
    StoredSnapshot {
        position,
        format,
        state: state.to_vec(),
    }
}

fn sequences(loaded: &StoredConversation) -> Vec<i64> {
    loaded.runes.iter().map(|r| r.sequence).collect()
}

/// Saves `snapshot(position, format, state)` for `conversation`.
async fn save(
    store: &DbSagaStore,
    conversation: Uuid,
    position: LogPosition,
    format: i32,
    state: &[u8],
) {
    store
        .save_snapshot(conversation, snapshot(position, format, state))
        .await
        .expect("saved");
}

async fn a_load_reads_the_snapshot_of_its_format_and_the_runes_after_it(db: TestDb) {
    let store = store(&db).await;
    let (c, other) = (Uuid::new_v4(), Uuid::new_v4());
    let first = commit(&store, c, 0, 0, 3).await;
    commit(&store, other, 0, 0, 2).await;
    save(&store, c, first, 1, b"three runes").await;

    // Given a snapshot at the last rune: it and no runes.
    let loaded = store.load(c, Some(1)).await.expect("load");
    assert_eq!(loaded.snapshot, Some(snapshot(first, 1, b"three runes")));
    assert!(loaded.runes.is_empty());
    assert_eq!(loaded.version, 1);

    // Given runes after it: exactly those, in log order, with their positions and causes.
    let last = commit(&store, c, 1, 3, 4).await;
    let loaded = store.load(c, Some(1)).await.expect("load");
    assert_eq!(loaded.snapshot.as_ref().map(|s| s.position), Some(first));
    assert_eq!(sequences(&loaded), vec![4, 5, 6, 7]);
    assert!(loaded.runes.iter().all(|r| r.position > first));
    assert!(loaded
        .runes
        .windows(2)
        .all(|w| w[0].position < w[1].position));
    assert_eq!(loaded.runes.last().map(|r| r.position), Some(last));
    assert_eq!(loaded.runes[0].cause, Some(1_004));
    assert_eq!(loaded.version, 2);

    // Without a snapshot asked for, or of a format not stored: every rune.
    for format in [None, Some(2)] {
        let loaded = store.load(c, format).await.expect("load");
        assert_eq!(loaded.snapshot, None);
        assert_eq!(sequences(&loaded), (1..=7).collect::<Vec<_>>());
    }
    // Another conversation's runes are not this one's.
    let loaded = store.load(other, Some(1)).await.expect("load");
    assert_eq!((&loaded.snapshot, sequences(&loaded)), (&None, vec![1, 2]));
    // A conversation never written: at version 0, with nothing.
    let loaded = store.load(Uuid::new_v4(), Some(1)).await.expect("load");
    assert_eq!(
        (loaded.version, &loaded.snapshot, loaded.runes.len()),
        (0, &None, 0)
    );
}

async fn an_older_snapshot_never_replaces_a_newer_one_of_its_format(db: TestDb) {
    let store = store(&db).await;
    let c = Uuid::new_v4();
    let first = commit(&store, c, 0, 0, 2).await;
    let second = commit(&store, c, 1, 2, 2).await;
    save(&store, c, second, 1, b"newer").await;
    // A write that finished late, of an earlier commit.
    save(&store, c, first, 1, b"older").await;
    let loaded = store.load(c, Some(1)).await.expect("load");
    assert_eq!(loaded.snapshot, Some(snapshot(second, 1, b"newer")));

    // A release with a new format replaces it, even at an earlier position.
    save(&store, c, first, 2, b"format two").await;
    let loaded = store.load(c, Some(2)).await.expect("load");
    assert_eq!(loaded.snapshot, Some(snapshot(first, 2, b"format two")));
    assert_eq!(sequences(&loaded), vec![3, 4]);
    assert_eq!(store.load(c, Some(1)).await.expect("load").snapshot, None);
}

/// A rune of a control carries its caller's `X-Causation-Id`, which may look like a log
/// position; only the sagas' own runes name the fact that caused them.
async fn only_the_sagas_runes_name_a_causing_position(db: TestDb) {
    let store = store(&db).await;
    let c = Uuid::new_v4();
    commit(&store, c, 0, 0, 1).await;
    let control = NewRune {
        conversation_id: c,
        recorded: Recorded {
            instance: Instance::Session(c),
            rune: Rune::Session(SessionRune::Paused(Reason {
                reason: "operator".into(),
            })),
        },
        sequence: 2,
        metadata: EventMetadata {
            correlation_id: "test".into(),
            causation_id: Some("9000000".into()),
            role: "admin".into(),
            principal: "admin".into(),
            recorded_at: Utc::now(),
            turn: None,
            trace: None,
        },
    };
    let write = SagaWrite {
        conversations: vec![(c, 1)],
        runes: vec![control],
        ..SagaWrite::default()
    };
    store.commit(write, None).await.expect("committed");
    let loaded = store.load(c, None).await.expect("load");
    let causes: Vec<Option<i64>> = loaded.runes.iter().map(|r| r.cause).collect();
    assert_eq!(causes, vec![Some(1_001), None]);
}

on_both_backends!(
    only_the_sagas_runes_name_a_causing_position,
    a_load_reads_the_snapshot_of_its_format_and_the_runes_after_it,
    an_older_snapshot_never_replaces_a_newer_one_of_its_format,
);
