//! A processor's cursor inside its own transaction: [`lock`] (compare-and-set on the
//! stored cursor, under a row lock), [`advance`] and [`park`]; or in a transaction of its
//! own: [`park_and_advance`] (every processor parks an event the same way) and, for a
//! processor whose effects are outside the database, [`compare_and_set`].

use chrono::Utc;
use pm_application::log::{LogPosition, LoggedEvent};

use crate::db::{Args, Tx};
use crate::sql::Sql;
use crate::Database;

/// Why a processor row could not be locked at the expected cursor.
#[derive(Debug)]
pub enum CursorError {
    /// A statement failed.
    Sql(sqlx::Error),
    /// The stored cursor is not where the caller thought: another owner moved it.
    Moved,
}

impl From<sqlx::Error> for CursorError {
    fn from(e: sqlx::Error) -> Self {
        Self::Sql(e)
    }
}

/// For a processor whose cursor moves in a transaction of its own: another owner moved it,
/// or the statement failed (retried).
impl From<CursorError> for pm_application::processor::BatchError {
    fn from(e: CursorError) -> Self {
        match e {
            CursorError::Moved => Self::CursorMoved,
            CursorError::Sql(e) => Self::Transient(e.to_string()),
        }
    }
}

/// The processor's row (`$1` name), locked on PostgreSQL (SQLite's `BEGIN IMMEDIATE`
/// holds the one writer's lock already).
const SELECT_ROW: Sql = Sql {
    pg: "SELECT generation, cursor_seq FROM processors WHERE name = $1 FOR UPDATE",
    sqlite: "SELECT generation, cursor_seq FROM processors WHERE name = $1",
};

/// Locks the row of processor `name` (creating it at the start of the log when missing),
/// checks its cursor is `expected`, and returns the generation it writes.
///
/// # Errors
/// [`CursorError::Moved`] when the stored cursor differs, [`CursorError::Sql`] otherwise.
pub async fn lock(tx: &mut Tx, name: &str, expected: LogPosition) -> Result<i64, CursorError> {
    let select = SELECT_ROW.of(tx.dialect());
    let row = match tx.fetch_optional(select, Args::new().text(name)).await? {
        Some(row) => row,
        None => {
            tx.execute(
                "INSERT INTO processors (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
                Args::new().text(name),
            )
            .await?;
            tx.fetch_optional(select, Args::new().text(name))
                .await?
                .ok_or(sqlx::Error::RowNotFound)?
        }
    };
    let stored = LogPosition(row.int("cursor_seq")?);
    if stored != expected {
        return Err(CursorError::Moved);
    }
    Ok(row.int("generation")?)
}

/// Moves the cursor of processor `name` to `to`.
///
/// # Errors
/// The database's error.
pub async fn advance(tx: &mut Tx, name: &str, to: LogPosition) -> Result<(), sqlx::Error> {
    tx.execute(
        "UPDATE processors SET cursor_seq = $2, updated_at = $3 WHERE name = $1",
        Args::new().text(name).int(to.0).time(&Utc::now()),
    )
    .await?;
    Ok(())
}

/// Records that processor `name` parked `event` because of `reason`.
///
/// # Errors
/// The database's error.
pub async fn park(
    tx: &mut Tx,
    name: &str,
    event: &LoggedEvent,
    reason: &str,
) -> Result<(), sqlx::Error> {
    tx.execute(
        "INSERT INTO parked_events (processor, position_txid, position_seq, aggregate_type, aggregate_id, event_type, error, parked_at) \
         VALUES ($1, 0, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        Args::new()
            .text(name)
            .int(event.position.0)
            .text(event.aggregate_type.as_str())
            .text(event.aggregate_id.as_str())
            .text(event.event_type.as_str())
            .text(reason)
            .time(&Utc::now()),
    )
    .await?;
    Ok(())
}

/// Parks `event` for processor `name` and moves its cursor past it, in a transaction of
/// its own, if the cursor is still at `from`; answers the event's position.
///
/// # Errors
/// [`CursorError::Moved`] when the stored cursor is not `from`, [`CursorError::Sql`]
/// otherwise.
pub async fn park_and_advance(
    db: &Database,
    name: &str,
    from: LogPosition,
    event: &LoggedEvent,
    reason: &str,
) -> Result<LogPosition, CursorError> {
    let mut tx = db.begin().await?;
    lock(&mut tx, name, from).await?;
    park(&mut tx, name, event, reason).await?;
    advance(&mut tx, name, event.position).await?;
    tx.commit().await?;
    Ok(event.position)
}

/// The compare-and-set of a cursor: processor `$1` moves to `$2` (at time `$3`) only from
/// `$4`. Shared with the appends that move a cursor in the statement of their rows.
pub(crate) const MOVE_CURSOR: &str = "UPDATE processors SET cursor_seq = $2, \
    updated_at = $3 WHERE name = $1 AND cursor_seq = $4";

/// Moves the cursor of processor `name` from `from` to `to` in one statement of its own —
/// for a processor that writes nothing else to the database with it (the relay): one
/// round trip instead of a transaction's four. A row that is missing is created by
/// [`lock`]'s path.
///
/// # Errors
/// [`CursorError::Moved`] when the stored cursor is not `from`, [`CursorError::Sql`]
/// otherwise.
pub async fn compare_and_set(
    db: &Database,
    name: &str,
    from: LogPosition,
    to: LogPosition,
) -> Result<(), CursorError> {
    let moved = db
        .execute(
            MOVE_CURSOR,
            Args::new()
                .text(name)
                .int(to.0)
                .time(&Utc::now())
                .int(from.0),
        )
        .await?;
    if moved == 1 {
        return Ok(());
    }
    let mut tx = db.begin().await?;
    lock(&mut tx, name, from).await?;
    advance(&mut tx, name, to).await?;
    tx.commit().await?;
    Ok(())
}
