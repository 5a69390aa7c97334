//! The rebuild's side of the poison isolation ([`pm_application::processor::isolate`]):
//! runs of facts applied through the batch path inside the caller's transaction, each
//! under a savepoint, so a rejected run is undone without losing the transaction (the
//! rebuild's page, or its swap that holds the processor row). A culprit is skipped and
//! counted (the live projection has parked it in `parked_events` already).

use pm_application::log::LoggedEvent;
use pm_application::processor::isolate::{apply_isolating, Failure, Isolation};

use super::batch::apply_batch;
use super::error::ApplyError;
use crate::db::{Args, Tx};

/// Events per multi-row batch (as the live projection's batches: a few hundred rows per
/// statement stay far below PostgreSQL's bind-parameter limit).
const CHUNK: usize = 500;

/// What [`apply_skipping`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Applied {
    /// Events applied.
    pub(super) events: u64,
    /// Events skipped because they cannot be applied.
    pub(super) skipped: u64,
}

/// Applies `events` to generation `g` in `tx`, skipping (and logging) those that cannot be
/// applied; nothing is committed.
///
/// # Errors
/// A transient failure (the transaction is then of no use: roll it back).
pub(super) async fn apply_skipping(
    tx: &mut Tx,
    g: i64,
    events: &[LoggedEvent],
) -> Result<Applied, ApplyError> {
    let mut target = InTx {
        tx,
        g,
        applied: Applied::default(),
    };
    apply_isolating(&mut target, events).await?;
    Ok(target.applied)
}

struct InTx<'t> {
    tx: &'t mut Tx,
    g: i64,
    applied: Applied,
}

impl InTx<'_> {
    async fn run(&mut self, sql: &str) -> Result<(), Failure<ApplyError>> {
        self.tx
            .execute(sql, Args::new())
            .await
            .map(|_| ())
            .map_err(|e| Failure::Stop(ApplyError::Sql(e)))
    }
}

impl Isolation for InTx<'_> {
    type Error = ApplyError;

    async fn apply(&mut self, events: &[LoggedEvent]) -> Result<(), Failure<ApplyError>> {
        self.run("SAVEPOINT rm_run").await?;
        let mut applied = Ok(());
        for chunk in events.chunks(CHUNK) {
            applied = apply_batch(self.tx, self.g, chunk).await;
            if applied.is_err() {
                break;
            }
        }
        match applied {
            Ok(()) => {
                self.run("RELEASE SAVEPOINT rm_run").await?;
                self.applied.events += events.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.run("ROLLBACK TO SAVEPOINT rm_run").await?;
                self.run("RELEASE SAVEPOINT rm_run").await?;
                Err(e.into_failure())
            }
        }
    }

    async fn set_aside(&mut self, event: &LoggedEvent, reason: &str) -> Result<(), ApplyError> {
        tracing::warn!(position = %event.position, %reason, "rebuild skips an event it cannot apply");
        self.applied.skipped += 1;
        Ok(())
    }
}
