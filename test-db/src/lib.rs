//! # pm-test-db — a fresh database per test, on either store
//!
//! A SQLite file in a fresh directory, or a fresh PostgreSQL database on the server of
//! `PM_TEST_PG_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`), dropped when
//! the test ends. Without a reachable server a PostgreSQL test skips with a loud message,
//! unless `CI=true`, where it fails. Shared by the adapters' tests (`infrastructure/tests`)
//! and the black-box suites (`pm-tests`), which need nothing else from each other.

use std::path::PathBuf;

use sqlx::{Connection, Executor, PgConnection};

/// A database for one test: a SQLite file in a fresh directory, or a fresh PostgreSQL
/// database (dropped when the value is dropped).
#[derive(Debug)]
pub struct TestDb {
    /// The `DATABASE_URL`.
    pub url: String,
    /// `sqlite` or `postgres`.
    pub kind: &'static str,
    pg: Option<(String, String)>,
    dir: Option<PathBuf>,
}

/// The URL of the shared PostgreSQL server's `postgres` database (`PM_TEST_PG_URL`).
pub fn pg_admin_url() -> String {
    std::env::var("PM_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Whether the tests run under `CI=true` (where a missing server fails a test instead of
/// skipping it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

impl TestDb {
    /// The PostgreSQL database's name (`None` for SQLite).
    pub fn pg_name(&self) -> Option<&str> {
        self.pg.as_ref().map(|(_, name)| name.as_str())
    }

    /// A fresh SQLite database file.
    pub async fn sqlite() -> Option<Self> {
        let dir = std::env::temp_dir().join(format!("pm-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Some(Self {
            url: format!("sqlite://{}", dir.join("pm.db").display()),
            kind: "sqlite",
            pg: None,
            dir: Some(dir),
        })
    }

    /// A fresh PostgreSQL database, or `None` (with a loud message) when no server is
    /// reachable outside CI.
    ///
    /// # Panics
    /// Under `CI=true` when PostgreSQL is unreachable.
    pub async fn postgres() -> Option<Self> {
        let admin = pg_admin_url();
        let mut conn = match PgConnection::connect(&admin).await {
            Ok(conn) => conn,
            Err(e) => {
                if in_ci() {
                    panic!("PostgreSQL at {admin} is unreachable under CI=true: {e}");
                }
                eprintln!(
                    "\n!!!!! SKIPPING a PostgreSQL test: {admin} is unreachable ({e}) !!!!!\n"
                );
                return None;
            }
        };
        let name = format!("pm_test_{}", uuid::Uuid::new_v4().simple());
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .expect("create test database");
        let base = admin
            .rsplit_once('/')
            .map_or(admin.as_str(), |(b, _)| b)
            .to_string();
        Some(Self {
            url: format!("{base}/{name}"),
            kind: "postgres",
            pg: Some((admin, name)),
            dir: None,
        })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some((admin, name)) = self.pg.take() {
            // Drop needs async; run it on a runtime of its own on another thread.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                if let Ok(rt) = rt {
                    rt.block_on(async {
                        if let Ok(mut conn) = PgConnection::connect(&admin).await {
                            let _ = conn
                                .execute(
                                    format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str(),
                                )
                                .await;
                        }
                    });
                }
            })
            .join();
        }
    }
}

/// Generates one `#[tokio::test]` per backend for each named `async fn(TestDb)`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(db) = $crate::TestDb::sqlite().await {
                        super::$name(db).await;
                    }
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(db) = $crate::TestDb::postgres().await {
                        super::$name(db).await;
                    }
                }
            )*
        }
    };
}
