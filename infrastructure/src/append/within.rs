//! Appending rows inside a caller's transaction (a saga write), with a processor's cursor
//! moved by the same statement on PostgreSQL: the log's order lock is held from this
//! statement to the caller's commit, so the caller appends last and commits at once.

use pm_application::log::LogPosition;

use super::NewEvent;
use crate::db::{Args, Tx};
use crate::processor::cursor;

/// Rows per multi-row statement on SQLite (well below its parameter limit).
const CHUNK: usize = 500;

/// The rows (as arrays: one prepared statement whatever their number) and the cursor's
/// move (`$9` the processor, `NULL` for none) in one PostgreSQL statement.
const PG_ROWS_AND_CURSOR: &str = "\
WITH ins AS (
  INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, conversation_id)
  SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]::json[], $7::text[]::json[], $8::uuid[])
  RETURNING global_position
), moved AS (
  UPDATE processors SET cursor_seq = $10, updated_at = $11::timestamptz WHERE name = $9
)
SELECT max(global_position) AS last FROM ins";

/// Appends `rows` in `tx` and moves `cursor`; answers the last row's position.
pub(super) async fn append(
    tx: &mut Tx,
    rows: &[NewEvent],
    cursor: Option<(&str, LogPosition)>,
) -> Result<Option<LogPosition>, sqlx::Error> {
    if let Tx::Postgres(pg) = tx {
        if !rows.is_empty() {
            let column = |f: fn(&NewEvent) -> &str| rows.iter().map(f).collect::<Vec<_>>();
            let last: Option<i64> = sqlx::query_scalar(PG_ROWS_AND_CURSOR)
                .bind(column(|r| r.aggregate_type))
                .bind(column(|r| &r.aggregate_id))
                .bind(rows.iter().map(|r| r.sequence).collect::<Vec<_>>())
                .bind(column(|r| &r.event_type))
                .bind(column(|r| &r.event_version))
                .bind(column(|r| &r.payload))
                .bind(column(|r| &r.metadata))
                .bind(rows.iter().map(|r| r.conversation_id).collect::<Vec<_>>())
                .bind(cursor.map(|(name, _)| name))
                .bind(cursor.map(|(_, to)| to.0))
                .bind(pm_domain::time::format(&chrono::Utc::now()))
                .fetch_one(&mut **pg)
                .await?;
            return Ok(last.map(LogPosition));
        }
    }
    let mut last = None;
    for chunk in rows.chunks(CHUNK) {
        let args = chunk
            .iter()
            .fold(Args::with_capacity(chunk.len() * 8), |args, r| {
                args.text(r.aggregate_type)
                    .text(r.aggregate_id.as_str())
                    .int(r.sequence)
                    .text(r.event_type.as_str())
                    .text(r.event_version.as_str())
                    .text(r.payload.as_str())
                    .text(r.metadata.as_str())
                    .opt_uuid(r.conversation_id)
            });
        let returned = tx
            .insert_rows(
                "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
                 event_version, payload, metadata, conversation_id)",
                &["", "", "", "", "", "::json", "::json", "::uuid"],
                chunk.len(),
                args,
                "RETURNING global_position",
            )
            .await?;
        for row in &returned {
            last = last.max(Some(LogPosition(row.int("global_position")?)));
        }
    }
    if let Some((name, to)) = cursor {
        cursor::advance(tx, name, to).await?;
    }
    Ok(last)
}
