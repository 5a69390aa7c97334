//! A command fenced by a worker's claim (WORKERS.md "Fencing"): its facts are appended
//! only while the claim holds the turn, decided in the append's own transaction against
//! the turn's `turn_lease` deadline row — the row a lease expiry deletes when it fires, an
//! interrupt or a release disarms, and a heartbeat moves. The row is locked (PostgreSQL
//! `FOR UPDATE`; SQLite's `BEGIN IMMEDIATE` holds the one writer's lock from the start), so
//! a fenced command racing an expiry or an interrupt either commits first — the expiry
//! waits for it — or finds the row gone and writes nothing. A command that ends its turn
//! deletes the row with its facts: an interrupt that comes after finds the lease taken.

use chrono::{DateTime, Utc};
use pm_application::bus::{AppendFailure, Ending, Fence};
use pm_application::idempotency::IdempotencyKey;
use pm_application::log::LogPosition;
use pm_domain::saga::{FenceCheck, Fenced, TurnState};
use uuid::Uuid;

use super::NewEvent;
use crate::db::{Args, Tx};
use crate::sql::Sql;
use crate::Database;

/// The turn's kind, task, conversation, and what its fencing is decided on (`$1` turn).
const TURN: &str = "SELECT kind, task_id, conversation_id, \
     state, turn_epoch, claims FROM saga_turns WHERE id = $1";

/// The turn's lease row (`$1` turn), locked on PostgreSQL.
const LEASE: Sql = Sql {
    pg: "SELECT epoch, due_at FROM saga_deadlines \
         WHERE aggregate_type = 'turn' AND aggregate_id = $1 AND kind = 'turn_lease' FOR UPDATE",
    sqlite: "SELECT epoch, due_at FROM saga_deadlines \
             WHERE aggregate_type = 'turn' AND aggregate_id = $1 AND kind = 'turn_lease'",
};

/// Ends the lease with the facts of a command that ends its turn (`$1` turn).
const END_LEASE: &str = "DELETE FROM saga_deadlines \
     WHERE aggregate_type = 'turn' AND aggregate_id = $1 AND kind = 'turn_lease'";

/// Appends `rows` for the claim `fence` names, with `key`'s row; see the module docs.
///
/// # Errors
/// [`AppendFailure::Fenced`] (with why) or [`AppendFailure::TurnNotFound`], writing
/// nothing; the other failures as for any append.
pub(super) async fn append(
    db: &Database,
    rows: &[NewEvent],
    key: Option<&IdempotencyKey>,
    fence: &Fence,
) -> Result<Vec<LogPosition>, AppendFailure> {
    let classify = |e: sqlx::Error| super::failure_of(&e);
    let mut tx = db.begin().await.map_err(classify)?;
    let turn_id = fence.turn.turn_id;
    let ends = check(&mut tx, rows, fence).await?;
    let mut written = super::within::insert(&mut tx, rows)
        .await
        .map_err(classify)?;
    let last = written.iter().map(|(_, p)| p.0).max();
    if let (Some(key), Some(last)) = (key, last) {
        super::command::record_key(&mut tx, key, last).await?;
    }
    if ends {
        tx.execute(END_LEASE, Args::new().uuid(turn_id))
            .await
            .map_err(classify)?;
    }
    tx.commit().await.map_err(classify)?;
    written.sort_by_key(|(sequence, _)| *sequence);
    Ok(written.into_iter().map(|(_, p)| p).collect())
}

/// Whether the claim holds the turn; answers whether the command ends the turn.
async fn check(tx: &mut Tx, rows: &[NewEvent], fence: &Fence) -> Result<bool, AppendFailure> {
    let classify = |e: sqlx::Error| super::failure_of(&e);
    let turn_id = fence.turn.turn_id;
    let turn = tx
        .fetch_optional(TURN, Args::new().uuid(turn_id))
        .await
        .map_err(classify)?
        .ok_or(AppendFailure::TurnNotFound)?;
    let read = |e: sqlx::Error| AppendFailure::Other(e.to_string());
    let conversation: Uuid = turn.uuid("conversation_id").map_err(read)?;
    if let Some(other) = rows
        .iter()
        .filter_map(|r| r.conversation_id)
        .find(|c| *c != conversation)
    {
        return Err(AppendFailure::Fenced(format!(
            "turn {turn_id} belongs to conversation {conversation}, not {other}"
        )));
    }
    let lease = tx
        .fetch_optional(LEASE.of(tx.dialect()), Args::new().uuid(turn_id))
        .await
        .map_err(classify)?;
    let state = turn.string("state").map_err(read)?;
    let check = FenceCheck {
        state: TurnState::parse(&state)
            .ok_or_else(|| AppendFailure::Other(format!("turn {turn_id} in state {state}")))?,
        turn_epoch: turn.opt_int("turn_epoch").map_err(read)?,
        claims: u32::try_from(turn.int("claims").map_err(read)?).unwrap_or(u32::MAX),
        // The stored lease is the authority (its row goes with an expiry, a release, an
        // interrupt or a command that ended the turn, before the turn's row shows it).
        lease_epoch: lease
            .as_ref()
            .map(|l| l.int("epoch"))
            .transpose()
            .map_err(read)?,
    };
    let given = fence.turn.turn_epoch;
    check
        .check(given)
        .map_err(|why| AppendFailure::Fenced(format!("turn {turn_id}: {why}")))?;
    let due_at: DateTime<Utc> = match &lease {
        Some(lease) => lease.time("due_at").map_err(read)?,
        None => {
            return Err(AppendFailure::Fenced(
                Fenced::LeaseEnded { given }.to_string(),
            ))
        }
    };
    if due_at <= fence.now {
        return Err(AppendFailure::Fenced(format!(
            "the lease of epoch {given} expired at {}",
            pm_domain::time::format(&due_at)
        )));
    }
    let kind = turn.string("kind").map_err(read)?;
    let task = turn.opt_uuid("task_id").map_err(read)?;
    Ok(match fence.ends {
        Some(Ending::ConversationTurn) => kind == "conversation",
        Some(Ending::TaskTurn(task_id)) => kind == "task" && task == Some(task_id),
        None => false,
    })
}
