//! The read model forgets (TRUST.md "Forgetting a person"): `actor.forgotten` and
//! `conversation.forgotten` clear the personal texts their party's key sealed from every
//! row that shows them, and mark those rows `forgotten`. Ids, kinds, times, counts and
//! states stay: the history keeps its shape.
//!
//! Which columns are whose follows `pm_domain::personal::PERSONAL`: an actor's name and
//! external identity; what they wrote (messages' content and external identity, sealed
//! under the author's key and the conversation's); every other text of a conversation.
//! Facts logged after a forgetting reach the projection with these texts unreadable
//! already, and are stored NULL and `forgotten` as they come ([`super::batch`]); so the
//! forgettings of a batch are applied after its rows, one `UPDATE` per table each —
//! forgetting is rare, and `messages` has no index by author (every index costs each
//! message's insert), so forgetting an actor scans it once.

use pm_domain::forgetting::Party;
use uuid::Uuid;

use super::error::ApplyError;
use super::schema::table;
use crate::db::{Args, Tx};

/// What forgetting a party clears: (table, personal columns, the column naming the party).
const CLEARED: &[(Party, &str, &[&str], &str)] = &[
    (
        Party::Actor,
        "actors",
        &["display_name", "external_identity"],
        "id",
    ),
    (
        Party::Actor,
        "messages",
        &["content", "external_identity"],
        "actor_id",
    ),
    (
        Party::Conversation,
        "conversations",
        &["title", "latest_checkpoint_summary"],
        "id",
    ),
    (
        Party::Conversation,
        "conversation_checkpoints",
        &["summary"],
        "conversation_id",
    ),
    (
        Party::Conversation,
        "tasks",
        &["instructions"],
        "conversation_id",
    ),
    (
        Party::Conversation,
        "messages",
        &["content", "external_identity"],
        "conversation_id",
    ),
];

/// The statement clearing `columns` of the rows of `table` (generation `g`) whose `by`
/// is `$1`, and marking them forgotten.
fn clear_statement(g: i64, table_name: &str, columns: &[&str], by: &str) -> String {
    let set: Vec<String> = columns.iter().map(|c| format!("{c} = NULL")).collect();
    format!(
        "UPDATE {} SET {}, forgotten = TRUE WHERE {by} = $1",
        table(g, table_name),
        set.join(", ")
    )
}

/// Applies the forgettings of a batch to generation `g` (in log order; each is
/// idempotent, so a forgetting applied twice changes nothing).
///
/// # Errors
/// A failed statement.
pub(super) async fn apply(
    tx: &mut Tx,
    g: i64,
    forgotten: &[(Party, Uuid)],
) -> Result<(), ApplyError> {
    for (party, id) in forgotten {
        clear(tx, g, *party, *id).await?;
    }
    Ok(())
}

/// Clears the texts `party` `id` sealed from the rows of generation `g`.
///
/// # Errors
/// A failed statement.
pub(super) async fn clear(tx: &mut Tx, g: i64, party: Party, id: Uuid) -> Result<(), sqlx::Error> {
    for (whose, table_name, columns, by) in CLEARED {
        if *whose == party {
            let sql = clear_statement(g, table_name, columns, by);
            tx.execute(&sql, Args::new().uuid(id)).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_forgotten_conversation_when_cleared_then_every_table_showing_its_texts_is() {
        let tables: Vec<&str> = CLEARED
            .iter()
            .filter(|(party, ..)| *party == Party::Conversation)
            .map(|(_, t, ..)| *t)
            .collect();
        assert_eq!(
            tables,
            [
                "conversations",
                "conversation_checkpoints",
                "tasks",
                "messages"
            ]
        );
        assert_eq!(
            clear_statement(3, "tasks", &["instructions"], "conversation_id"),
            "UPDATE rm_g3_tasks SET instructions = NULL, forgotten = TRUE WHERE conversation_id = $1"
        );
    }

    #[test]
    fn given_every_forgettable_table_then_a_forgetting_clears_it() {
        for name in super::super::schema::FORGETTABLE {
            assert!(
                CLEARED.iter().any(|(_, t, ..)| t == name),
                "{name} is never cleared"
            );
        }
    }
}
