//! What the saga engine reads: a conversation's version and runes, actors' kinds, agents'
//! conversations, due deadlines and the sessions to recover.

use chrono::{DateTime, Utc};
use pm_application::log::LogPosition;
use pm_application::sagas::{StoredConversation, StoredRune, StoredSnapshot, SAGA_ROLE};
use pm_application::AppError;
use pm_domain::saga::{Deadline, Recorded};
use pm_domain::types::ActorKind;
use uuid::Uuid;

use super::table::decode;
use super::tables::{ArmedDeadline, DEADLINES};
use std::borrow::Cow;

use crate::db::{Args, DbRow};
use crate::keys::sealing::{self, Place, Unreadable};
use crate::keys::KeyStore;
use crate::log::open_error;
use crate::processor::store::store_error;
use crate::Database;

/// The aggregate types of the saga instances, as an SQL list: a conversation's runes are
/// every event of these types, so a machine missing here would be rebuilt without its
/// runes.
pub(crate) const SAGA_TYPES: &str = "('session', 'agent', 'turn', 'plan', 'tool_call')";

fn corrupt(what: &str, e: impl std::fmt::Display) -> AppError {
    AppError::Internal(format!("a stored {what} does not read back: {e}"))
}

/// The version of `conversation_id`, its snapshot of format `snapshot` (if asked for and
/// stored) and its runes after the snapshot, in log order. Read in that order: a writer
/// that commits between the reads makes the state newer than the version, and the next
/// commit on it a conflict (reloaded) — never the reverse.
pub async fn conversation(
    db: &Database,
    keys: &KeyStore,
    conversation_id: Uuid,
    snapshot: Option<i32>,
) -> Result<StoredConversation, AppError> {
    // One statement for both: the version and the snapshot at one database snapshot.
    let row = db
        .fetch_optional(
            "SELECT (SELECT version FROM saga_conversations \
             WHERE conversation_id = $1) AS version, s.position, s.format, s.state \
             FROM (SELECT 1 AS one) AS one LEFT JOIN saga_snapshots s \
             ON s.conversation_id = $1 AND s.format = $2",
            Args::new()
                .uuid(conversation_id)
                .opt_int(snapshot.map(i64::from)),
        )
        .await
        .map_err(store_error)?
        .ok_or_else(|| corrupt("conversation version", "no row"))?;
    let version = row.opt_int("version").map_err(store_error)?.unwrap_or(0);
    let snapshot = match row.opt_int("format").map_err(store_error)? {
        Some(_) => Some(stored_snapshot(&row)?),
        None => None,
    };
    let after = snapshot.as_ref().map_or(0, |s| s.position.0);
    // Without ORDER BY: the rows are sorted here by position, after the read — sorting
    // tens of thousands of payloads in the database spills to disk. Of the metadata only
    // the causation of the sagas' own runes is read: a control's or a report's is its
    // client's `X-Causation-Id`, which must never pass for a fact's position.
    let sql = format!(
        "SELECT global_position, aggregate_type, aggregate_id, sequence, event_type, \
         payload, \
         CASE WHEN metadata->>'role' = '{SAGA_ROLE}' \
         THEN CAST(metadata->>'causation_id' AS TEXT) END AS causation \
         FROM events \
         WHERE conversation_id = $1 AND global_position > $2 \
         AND aggregate_type IN {SAGA_TYPES}"
    );
    let rows = db
        .fetch_all(&sql, Args::new().uuid(conversation_id).int(after))
        .await
        .map_err(store_error)?;
    let mut runes = Vec::with_capacity(rows.len());
    for row in &rows {
        runes.push(rune(keys, row, conversation_id).await?);
    }
    runes.sort_unstable_by_key(|r| r.position);
    Ok(StoredConversation {
        version,
        snapshot,
        runes,
    })
}

/// The stored version of `conversation_id` (0 without a row).
pub async fn version(db: &Database, conversation_id: Uuid) -> Result<i64, AppError> {
    db.fetch_optional(
        "SELECT version FROM saga_conversations WHERE conversation_id = $1",
        Args::new().uuid(conversation_id),
    )
    .await
    .map_err(store_error)?
    .map_or(Ok(0), |row| row.int("version"))
    .map_err(store_error)
}

fn stored_snapshot(row: &DbRow) -> Result<StoredSnapshot, AppError> {
    let format = row.int("format").map_err(store_error)?;
    Ok(StoredSnapshot {
        position: LogPosition(row.int("position").map_err(store_error)?),
        format: i32::try_from(format).map_err(|e| corrupt("snapshot format", e))?,
        state: row.bytes("state").map_err(store_error)?.to_vec(),
    })
}

/// Stores `snapshot` as `conversation_id`'s unless one of the same format and a later
/// position is stored (snapshots are written by tasks that may finish out of order).
pub async fn save_snapshot(
    db: &Database,
    conversation_id: Uuid,
    snapshot: StoredSnapshot,
    now: DateTime<Utc>,
) -> Result<(), AppError> {
    db.execute(
        "INSERT INTO saga_snapshots (conversation_id, position, format, state, written_at) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (conversation_id) DO UPDATE SET position = excluded.position, \
         format = excluded.format, state = excluded.state, written_at = excluded.written_at \
         WHERE saga_snapshots.format <> excluded.format \
         OR saga_snapshots.position < excluded.position",
        Args::new()
            .uuid(conversation_id)
            .int(snapshot.position.0)
            .int(i64::from(snapshot.format))
            .bytes(snapshot.state)
            .time(&now),
    )
    .await
    .map_err(store_error)?;
    Ok(())
}

/// A stored rune, its sealed texts opened for the machines' state (a forgotten one holds a
/// stand-in).
async fn rune(keys: &KeyStore, row: &DbRow, conversation_id: Uuid) -> Result<StoredRune, AppError> {
    let aggregate_type = row.str("aggregate_type").map_err(store_error)?;
    let aggregate_id = row.str("aggregate_id").map_err(store_error)?;
    let id: Uuid = aggregate_id.parse().map_err(|e| corrupt("rune id", e))?;
    let event_type = row.str("event_type").map_err(store_error)?;
    let sequence = row.int("sequence").map_err(store_error)?;
    let mut payload = Cow::Borrowed(row.str("payload").map_err(store_error)?);
    if sealing::may_be_sealed(event_type, &payload) {
        let place = Place {
            event_type,
            aggregate_type,
            aggregate_id,
            sequence,
            conversation_id: Some(conversation_id),
        };
        let opened = keys
            .open_text(&place, &payload, Unreadable::StandIn)
            .await
            .map_err(open_error)?;
        if let Some(text) = opened {
            payload = Cow::Owned(text);
        }
    }
    let recorded = Recorded::from_stored(aggregate_type, id, event_type, &payload)
        .map_err(|e| corrupt("rune", e))?;
    // The sagas' runes caused by a fact name its log position as their causation.
    let cause = row
        .opt_str("causation")
        .map_err(store_error)?
        .and_then(|c| c.parse::<i64>().ok());
    Ok(StoredRune {
        recorded,
        sequence,
        cause,
        position: LogPosition(row.int("global_position").map_err(store_error)?),
    })
}

/// The kind of a registered actor (from its `actor.registered` fact).
pub async fn actor_kind(db: &Database, actor_id: Uuid) -> Result<Option<ActorKind>, AppError> {
    let row = db
        .fetch_optional(
            "SELECT payload FROM events \
             WHERE aggregate_type = 'actor' AND aggregate_id = $1 AND sequence = 1",
            Args::new().text(actor_id.to_string()),
        )
        .await
        .map_err(store_error)?;
    let Some(row) = row else { return Ok(None) };
    // The kind alone: the rest of the fact (its sealed name) is not needed.
    #[derive(serde::Deserialize)]
    struct Kind {
        kind: ActorKind,
    }
    let fact: Kind = serde_json::from_str(&row.string("payload").map_err(store_error)?)
        .map_err(|e| corrupt("actor", e))?;
    Ok(Some(fact.kind))
}

/// The conversation of an agent.
pub async fn agent_conversation(db: &Database, agent_id: Uuid) -> Result<Option<Uuid>, AppError> {
    let row = db
        .fetch_optional(
            "SELECT conversation_id FROM saga_agents WHERE id = $1",
            Args::new().uuid(agent_id),
        )
        .await
        .map_err(store_error)?;
    row.map(|r| r.uuid("conversation_id"))
        .transpose()
        .map_err(store_error)
}

/// A deadline row as its conversation and the deadline.
fn deadline(row: &DbRow) -> Result<(Uuid, Deadline), AppError> {
    let armed: ArmedDeadline = decode(row).map_err(|e| corrupt("deadline", e))?;
    Ok((armed.conversation_id, armed.deadline))
}

/// Deadlines due at `now`, oldest first.
pub async fn due(
    db: &Database,
    now: DateTime<Utc>,
    limit: u32,
) -> Result<Vec<(Uuid, Deadline)>, AppError> {
    let sql = format!(
        "SELECT {} FROM saga_deadlines WHERE due_at <= $1 ORDER BY due_at, aggregate_id LIMIT $2",
        DEADLINES.select_list(),
    );
    let rows = db
        .fetch_all(&sql, Args::new().time(&now).int(i64::from(limit)))
        .await
        .map_err(store_error)?;
    rows.iter().map(deadline).collect()
}

/// Open sessions that wait for the user or have a deadline due at `now`, each with all
/// its deadlines.
pub async fn recovering(
    db: &Database,
    now: DateTime<Utc>,
) -> Result<Vec<(Uuid, Vec<Deadline>)>, AppError> {
    let open = "s.state NOT IN ('closed', 'archived')";
    let sessions = db
        .fetch_all(
            &format!(
                "SELECT s.conversation_id FROM saga_sessions s \
                 WHERE {open} AND (s.conversation_state = 'waiting_user' OR EXISTS \
                 (SELECT 1 FROM saga_deadlines d WHERE d.conversation_id = s.conversation_id \
                  AND d.due_at <= $1)) ORDER BY s.created_at, s.conversation_id"
            ),
            Args::new().time(&now),
        )
        .await
        .map_err(store_error)?;
    let mut found: Vec<(Uuid, Vec<Deadline>)> = sessions
        .iter()
        .map(|r| r.uuid("conversation_id").map(|c| (c, Vec::new())))
        .collect::<Result<_, _>>()
        .map_err(store_error)?;
    if found.is_empty() {
        return Ok(found);
    }
    let rows = db
        .fetch_all(
            &format!(
                "SELECT {} FROM saga_deadlines WHERE conversation_id IN \
                 (SELECT s.conversation_id FROM saga_sessions s WHERE {open})",
                DEADLINES.select_list(),
            ),
            Args::new(),
        )
        .await
        .map_err(store_error)?;
    let index: std::collections::HashMap<Uuid, usize> = found
        .iter()
        .enumerate()
        .map(|(i, (c, _))| (*c, i))
        .collect();
    for row in &rows {
        let (conversation, deadline) = deadline(row)?;
        if let Some(i) = index.get(&conversation) {
            found[*i].1.push(deadline);
        }
    }
    Ok(found)
}
