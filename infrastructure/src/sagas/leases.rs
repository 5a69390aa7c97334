//! Workers' leases in the saga tables (WORKERS.md): a claim's lease is the turn's
//! `turn_lease` deadline row — armed by `turn.claimed`, moved by heartbeats (no rune),
//! deleted by the expiry that fires it, by a release, an interrupt or the turn's end, and
//! by a fenced command that ends the turn. The saga read row `saga_turns` carries the
//! claim for reads, and what a claimant looks for.

use chrono::{DateTime, Utc};
use pm_application::log::LogPosition;
use pm_application::sagas::{ClaimFilter, ClaimableTurn, CommitError};
use pm_application::AppError;
use pm_domain::saga::{LeaseHeld, CLAIMABLE_STATES, LEASED_STATE};
use std::sync::LazyLock;
use uuid::Uuid;

use crate::db::{Arg, Args, Tx};
use crate::owners::scope_clause;
use crate::processor::store::store_error;
use crate::sql::Sql;
use crate::Database;

/// The conversation of a turn.
pub async fn turn_conversation(db: &Database, turn_id: Uuid) -> Result<Option<Uuid>, AppError> {
    let row = db
        .fetch_optional(
            "SELECT conversation_id FROM saga_turns WHERE id = $1",
            Args::new().uuid(turn_id),
        )
        .await
        .map_err(store_error)?;
    row.map(|r| r.uuid("conversation_id"))
        .transpose()
        .map_err(store_error)
}

/// The last position logged in the conversation of turn `turn_id` (0 when it has none).
pub async fn turn_logged_through(
    db: &Database,
    turn_id: Uuid,
) -> Result<Option<LogPosition>, AppError> {
    let row = db
        .fetch_optional(
            "SELECT COALESCE((SELECT max(e.global_position) FROM events e \
             WHERE e.conversation_id = t.conversation_id), 0) AS through \
             FROM saga_turns t WHERE t.id = $1",
            Args::new().uuid(turn_id),
        )
        .await
        .map_err(store_error)?;
    row.map(|r| r.int("through").map(LogPosition))
        .transpose()
        .map_err(store_error)
}

/// WORKERS.md's claimable on a row of `saga_turns` (its columns prefixed with `alias`),
/// rendered from the domain's rule ([`CLAIMABLE_STATES`], [`LEASED_STATE`]): each
/// claimable state, the leased one only with no lease. It is the predicate of the partial
/// index `saga_turns_claimable` word for word (a test holds the shipped migrations to it),
/// so that PostgreSQL can prove the claim's query implies the index's predicate and use it.
pub fn claimable_predicate(alias: &str) -> String {
    CLAIMABLE_STATES
        .iter()
        .map(|state| {
            let is = format!("{alias}state = '{}'", state.as_str());
            if *state == LEASED_STATE {
                format!("({is} AND {alias}lease_worker IS NULL)")
            } else {
                is
            }
        })
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// The claim's query up to its filters, rendered once.
static CLAIMABLE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT t.id, t.conversation_id, v.version FROM saga_turns t \
         JOIN saga_sessions s ON s.conversation_id = t.conversation_id \
         JOIN saga_conversations v ON v.conversation_id = t.conversation_id \
         WHERE ({}) AND s.state = 'active'",
        claimable_predicate("t.")
    )
});

/// Claimable turns (dispatched, or streaming with no claim; the session active), oldest
/// first, with their conversations' versions (read in the same statement).
pub async fn claimable(
    db: &Database,
    filter: &ClaimFilter,
    limit: u32,
) -> Result<Vec<ClaimableTurn>, AppError> {
    let mut sql = CLAIMABLE.clone();
    let mut args = Args::new();
    let id = |id: Option<Uuid>| id.map(|id| Arg::Uuid(Some(id)));
    for (column, value) in [
        ("t.agent_id", id(filter.agent_id)),
        ("t.conversation_id", id(filter.conversation_id)),
        (
            "t.kind",
            filter.kind.map(|k| Arg::Text(Some(k.as_str().into()))),
        ),
    ] {
        if let Some(value) = value {
            let p = args.push(value);
            sql.push_str(&format!(" AND {column} = {p}"));
        }
    }
    if let Some(actor) = filter.actor_id {
        let p = args.push(Arg::Uuid(Some(actor)));
        sql.push_str(&format!(
            " AND t.agent_id IN (SELECT id FROM saga_agents WHERE actor_id = {p})"
        ));
    }
    sql.push_str(&scope_clause(&mut args, "t.conversation_id", &filter.scope));
    let p = args.push(Arg::Int(Some(i64::from(limit))));
    sql.push_str(&format!(" ORDER BY t.created_at, t.id LIMIT {p}"));
    let rows = db.fetch_all(&sql, args).await.map_err(store_error)?;
    rows.iter()
        .map(|r| {
            Ok(ClaimableTurn {
                turn_id: r.uuid("id")?,
                conversation_id: r.uuid("conversation_id")?,
                version: r.int("version")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(store_error)
}

/// A heartbeat: the lease of (`turn_id`, `turn_epoch`), still live at `now`, now ends at
/// `until`; `None` when that claim no longer holds the turn.
pub async fn renew(
    db: &Database,
    turn_id: Uuid,
    turn_epoch: i64,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, AppError> {
    let run = async {
        let mut tx = db.begin().await?;
        let moved = tx
            .execute(
                "UPDATE saga_deadlines SET due_at = $3 WHERE aggregate_type = 'turn' \
                 AND aggregate_id = $1 AND kind = 'turn_lease' AND epoch = $2 \
                 AND due_at > $4",
                Args::new()
                    .uuid(turn_id)
                    .int(turn_epoch)
                    .time(&until)
                    .time(&now),
            )
            .await?;
        if moved == 0 {
            return Ok(None);
        }
        tx.execute(
            "UPDATE saga_turns SET lease_expires_at = $3 \
             WHERE id = $1 AND lease_epoch = $2",
            Args::new().uuid(turn_id).int(turn_epoch).time(&until),
        )
        .await?;
        tx.commit().await?;
        Ok::<_, sqlx::Error>(Some(until))
    };
    run.await.map_err(store_error)
}

/// A turn's lease row (`$1` turn, `$2` epoch), locked on PostgreSQL (SQLite's `BEGIN
/// IMMEDIATE` holds the one writer's lock already).
const LEASE: Sql = Sql {
    pg: "SELECT due_at FROM saga_deadlines WHERE aggregate_type = 'turn' \
         AND aggregate_id = $1 AND kind = 'turn_lease' AND epoch = $2 FOR UPDATE",
    sqlite: "SELECT due_at FROM saga_deadlines WHERE aggregate_type = 'turn' \
             AND aggregate_id = $1 AND kind = 'turn_lease' AND epoch = $2",
};

/// Locks the lease rows a saga write was decided on, in the write's transaction.
///
/// # Errors
/// [`CommitError::LeaseGone`] for the first one that is not stored as expected.
pub async fn hold(tx: &mut Tx, leases: &[LeaseHeld]) -> Result<(), CommitError> {
    let sql = LEASE.of(tx.dialect());
    for lease in leases {
        let row = tx
            .fetch_optional(sql, Args::new().uuid(lease.turn_id).int(lease.turn_epoch))
            .await
            .map_err(|e| CommitError::Store(store_error(e)))?;
        let live = match (&row, lease.live_at) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(row), Some(at)) => {
                row.time("due_at")
                    .map_err(|e| CommitError::Store(store_error(e)))?
                    > at
            }
        };
        if !live {
            return Err(CommitError::LeaseGone {
                turn_id: lease.turn_id,
                turn_epoch: lease.turn_epoch,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_the_domain_rule_when_rendered_then_the_predicate_the_claim_and_its_index_state() {
        assert_eq!(
            claimable_predicate("t."),
            "t.state = 'dispatched' OR (t.state = 'streaming' AND t.lease_worker IS NULL)"
        );
        assert!(CLAIMABLE.contains(&format!("WHERE ({})", claimable_predicate("t."))));
    }
}
