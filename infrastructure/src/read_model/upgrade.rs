//! Upgrading, at start-up, a read model an earlier version made: its current generation's
//! tables lack what the current statements create ([`super::schema::create_statements`]),
//! and `CREATE TABLE IF NOT EXISTS` would leave them so.
//!
//! The one change so far is forgetting (TRUST.md "Forgetting a person"): personal texts
//! became nullable and [`FORGETTABLE`] tables gained `forgotten`. Neither needs the log —
//! every row of the old generation is as the new one would hold it, never forgotten —
//! so instead of a replay the rows are copied into generation N+1, made by the current
//! statements, and the views and the processor are pointed at it in the caller's
//! transaction, which holds the processor row (as a rebuild's swap does): readers see the
//! old generation or the new one, whole; the live projection waits. Generation N's tables
//! are dropped in the same transaction.
//!
//! A version that destroyed keys but did not yet clear the read model may have left the
//! texts of forgotten parties (or their stand-ins) in it: every party whose key is a
//! tombstone (`pm_keys`, a row without material) is forgotten again in the new
//! generation, as its `forgotten` fact would have been ([`super::forget`]).

use pm_domain::forgetting::Party;
use uuid::Uuid;

use super::rebuild::run_all;
use super::schema::{create_statements, drop_statements, table, view_statements, FORGETTABLE};
use super::READ_MODEL;
use crate::db::{Args, Tx};
use crate::sql::Dialect;

/// The columns of `table`, in order (none when there is no such table).
async fn columns(tx: &mut Tx, table: &str) -> Result<Vec<String>, sqlx::Error> {
    let sql = match tx.dialect() {
        Dialect::Postgres => {
            "SELECT column_name::text AS name FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position"
        }
        Dialect::Sqlite => "SELECT name FROM pragma_table_info($1) ORDER BY cid",
    };
    tx.fetch_all(sql, Args::new().text(table))
        .await?
        .iter()
        .map(|row| row.string("name"))
        .collect()
}

/// Whether generation `g` exists and was made by a version before forgetting: one of its
/// [`FORGETTABLE`] tables has no `forgotten` column.
async fn outdated(tx: &mut Tx, g: i64) -> Result<bool, sqlx::Error> {
    for name in FORGETTABLE {
        let columns = columns(tx, &table(g, name)).await?;
        if !columns.is_empty() && !columns.iter().any(|c| c == "forgotten") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The parties forgotten so far: their keys' tombstones.
async fn forgotten_parties(tx: &mut Tx) -> Result<Vec<(Party, Uuid)>, sqlx::Error> {
    let rows = tx
        .fetch_all(
            "SELECT scope, id FROM pm_keys WHERE length(material) = 0",
            Args::new(),
        )
        .await?;
    let mut parties = Vec::with_capacity(rows.len());
    for row in rows {
        let party = match row.string("scope")?.as_str() {
            "actor" => Party::Actor,
            "conversation" => Party::Conversation,
            other => {
                let unknown = format!("a key of unknown scope {other:?}");
                return Err(sqlx::Error::Decode(unknown.into()));
            }
        };
        parties.push((party, row.uuid("id")?));
    }
    Ok(parties)
}

/// Upgrades generation `g` when an earlier version made it ([`outdated`]): its rows are
/// copied into generation `g + 1`, made by the current statements, which the processor
/// and the views then point at; `g`'s tables are dropped. Answers the generation now
/// current. The caller holds the processor row ([`super::rebuild::lock_generation`]) and
/// protects the answered generation for analysts.
///
/// # Errors
/// A failed statement (the caller's transaction is then of no use: roll it back).
pub(super) async fn upgrade(tx: &mut Tx, g: i64) -> Result<i64, sqlx::Error> {
    if !outdated(tx, g).await? {
        return Ok(g);
    }
    let (d, new) = (tx.dialect(), g + 1);
    tracing::info!(
        from = g,
        to = new,
        "the read model's tables were made by an earlier version: copying them into a new generation"
    );
    // Tables a failed rebuild left behind under the new number go first.
    run_all(
        tx,
        drop_statements(d, new)
            .into_iter()
            .chain(create_statements(d, new)),
    )
    .await?;
    for name in super::schema::TABLES {
        // Every old column is a column of the new table; the new ones take their defaults.
        let old = columns(tx, &table(g, name)).await?;
        if old.is_empty() {
            continue;
        }
        let list = old
            .iter()
            .map(|c| format!("\"{c}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let copy = format!(
            "INSERT INTO {} ({list}) SELECT {list} FROM {}",
            table(new, name),
            table(g, name)
        );
        tx.execute(&copy, Args::new()).await?;
    }
    for (party, id) in forgotten_parties(tx).await? {
        super::forget::clear(tx, new, party, id).await?;
    }
    tx.execute(
        "UPDATE processors SET generation = $2 WHERE name = $1",
        Args::new().text(READ_MODEL).int(new),
    )
    .await?;
    run_all(tx, view_statements(new)).await?;
    run_all(tx, drop_statements(d, g)).await?;
    Ok(new)
}
