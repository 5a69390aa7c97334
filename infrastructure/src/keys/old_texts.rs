//! The texts of a log written before they were sealed (issue 33, item 4): sealed in place,
//! once — the one rewrite of the log the service ever makes. Without it a database made by
//! an earlier version could never forget what it already held.
//!
//! The first start of a sealing version records the newest position (`pm_log_sealing.up_to`):
//! everything after it is written sealed. A pass then seals the personal fields of the
//! events up to it, a batch per transaction, moving `sealed_through` with each batch
//! (compare-and-set, so two replicas never seal one batch twice; the one that loses stops).
//! It runs beside the service: a reader opens a text in the clear and a sealed one alike,
//! so nothing waits for it, and a pass cut off (a crash, a restart) goes on from where it
//! stood. An event that cannot be sealed (an older text with no conversation to seal it
//! under) is left as it is and logged.
//!
//! A replica of an earlier version still appending after the pass has passed its position
//! writes in the clear: upgrade every replica before the first one starts again (README).

use chrono::Utc;
use pm_domain::personal::PERSONAL;

use super::sealing::Place;
use super::KeyStore;
use crate::db::{Arg, Args};
use crate::sql::Dialect;
use crate::Database;

/// Events sealed per transaction.
const BATCH: i64 = 256;

/// What a pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sealed {
    /// Events whose texts it sealed.
    pub events: u64,
    /// Events it had to leave in the clear.
    pub left: u64,
    /// Whether the log is now sealed through the position it had when sealing began.
    pub done: bool,
}

/// Seals the clear texts of `db`'s log written before sealing began, with `keys`.
///
/// # Errors
/// The store's error; the pass can be run again and goes on from where it stood.
pub async fn seal_old_texts(db: &Database, keys: &KeyStore) -> Result<Sealed, sqlx::Error> {
    let mut sealed = Sealed::default();
    while seal_next_batch(db, keys, &mut sealed).await? {}
    Ok(sealed)
}

/// One step of the pass: seals the next batch (recording the pass first, on its first
/// step), adding what it did to `sealed`; `true` while there is more to seal here — `false`
/// once the pass is done or another replica moved it on (that replica carries it).
///
/// # Errors
/// The store's error; nothing of the batch is written then.
pub async fn seal_next_batch(
    db: &Database,
    keys: &KeyStore,
    sealed: &mut Sealed,
) -> Result<bool, sqlx::Error> {
    db.execute(
        // `WHERE true`: SQLite reads `ON CONFLICT` after a bare `FROM` as a join's `ON`.
        "INSERT INTO pm_log_sealing (id, up_to, sealed_through, started_at) \
         SELECT 1, COALESCE(max(global_position), 0), 0, $1 FROM events WHERE true \
         ON CONFLICT (id) DO NOTHING",
        Args::new().time(&Utc::now()),
    )
    .await?;
    let row = db
        .fetch_optional(
            "SELECT up_to, sealed_through FROM pm_log_sealing WHERE id = 1",
            Args::new(),
        )
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    let (up_to, from) = (row.int("up_to")?, row.int("sealed_through")?);
    if from >= up_to {
        sealed.done = true;
        return Ok(false);
    }
    seal_batch(db, keys, from, up_to, sealed).await
}

/// Seals the next batch after `from` (up to `up_to`); `false` when another replica sealed
/// it first (nothing of this batch is written then).
async fn seal_batch(
    db: &Database,
    keys: &KeyStore,
    from: i64,
    up_to: i64,
    sealed: &mut Sealed,
) -> Result<bool, sqlx::Error> {
    let mut args = Args::new().int(from).int(up_to);
    let types = PERSONAL
        .iter()
        .map(|(name, _)| args.push(Arg::Text(Some((*name).to_string()))))
        .collect::<Vec<_>>()
        .join(", ");
    let limit = args.push(Arg::Int(Some(BATCH)));
    let rows = db
        .fetch_all(
            &format!(
                "SELECT global_position, aggregate_type, aggregate_id, sequence, event_type, \
                 payload, conversation_id FROM events \
                 WHERE global_position > $1 AND global_position <= $2 \
                 AND event_type IN ({types}) ORDER BY global_position LIMIT {limit}"
            ),
            args,
        )
        .await?;
    let through = match rows.last() {
        Some(last) if rows.len() as i64 == BATCH => last.int("global_position")?,
        _ => up_to,
    };
    let mut rewritten = Vec::new();
    for row in &rows {
        let position = row.int("global_position")?;
        let aggregate_type = row.str("aggregate_type")?;
        let place = Place {
            event_type: row.str("event_type")?,
            aggregate_type,
            aggregate_id: row.str("aggregate_id")?,
            sequence: row.int("sequence")?,
            conversation_id: row.opt_uuid("conversation_id")?,
        };
        let mut payload = row.string("payload")?;
        match keys.seal_text(&place, &mut payload).await {
            Ok(true) => rewritten.push((position, payload)),
            Ok(false) => {}
            Err(e) => {
                sealed.left += 1;
                tracing::warn!(position, error = %e, "an older event's texts stay in the clear");
            }
        }
    }
    let mut tx = db.begin().await?;
    let moved = tx
        .execute(
            "UPDATE pm_log_sealing SET sealed_through = $1, \
             finished_at = CASE WHEN $1 >= up_to THEN $3 END \
             WHERE id = 1 AND sealed_through = $2",
            Args::new().int(through).int(from).time(&Utc::now()),
        )
        .await?;
    if moved == 0 {
        return Ok(false);
    }
    let update = match db.dialect() {
        Dialect::Postgres => {
            "UPDATE events SET payload = CAST($1 AS json) WHERE global_position = $2"
        }
        Dialect::Sqlite => "UPDATE events SET payload = $1 WHERE global_position = $2",
    };
    for (position, payload) in &rewritten {
        tx.execute(update, Args::new().text(payload.as_str()).int(*position))
            .await?;
    }
    tx.commit().await?;
    sealed.events += rewritten.len() as u64;
    Ok(true)
}
