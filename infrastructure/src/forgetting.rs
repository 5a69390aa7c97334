//! What forgetting a party does in the transaction that appends its `forgotten` fact
//! (TRUST.md "Forgetting a person"), so that the fact and the erasure commit together or
//! not at all:
//!
//! - **The key is destroyed** ([`KeyStore::destroy_in`]): every text sealed under it, in
//!   the log and wherever a copy of the log's ciphertext went, can never be opened again.
//! - **The copies in the clear are scrubbed**: the sagas' tool-call rows of a forgotten
//!   conversation (arguments, results, comments), the sagas' snapshots that may hold them
//!   (a snapshot is a cache: the machines are folded from the runes again), and stored
//!   `Idempotency-Key` answers that quote the party (replayed as `410 forgotten` from then
//!   on). A conversation's saga version moves first, which waits for a saga write of it in
//!   flight and makes one that loaded before conflict and load again.
//! - **Every replica hears of it**: `NOTIFY pm_forgotten` commits with the fact
//!   (PostgreSQL), and each replica's listener drops the key and what it opened with it
//!   ([`KeyStore::forgotten`]).
//!
//! The read model forgets by projecting the fact, like every other fact.

use pm_domain::forgetting::{forgets, Party};
use uuid::Uuid;

use crate::append::NewEvent;
use crate::db::{Args, Tx};
use crate::keys::{KeyError, KeyStore, Scope};

/// The channel replicas hear forgettings on.
pub const CHANNEL: &str = "pm_forgotten";

/// The answer a stored `Idempotency-Key` answer that quoted a forgotten party is replaced
/// with (the API's problem+json shape, code `forgotten`).
const GONE: &str = r#"{"type":"https://project-manager.dev/problems/forgotten","title":"Gone","status":410,"detail":"this answer quoted texts of a party that was forgotten","code":"forgotten"}"#;

/// The key scope of a party.
pub fn scope_of(party: Party) -> Scope {
    match party {
        Party::Actor => Scope::Actor,
        Party::Conversation => Scope::Conversation,
    }
}

/// The party `row` forgets, if it is a `forgotten` fact (its aggregate is the party).
pub(crate) fn forgotten_by(row: &NewEvent) -> Option<(Scope, Uuid)> {
    let party = forgets(&row.event_type)?;
    let id = row.aggregate_id.parse().ok()?;
    Some((scope_of(party), id))
}

/// What another replica announced on [`CHANNEL`] (`actor:<id>`, `conversation:<id>`).
pub fn heard(payload: &str) -> Option<(Scope, Uuid)> {
    let (scope, id) = payload.split_once(':')?;
    Some((Scope::parse(scope)?, id.parse().ok()?))
}

/// Erases `scope` `id` in `tx`: see the module documentation. The caller appends the fact
/// in the same transaction and, once it committed, tells its own [`KeyStore::forgotten`].
///
/// # Errors
/// [`KeyError::Store`]: the transaction must be rolled back.
pub(crate) async fn erase(
    tx: &mut Tx,
    keys: &KeyStore,
    scope: Scope,
    id: Uuid,
) -> Result<(), KeyError> {
    let one = || Args::new().uuid(id);
    if scope == Scope::Conversation {
        tx.execute(
            "UPDATE saga_conversations SET version = version + 1 WHERE conversation_id = $1",
            one(),
        )
        .await?;
        // A result keeps its status and the service's reason; the tool's words go.
        let result = match tx {
            Tx::Postgres(_) => "(result::jsonb - 'output' - 'error')::text",
            Tx::Sqlite(_) => "json_remove(result, '$.output', '$.error')",
        };
        tx.execute(
            &format!(
                "UPDATE saga_tool_calls SET arguments = 'null', result = {result}, \
                 comment = NULL WHERE conversation_id = $1"
            ),
            one(),
        )
        .await?;
        tx.execute(
            "DELETE FROM saga_snapshots WHERE conversation_id = $1",
            one(),
        )
        .await?;
    } else {
        // What an actor wrote may be held by the machines of any conversation they wrote
        // in; forgetting is rare, and the snapshots are folded again from the runes.
        tx.execute("DELETE FROM saga_snapshots", Args::new())
            .await?;
    }
    tx.execute(
        "UPDATE idempotency_keys SET status = 410, body = $2, location = NULL \
         WHERE body IS NOT NULL AND body LIKE $1",
        Args::new().text(format!("%{id}%")).text(GONE),
    )
    .await?;
    keys.destroy_in(tx, scope, id).await?;
    if matches!(tx, Tx::Postgres(_)) {
        tx.execute(
            "SELECT pg_notify($1, $2)",
            Args::new()
                .text(CHANNEL)
                .text(format!("{}:{id}", scope.as_str())),
        )
        .await?;
    }
    Ok(())
}

/// How often a SQLite process looks for keys destroyed by another process.
const TOMBSTONE_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// SQLite's stand-in for `LISTEN pm_forgotten` (more than one process may open the file: a
/// standby, a second replica): counts the destroyed keys every second, and drops every key
/// from memory when the count moved — what another process forgot reads `null` here within
/// a second. Runs until `shutdown`.
pub async fn watch_tombstones(
    db: crate::Database,
    keys: std::sync::Arc<KeyStore>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut seen = None;
    loop {
        match db
            .fetch_optional(
                "SELECT count(*) AS n FROM pm_keys WHERE length(material) = 0",
                Args::new(),
            )
            .await
        {
            Ok(Some(row)) => {
                let count = row.int("n").ok();
                if seen.is_some() && count != seen {
                    keys.forget_cached();
                }
                seen = count;
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "cannot count the destroyed keys; retrying"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(TOMBSTONE_POLL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_an_announcement_when_heard_then_its_scope_and_id_and_nothing_for_noise() {
        let id = Uuid::now_v7();
        assert_eq!(heard(&format!("actor:{id}")), Some((Scope::Actor, id)));
        assert_eq!(
            heard(&format!("conversation:{id}")),
            Some((Scope::Conversation, id))
        );
        assert_eq!(heard("task:1"), None);
        assert_eq!(heard("actor:not-an-id"), None);
        assert_eq!(heard(""), None);
    }

    #[test]
    fn given_the_gone_answer_when_parsed_then_a_problem_with_code_forgotten() {
        let problem: serde_json::Value = serde_json::from_str(GONE).expect("json");
        assert_eq!(problem["status"], 410);
        assert_eq!(problem["code"], "forgotten");
    }
}
