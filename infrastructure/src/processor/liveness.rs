//! Replicas' names and whether a replica is alive — the one place that writes down the
//! contract between processor ownership and the `Idempotency-Key` use case.
//!
//! A replica's id is `<process id>-<UUIDv7>` ([`new_replica_id`]). On PostgreSQL the
//! replica's processor-ownership connection ([`super::ownership`]) carries
//! [`application_name`] of that id from the start (the service claims its processors
//! before it listens) for as long as the process lives (it holds the processors' advisory
//! locks, and PostgreSQL closes it when the process dies), so "is replica R alive" is
//! "does a session of this database carry R's application name". A replica whose
//! connection was lost looks dead until its next ownership check reconnects (250 ms). On
//! SQLite every replica runs on one machine, so it is "does R's process id still run" —
//! and, when that id is this process's own, "did this process make R": a process that
//! restarted under the same id (the binary as PID 1 in a container) does not keep its
//! predecessor's replicas alive.

use pm_application::idempotency::ReplicaLiveness;
use pm_application::AppError;

use crate::db::Args;
use crate::processor::store::store_error;
use crate::sql::Dialect;
use crate::Database;

/// PostgreSQL keeps at most this many bytes of an `application_name`.
const APPLICATION_NAME_MAX: usize = 63;

/// The replica ids this process made (a process may run several replicas: the tests do).
static MADE_HERE: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<String>>> =
    std::sync::LazyLock::new(Default::default);

/// A new replica id: `<process id>-<UUIDv7>` (the process id lets SQLite tell whether it
/// runs; the UUID makes it unique across restarts and machines).
pub fn new_replica_id() -> String {
    let id = format!("{}-{}", std::process::id(), uuid::Uuid::now_v7());
    if let Ok(mut made) = MADE_HERE.lock() {
        made.insert(id.clone());
    }
    id
}

/// Whether `replica`'s process runs (SQLite's liveness): this process only for the ids it
/// made, another while `/proc` has it.
fn process_runs(replica: &str) -> bool {
    let Some(pid) = process_of(replica) else {
        return false;
    };
    if pid == std::process::id().to_string() {
        return MADE_HERE.lock().is_ok_and(|made| made.contains(replica));
    }
    std::path::Path::new("/proc").join(pid).exists()
}

/// The `application_name` the ownership connection of `replica` carries, and that
/// liveness looks for: the id itself, cut to what PostgreSQL keeps.
pub fn application_name(replica: &str) -> &str {
    let mut end = replica.len().min(APPLICATION_NAME_MAX);
    while !replica.is_char_boundary(end) {
        end -= 1;
    }
    &replica[..end]
}

/// The process id in a replica id, if it has one.
fn process_of(replica: &str) -> Option<&str> {
    replica
        .split_once('-')
        .map(|(pid, _)| pid)
        .filter(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// [`ReplicaLiveness`] over the database the replicas share.
#[derive(Debug, Clone)]
pub struct DbReplicaLiveness {
    db: Database,
}

impl DbReplicaLiveness {
    /// Liveness of the replicas of `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

impl ReplicaLiveness for DbReplicaLiveness {
    async fn is_alive(&self, replica: &str) -> Result<bool, AppError> {
        match self.db.dialect() {
            Dialect::Postgres => {
                let row = self
                    .db
                    .fetch_optional(
                        "SELECT count(*) AS n FROM pg_stat_activity \
                         WHERE application_name = $1 AND datname = current_database()",
                        Args::new().text(application_name(replica)),
                    )
                    .await
                    .map_err(store_error)?;
                let sessions = row
                    .map(|r| r.int("n"))
                    .transpose()
                    .map_err(store_error)?
                    .unwrap_or(0);
                Ok(sessions > 0)
            }
            Dialect::Sqlite => Ok(process_runs(replica)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_id_names_its_process_and_fits_an_application_name() {
        let id = new_replica_id();
        assert_eq!(
            process_of(&id),
            Some(std::process::id().to_string().as_str())
        );
        assert_eq!(application_name(&id), id, "kept whole by PostgreSQL");
    }

    #[test]
    fn a_long_name_is_cut_as_postgres_cuts_it() {
        let long = "7-".to_string() + &"é".repeat(40);
        assert!(application_name(&long).len() <= APPLICATION_NAME_MAX);
        assert!(long.starts_with(application_name(&long)));
    }

    #[test]
    fn an_id_without_a_process_names_none() {
        assert_eq!(process_of("replica"), None);
        assert_eq!(process_of("x-1"), None);
    }
}
