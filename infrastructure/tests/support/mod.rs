//! What every adapter test starts from: a migrated database of its [`TestDb`], and a
//! processor's row as the runner claims it before applying anything.
// Each test binary uses what it needs of this module.
#![allow(dead_code)]

use std::time::Duration;

use pm_infrastructure::db::Args;
use pm_infrastructure::Database;
use pm_test_db::TestDb;

/// `db` connected (at most `pool` connections) and migrated.
pub async fn migrated(db: &TestDb, pool: u32) -> Database {
    let database = Database::connect(&db.url, pool, Duration::from_secs(5))
        .await
        .expect("connect");
    database.migrate().await.expect("migrate");
    database
}

/// The row of processor `name`, at the start of the log.
pub async fn processor_row(database: &Database, name: &str) {
    database
        .execute(
            "INSERT INTO processors (name) VALUES ($1)",
            Args::new().text(name),
        )
        .await
        .expect("the processor's row");
}

/// The keys of personal data of `database` (no master key).
pub async fn keys(database: &Database) -> std::sync::Arc<pm_infrastructure::keys::KeyStore> {
    std::sync::Arc::new(
        pm_infrastructure::keys::KeyStore::open(database, None, None, 1024)
            .await
            .expect("the keys"),
    )
}
