//! The keys of personal data on both stores (TRUST.md "Forgetting a person"): a key made
//! once and answered the same after, destroyed for good, stored wrapped by the master key
//! (never in the clear once one is set), a start without or with another master key
//! refused, and a rotation with the previous one.

mod support;

use pm_infrastructure::db::Args;
use pm_infrastructure::keys::{KeyError, KeyStore, MasterKey, Scope};
use pm_infrastructure::Database;
use pm_test_db::{on_both_backends, TestDb};
use uuid::Uuid;

fn master(byte: u8) -> MasterKey {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode([byte; 32]);
    MasterKey::parse("PM_MASTER_KEY", &text).expect("a master key")
}

async fn store(db: &Database, master: Option<MasterKey>) -> Result<KeyStore, KeyError> {
    KeyStore::open(db, master, None, 64).await
}

/// A key made (and committed) for `scope` `id`.
async fn made(keys: &KeyStore, scope: Scope, id: Uuid) -> [u8; 32] {
    let key = keys.key_made(scope, id).await.expect("made");
    *key.expect("not destroyed").bytes()
}

/// The key of `scope` `id` as `keys` reads it: its bytes, or `None` when there is none
/// (never made, or destroyed).
async fn read(keys: &KeyStore, scope: Scope, id: Uuid) -> Option<[u8; 32]> {
    keys.key(scope, id)
        .await
        .expect("read")
        .flatten()
        .map(|k| *k.bytes())
}

/// The stored material of every key (a destroyed key's tombstone has none).
async fn materials(db: &Database) -> Vec<Vec<u8>> {
    db.fetch_all("SELECT material FROM pm_keys ORDER BY id", Args::new())
        .await
        .expect("read")
        .iter()
        .map(|r| r.bytes("material").expect("material").to_vec())
        .collect()
}

async fn a_key_is_made_once_and_read_back_the_same(db: TestDb) {
    let db = support::migrated(&db, 4).await;
    let keys = store(&db, None).await.expect("opened");
    let alice = Uuid::new_v4();
    let first = made(&keys, Scope::Actor, alice).await;
    let again = made(&keys, Scope::Actor, alice).await;
    assert_eq!(first, again);
    // Made in a transaction (a saga's write) it is the same key too.
    let mut tx = db.begin().await.expect("tx");
    let within = keys
        .key_in(&mut tx, Scope::Actor, alice)
        .await
        .expect("read");
    tx.commit().await.expect("commit");
    assert_eq!(within.map(|k| *k.bytes()), Some(first));
    // A fresh store (another replica, a restart) reads the same from the table.
    let other = store(&db, None).await.expect("opened");
    assert_eq!(read(&other, Scope::Actor, alice).await, Some(first));
    // Another replica making it too gets the stored one, not one of its own.
    let third = store(&db, None).await.expect("opened");
    assert_eq!(made(&third, Scope::Actor, alice).await, first);
    assert!(
        read(&other, Scope::Conversation, alice).await.is_none(),
        "each scope has keys of its own"
    );
}

async fn a_destroyed_key_is_gone_for_every_reader(db: TestDb) {
    let db = support::migrated(&db, 4).await;
    let keys = store(&db, None).await.expect("opened");
    let other = store(&db, None).await.expect("opened");
    let conversation = Uuid::new_v4();
    made(&keys, Scope::Conversation, conversation).await;
    assert!(read(&other, Scope::Conversation, conversation)
        .await
        .is_some());

    let mut tx = db.begin().await.expect("tx");
    keys.destroy_in(&mut tx, Scope::Conversation, conversation)
        .await
        .expect("destroyed");
    tx.commit().await.expect("commit");
    assert!(read(&keys, Scope::Conversation, conversation)
        .await
        .is_none());
    // Another replica holds it in memory until it hears of the forgetting (`NOTIFY
    // pm_forgotten`), which also tells whoever kept opened texts that they may be stale.
    let heard = other.forgettings();
    other.forgotten(Scope::Conversation, conversation);
    assert_eq!(other.forgettings(), heard + 1);
    assert!(read(&other, Scope::Conversation, conversation)
        .await
        .is_none());
    assert_eq!(materials(&db).await, [Vec::<u8>::new()], "a tombstone");
    // A forgotten party never gets a key again: its texts are not written.
    assert!(keys
        .key_made(Scope::Conversation, conversation)
        .await
        .expect("read")
        .is_none());
    let mut tx = db.begin().await.expect("tx");
    let within = keys
        .key_in(&mut tx, Scope::Conversation, conversation)
        .await
        .expect("read");
    tx.commit().await.expect("commit");
    assert!(within.is_none());
    // A master key set later leaves the tombstone as it is.
    store(&db, Some(master(9))).await.expect("opened");
    assert_eq!(materials(&db).await, [Vec::<u8>::new()]);
}

async fn a_master_key_wraps_every_key_and_is_then_required(db: TestDb) {
    let db = support::migrated(&db, 4).await;
    let clear = store(&db, None).await.expect("opened");
    let bob = Uuid::new_v4();
    let key = made(&clear, Scope::Actor, bob).await;
    assert_eq!(
        materials(&db).await,
        [key.to_vec()],
        "no master key: stored as it is"
    );

    // The first start with a master key wraps what was stored in the clear.
    let wrapped = store(&db, Some(master(7))).await.expect("opened");
    assert!(!materials(&db)
        .await
        .iter()
        .any(|m| m.windows(32).any(|w| w == key)));
    assert_eq!(read(&wrapped, Scope::Actor, bob).await, Some(key));
    let carol = Uuid::new_v4();
    let carols = made(&wrapped, Scope::Actor, carol).await;
    assert!(!materials(&db)
        .await
        .iter()
        .any(|m| m.windows(32).any(|w| w == carols)));

    assert!(matches!(
        store(&db, None).await,
        Err(KeyError::MasterKeyMissing)
    ));
    assert!(matches!(
        store(&db, Some(master(8))).await,
        Err(KeyError::MasterKeyWrong)
    ));
    let again = store(&db, Some(master(7)))
        .await
        .expect("the same master key opens");
    assert_eq!(read(&again, Scope::Actor, carol).await, Some(carols));
}

async fn a_rotation_rewraps_every_key_with_the_new_master_key(db: TestDb) {
    let db = support::migrated(&db, 4).await;
    let old = store(&db, Some(master(1))).await.expect("opened");
    let dave = Uuid::new_v4();
    let key = made(&old, Scope::Actor, dave).await;
    let before = materials(&db).await;

    let rotated = KeyStore::open(&db, Some(master(2)), Some(master(1)), 64)
        .await
        .expect("rotated");
    assert_ne!(materials(&db).await, before, "rewrapped");
    assert_eq!(read(&rotated, Scope::Actor, dave).await, Some(key));
    assert!(matches!(
        store(&db, Some(master(1))).await,
        Err(KeyError::MasterKeyWrong)
    ));
    let new = store(&db, Some(master(2)))
        .await
        .expect("the new one alone opens");
    assert_eq!(read(&new, Scope::Actor, dave).await, Some(key));
}

async fn a_wrapped_key_moved_to_another_row_does_not_open(db: TestDb) {
    let db = support::migrated(&db, 4).await;
    let keys = store(&db, Some(master(3))).await.expect("opened");
    let (erin, frank) = (Uuid::new_v4(), Uuid::new_v4());
    made(&keys, Scope::Actor, erin).await;
    made(&keys, Scope::Actor, frank).await;
    // Frank's row given Erin's wrapped key.
    let erins = db
        .fetch_optional(
            "SELECT material FROM pm_keys WHERE scope = 'actor' AND id = $1",
            Args::new().uuid(erin),
        )
        .await
        .expect("read")
        .expect("erin's row")
        .bytes("material")
        .expect("material")
        .to_vec();
    db.execute(
        "UPDATE pm_keys SET material = $1 WHERE scope = 'actor' AND id = $2",
        Args::new().bytes(erins).uuid(frank),
    )
    .await
    .expect("moved");
    let fresh = store(&db, Some(master(3))).await.expect("opened");
    assert!(matches!(
        fresh.key(Scope::Actor, frank).await,
        Err(KeyError::Damaged("actor", id)) if id == frank
    ));
}

on_both_backends!(
    a_key_is_made_once_and_read_back_the_same,
    a_destroyed_key_is_gone_for_every_reader,
    a_master_key_wraps_every_key_and_is_then_required,
    a_rotation_rewraps_every_key_with_the_new_master_key,
    a_wrapped_key_moved_to_another_row_does_not_open,
);
