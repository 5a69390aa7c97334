//! The master key of personal data (TRUST.md "Forgetting a person", issue 33): once
//! `PM_MASTER_KEY` protects a database's keys, a start without it or with another one is
//! refused naming the setting, a rotation with `PM_MASTER_KEY_PREVIOUS` rewraps them, and a
//! malformed key is refused before anything starts.

use base64::Engine;
use pm_tests::{on_both_backends, TestDb, TestService};

use crate::support::config;

fn key(byte: u8) -> String {
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

fn with_keys(
    db: &TestDb,
    master: Option<String>,
    previous: Option<String>,
) -> project_manager::Config {
    let mut c = config(db);
    c.master_key = master;
    c.master_key_previous = previous;
    c
}

/// The start's refusal with these keys, as its message.
async fn refused(db: &TestDb, master: Option<String>, previous: Option<String>) -> String {
    project_manager::Application::build(&with_keys(db, master, previous))
        .await
        .err()
        .expect("the start is refused")
        .to_string()
}

async fn starts(db: &TestDb, master: Option<String>, previous: Option<String>) {
    TestService::start_with(with_keys(db, master, previous))
        .await
        .stop()
        .await;
}

async fn once_set_the_master_key_is_required_and_must_be_the_same(db: TestDb) {
    // No master key: the keys are not protected, and nothing is asked for.
    starts(&db, None, None).await;
    starts(&db, Some(key(1)), None).await;

    let missing = refused(&db, None, None).await;
    assert!(missing.contains("PM_MASTER_KEY is not set"), "{missing}");
    let wrong = refused(&db, Some(key(2)), None).await;
    assert!(wrong.contains("PM_MASTER_KEY does not open"), "{wrong}");
    starts(&db, Some(key(1)), None).await;
}

async fn a_rotation_moves_the_keys_to_the_new_master_key(db: TestDb) {
    starts(&db, Some(key(1)), None).await;
    // A wrong previous key does not rotate.
    let wrong = refused(&db, Some(key(2)), Some(key(3))).await;
    assert!(wrong.contains("PM_MASTER_KEY does not open"), "{wrong}");
    starts(&db, Some(key(2)), Some(key(1))).await;
    starts(&db, Some(key(2)), None).await;
    let old = refused(&db, Some(key(1)), None).await;
    assert!(old.contains("PM_MASTER_KEY does not open"), "{old}");
}

async fn a_malformed_master_key_is_refused_naming_its_setting(db: TestDb) {
    let short = refused(
        &db,
        Some(base64::engine::general_purpose::STANDARD.encode([1u8; 16])),
        None,
    )
    .await;
    assert!(short.contains("PM_MASTER_KEY must be 32 bytes"), "{short}");
    let not_base64 = refused(&db, Some("not base64 at all!".into()), None).await;
    assert!(
        not_base64.contains("PM_MASTER_KEY must be 32 bytes"),
        "{not_base64}"
    );
    let previous = refused(&db, Some(key(1)), Some("nope".into())).await;
    assert!(
        previous.contains("PM_MASTER_KEY_PREVIOUS must be 32 bytes"),
        "{previous}"
    );
}

on_both_backends!(
    once_set_the_master_key_is_required_and_must_be_the_same,
    a_rotation_moves_the_keys_to_the_new_master_key,
    a_malformed_master_key_is_refused_naming_its_setting,
);
