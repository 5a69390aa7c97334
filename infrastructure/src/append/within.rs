//! Appending rows inside a caller's transaction (a saga write), with a processor's cursor
//! moved from where the caller read it (compare-and-set) by the same statement on
//! PostgreSQL: readers cannot pass the rows until the caller commits, so the caller
//! appends last and commits at once.

use pm_application::log::LogPosition;

use super::{Appended, CursorMove, NewEvent};
use crate::db::{Args, SqlType, Tx};

/// The rows (as arrays: one prepared statement whatever their number) and the cursor's
/// move from `$12` to `$10` (`$9` the processor, `NULL` for none) in one PostgreSQL
/// statement; answers the last position and whether the cursor moved.
const PG_ROWS_AND_CURSOR: &str = "\
WITH ins AS (
  INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id)
  SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]::json[], $7::text[]::json[], $8::uuid[])
  RETURNING global_position
), moved AS (
  UPDATE processors SET cursor_seq = $10, updated_at = $11::timestamptz
  WHERE name = $9 AND cursor_seq = $12
  RETURNING 1
)
SELECT (SELECT max(global_position) FROM ins) AS last, (SELECT count(*) FROM moved) AS moved";

/// Appends `rows` in `tx` and moves `cursor` if it is still where it was read.
pub(super) async fn append(
    tx: &mut Tx,
    rows: &[NewEvent],
    cursor: Option<CursorMove<'_>>,
) -> Result<Appended, sqlx::Error> {
    if let Tx::Postgres(pg) = tx {
        if !rows.is_empty() {
            let (last, moved): (Option<i64>, i64) =
                super::bind_rows(sqlx::query_as(PG_ROWS_AND_CURSOR), rows.iter())
                    .bind(cursor.map(|c| c.processor))
                    .bind(cursor.map(|c| c.to.0))
                    .bind(pm_domain::time::format(&chrono::Utc::now()))
                    .bind(cursor.map(|c| c.from.0))
                    .fetch_one(&mut **pg)
                    .await?;
            return Ok(Appended {
                last: last.map(LogPosition),
                cursor_moved: cursor.is_none() || moved > 0,
            });
        }
    }
    let last = insert(tx, rows).await?.into_iter().map(|(_, p)| p).max();
    let cursor_moved = match cursor {
        Some(c) => {
            let args = Args::new()
                .text(c.processor)
                .int(c.to.0)
                .time(&chrono::Utc::now())
                .int(c.from.0);
            tx.execute(crate::processor::cursor::MOVE_CURSOR, args)
                .await?
                == 1
        }
        None => true,
    };
    Ok(Appended { last, cursor_moved })
}

/// Inserts `rows` in `tx` as multi-row statements (chunked); answers each row's sequence
/// and position. The SQLite path of every append, and PostgreSQL's without arrays.
pub(super) async fn insert(
    tx: &mut Tx,
    rows: &[NewEvent],
) -> Result<Vec<(i64, LogPosition)>, sqlx::Error> {
    let returned = tx
        .insert_all(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata, conversation_id)",
            &[
                SqlType::Text,
                SqlType::Text,
                SqlType::Int,
                SqlType::Text,
                SqlType::Text,
                SqlType::Json,
                SqlType::Json,
                SqlType::Uuid,
            ],
            "RETURNING sequence, global_position",
            rows,
            |args, r| {
                args.text(r.aggregate_type)
                    .text(r.aggregate_id.as_str())
                    .int(r.sequence)
                    .text(r.event_type.as_str())
                    .text(r.event_version.as_str())
                    .text(r.payload.as_str())
                    .text(r.metadata.as_str())
                    .opt_uuid(r.conversation_id)
            },
        )
        .await?;
    let mut written = Vec::with_capacity(returned.len());
    for row in &returned {
        written.push((
            row.int("sequence")?,
            LogPosition(row.int("global_position")?),
        ));
    }
    Ok(written)
}
