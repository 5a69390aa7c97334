//! `DbIdempotencyStore`, processor `Ownership` and `DbReplicaLiveness` on both stores, where
//! they live: a key is claimed once and its row found by the next claim, a take-over is a
//! compare-and-set on the claim's owner, a released claim can be claimed again, a recorded
//! or completed answer is what the next claim finds; one owner per processor until it lets
//! go; a replica is alive while its ownership connection (PostgreSQL) or process (SQLite)
//! is.

mod support;

use std::time::Duration;

use pm_application::idempotency::{
    Claimed, IdempotencyKey, IdempotencyStore, KeyRow, KeyState, ReplicaLiveness, StoredAnswer,
    StoredResponse,
};
use pm_infrastructure::idempotency::DbIdempotencyStore;
use pm_infrastructure::processor::liveness::{new_replica_id, DbReplicaLiveness};
use pm_infrastructure::processor::ownership::{Claim, Ownership};
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};

async fn database(db: &TestDb) -> Database {
    support::migrated(db, 8).await
}

fn key(key: &str, hash: &str) -> IdempotencyKey {
    IdempotencyKey {
        role: "ingress".into(),
        key: key.into(),
        request_hash: hash.into(),
        claimed: true,
        owner: String::new(),
    }
}

fn answer() -> StoredAnswer {
    StoredAnswer {
        status: 422,
        body: r#"{"code":"validation_failed"}"#.into(),
        location: None,
    }
}

fn pending_owner(claimed: Claimed) -> Option<String> {
    match claimed {
        Claimed::Found(KeyRow {
            state: KeyState::Pending { owner, .. },
            ..
        }) => owner,
        other => panic!("not a pending row: {other:?}"),
    }
}

async fn a_key_is_claimed_once_taken_over_by_compare_and_set_and_released(db: TestDb) {
    let store = DbIdempotencyStore::new(database(&db).await);
    let k = key("k-1", "h-1");
    assert_eq!(store.claim(&k, "r1").await.expect("claim"), Claimed::Now);
    let found = store.claim(&k, "r2").await.expect("claim again");
    assert_eq!(pending_owner(found), Some("r1".into()));

    assert!(store
        .take_over(&k, Some("r1"), "r2")
        .await
        .expect("take over"));
    assert!(
        !store
            .take_over(&k, Some("r1"), "r3")
            .await
            .expect("answered"),
        "a take-over from an owner that no longer holds the claim changes nothing"
    );
    assert_eq!(
        pending_owner(store.claim(&k, "r3").await.expect("claim")),
        Some("r2".into())
    );

    store.release(&k, "r2").await.expect("release");
    assert_eq!(
        store.claim(&k, "r3").await.expect("claim after release"),
        Claimed::Now,
        "a released key runs again"
    );
}

async fn an_answer_recorded_or_completed_is_what_the_next_claim_finds(db: TestDb) {
    let store = DbIdempotencyStore::new(database(&db).await);
    let recorded = IdempotencyKey {
        claimed: false,
        ..key("k-recorded", "h")
    };
    assert!(store.record(&recorded, &answer()).await.expect("record"));
    assert!(
        !store.record(&recorded, &answer()).await.expect("answered"),
        "a key with a row is not recorded again"
    );
    let expected = Claimed::Found(KeyRow {
        request_hash: "h".into(),
        state: KeyState::Done(StoredResponse::Answer(answer())),
    });
    assert_eq!(store.claim(&recorded, "r1").await.expect("claim"), expected);

    let claimed = key("k-claimed", "h");
    assert_eq!(
        store.claim(&claimed, "r1").await.expect("claim"),
        Claimed::Now
    );
    store.complete(&claimed, &answer()).await.expect("complete");
    assert_eq!(store.claim(&claimed, "r2").await.expect("claim"), expected);
}

async fn a_processor_has_one_owner_until_it_lets_go(db: TestDb) {
    let database = database(&db).await;
    let (first, second) = (Ownership::new(&database), Ownership::new(&database));
    let (r1, r2) = (new_replica_id(), new_replica_id());
    assert_eq!(first.claim("p", &r1).await.expect("claim"), Claim::Taken);
    assert_eq!(second.claim("p", &r2).await.expect("claim"), Claim::Refused);
    assert_eq!(first.claim("p", &r1).await.expect("confirm"), Claim::Kept);
    first.release("p").await.expect("release");
    assert_eq!(second.claim("p", &r2).await.expect("claim"), Claim::Taken);
    drop(second);
    // The database ends a dropped connection's session (and its lock) soon, not at once:
    // standbys ask again, as the runner does every 250 ms.
    let mut taken = Claim::Refused;
    for _ in 0..30 {
        taken = first.claim("p", &r1).await.expect("claim");
        if taken == Claim::Taken {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        taken,
        Claim::Taken,
        "an owner that is gone (its connection or lock closed) is replaced within 3 s"
    );
}

async fn a_replica_is_alive_while_it_runs(db: TestDb) {
    let database = database(&db).await;
    let liveness = DbReplicaLiveness::new(database.clone());
    let ownership = Ownership::new(&database);
    let replica = new_replica_id();
    ownership.claim("p", &replica).await.expect("claim");
    assert!(
        liveness.is_alive(&replica).await.expect("asked"),
        "{replica}"
    );
    // A replica of a process that does not run, whose connection does not exist.
    let gone = format!("4194304-{}", uuid::Uuid::now_v7());
    assert!(!liveness.is_alive(&gone).await.expect("asked"), "{gone}");
    // A replica of an earlier process under this one's id (a restart as PID 1 in a
    // container): not alive because this process runs.
    let predecessor = format!("{}-{}", std::process::id(), uuid::Uuid::now_v7());
    assert!(
        !liveness.is_alive(&predecessor).await.expect("asked"),
        "{predecessor}"
    );
}

on_both_backends!(
    a_key_is_claimed_once_taken_over_by_compare_and_set_and_released,
    an_answer_recorded_or_completed_is_what_the_next_claim_finds,
    a_processor_has_one_owner_until_it_lets_go,
    a_replica_is_alive_while_it_runs,
);
