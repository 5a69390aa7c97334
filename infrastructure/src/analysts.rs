//! Analysts of one organization in SQL, on PostgreSQL (TRUST.md "Organizations",
//! docs/READ_MODEL.md): the role `pm_analyst_<organization>` may `SELECT` the read
//! schema's views and sees only that organization's rows, through row-level security on
//! the tables beneath them; it is given nothing of the log or the operational tables.
//!
//! How, and why so:
//! - `analyst_roles (role_name, organization)` lists this database's analyst roles. Roles
//!   are cluster-wide, the table is not: a role made for one database sharing the server
//!   is given nothing in another.
//! - Every table beneath a view has row-level security and one permissive `SELECT` policy,
//!   the same for every role (PUBLIC), and none names an organization: a row is visible
//!   when its conversation is visible in `conversation_organizations` (the one mapping of
//!   conversation to organization, written with each `conversation.started`), whose policy
//!   shows the organizations of the `analyst_roles` rows whose role the reader holds
//!   (`pg_has_role(…, 'USAGE')`). A new organization is a row and grants, never DDL on the
//!   tables, and a role that holds no analyst role sees no row at all (fail closed).
//! - The views are `security_invoker` (PostgreSQL 15), so the policies apply to whoever
//!   reads through them; by default a view reads with its owner's rights, for whom the
//!   policies do not apply.
//! - The tables' owner — the service's own connection, which created them by migrating —
//!   bypasses row-level security (it is not `FORCE`d): its queries carry no policy at all.
//! - [`protect`] puts all of this in place for a generation of the read tables and grants
//!   the registered roles what they may read. Every start (which re-creates the views) and
//!   every rebuild's swap (new tables, re-created views) call it in the transaction that
//!   makes them, so nothing new is ever readable unprotected, nor lost to the analysts.
//! - Until the first analyst role none of this exists (no table, no policy, views as they
//!   were): a deployment without analysts is unchanged.
//! - A migration that re-creates an analysts' view must create it `WITH (security_invoker
//!   = true)`: `CREATE OR REPLACE VIEW` keeps the view's grants but drops the option, and
//!   until [`protect`] runs again (the same start, right after the migrations) the view
//!   would read with its owner's rights. (`DROP VIEW` + `CREATE VIEW` loses the grants
//!   instead: refused, not leaked.)

use std::collections::{BTreeMap, BTreeSet};

use pm_domain::Label;

use crate::db::{Args, Tx};
use crate::read_model::rebuild::{ensure_schema, lock_generation};
use crate::read_model::schema::{table, TABLES};
use crate::sql::Dialect;
use crate::Database;

/// An analyst role's name is this followed by its organization.
pub const ROLE_PREFIX: &str = "pm_analyst_";

/// The longest identifier PostgreSQL keeps, in bytes (`NAMEDATALEN - 1`); a longer one is
/// silently truncated, so two organizations could end up sharing a role.
pub const MAX_IDENTIFIER_BYTES: usize = 63;

/// The sagas' analysts' views (migrations `0005`–`0010`), beside the read model's
/// generation views ([`TABLES`]).
pub const SAGA_VIEWS: &[&str] = &[
    "sessions",
    "agents",
    "turns",
    "tool_calls",
    "anomalies",
    "deadlines",
];

/// The tables beneath the sagas' views (`agents` reads its inbox from
/// `saga_agent_inbox`); each row names its conversation.
const SAGA_TABLES: &[&str] = &[
    "saga_sessions",
    "saga_agents",
    "saga_agent_inbox",
    "saga_turns",
    "saga_tool_calls",
    "saga_anomalies",
    "saga_deadlines",
];

/// The one policy on each protected table. A future change of a policy's expression must
/// change this name too, so that [`protect`] (which keeps a policy of this name as it is)
/// makes the new one.
const POLICY: &str = "pm_analyst_rows";

/// The first PostgreSQL with `security_invoker` views.
const MIN_SERVER_VERSION: i64 = 150_000;

/// The organizations the reader holds an analyst role of: the end of every policy's chain.
const HELD_ROLES: &str = "EXISTS (SELECT 1 FROM pg_catalog.pg_roles r \
     WHERE r.rolname = analyst_roles.role_name AND pg_catalog.pg_has_role(r.oid, 'USAGE'))";

/// Rows of a visible conversation (`conversation_organizations` is itself filtered).
const BY_CONVERSATION: &str =
    "conversation_id IN (SELECT conversation_id FROM conversation_organizations)";

/// Every view of the read schema (docs/READ_MODEL.md), in the order documented.
pub fn views() -> impl Iterator<Item = &'static str> {
    TABLES.iter().chain(SAGA_VIEWS).copied()
}

/// `name` as a PostgreSQL identifier: always double-quoted, inner quotes doubled (what
/// `quote_ident` and `format('%I')` do), so no name — a role made of an organization's
/// label, a relation read from the catalog — can end the identifier early or change
/// case. Labels cannot hold NUL, the one character an identifier cannot.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Why an analyst role was not made.
#[derive(Debug, thiserror::Error)]
pub enum AnalystError {
    /// The database is SQLite.
    #[error(
        "SQLite is single-tenant: there are no roles nor row-level security, and whoever can \
         open the file reads every organization; analyst roles need PostgreSQL \
         (docs/READ_MODEL.md)"
    )]
    SingleTenant,
    /// The organization is not one an analyst role can be made for.
    #[error("the organization {organization:?} {reason}")]
    Organization {
        /// As given.
        organization: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server has no `security_invoker` views.
    #[error(
        "analyst roles need PostgreSQL 15 or later (security_invoker views); this server is {0}"
    )]
    Version(String),
    /// A role of that name exists and cannot be made an analyst role.
    #[error("the role {role:?} exists and {reason}")]
    Unfit {
        /// The role.
        role: String,
        /// Why it is refused.
        reason: String,
    },
    /// The connection's role may not create roles.
    #[error(
        "the DATABASE_URL role may not create the role {role:?} (it needs CREATEROLE): \
         give it CREATEROLE, or create the role yourself (CREATE ROLE … NOLOGIN) and run \
         this again"
    )]
    CannotCreate {
        /// The role.
        role: String,
    },
    /// A statement failed.
    #[error("database error: {0}")]
    Sql(#[from] sqlx::Error),
}

/// What [`ensure_role`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalystRole {
    /// The role, `pm_analyst_<organization>`.
    pub role: String,
    /// Its organization.
    pub organization: String,
    /// Whether the role was created (else it existed and was brought in line).
    pub created: bool,
}

/// The analyst role of `organization`, or why there can be none: the organization must be
/// a valid organization label, not `*` (every organization, to a principal), and the role
/// name must fit PostgreSQL's 63 bytes — a longer one would be truncated, not refused, by
/// the server.
///
/// # Errors
/// [`AnalystError::Organization`].
pub fn role_name(organization: &str) -> Result<String, AnalystError> {
    let refuse = |reason: String| AnalystError::Organization {
        organization: organization.to_string(),
        reason,
    };
    Label::parse(organization)
        .map_err(|e| refuse(format!("is not a valid organization label: it {e}")))?;
    if organization == "*" {
        return Err(refuse(
            "means every organization to a principal; an analyst role is for one organization"
                .to_string(),
        ));
    }
    let role = format!("{ROLE_PREFIX}{organization}");
    if role.len() > MAX_IDENTIFIER_BYTES {
        return Err(refuse(format!(
            "makes a role name of {} bytes, and PostgreSQL would truncate it to {MAX_IDENTIFIER_BYTES}: \
             an analyst role's organization has at most {} bytes",
            role.len(),
            MAX_IDENTIFIER_BYTES - ROLE_PREFIX.len()
        )));
    }
    Ok(role)
}

/// Creates or updates the analyst role of `organization` on `db` (after migrating): a
/// NOLOGIN role, listed in `analyst_roles`, with `SELECT` on the read schema's views and
/// the tables beneath them (filtered to its organization) and no other privilege on this
/// schema's relations; then [`protect`]. One transaction, holding the read model's
/// processor row like a start or a rebuild's swap, so it never interleaves with them.
/// Running it again is harmless and repairs what someone changed by hand.
///
/// # Errors
/// [`AnalystError`]; nothing is changed then.
pub async fn ensure_role(db: &Database, organization: &str) -> Result<AnalystRole, AnalystError> {
    let role = role_name(organization)?;
    if db.dialect() != Dialect::Postgres {
        return Err(AnalystError::SingleTenant);
    }
    ensure_schema(db).await?;
    let mut tx = db.begin().await?;
    require_security_invoker(&mut tx).await?;
    // Enabling row-level security on a busy table waits for its transactions: rather
    // fail (and be run again) than hold the service's queries up behind it.
    tx.execute("SET LOCAL lock_timeout = '10s'", Args::new())
        .await?;
    let generation = lock_generation(&mut tx).await?;
    tx.execute(
        "CREATE TABLE IF NOT EXISTS analyst_roles (
  role_name    text PRIMARY KEY,
  organization text NOT NULL)",
        Args::new(),
    )
    .await?;
    let created = create_or_update(&mut tx, &role).await?;
    tx.execute(
        "INSERT INTO analyst_roles (role_name, organization) VALUES ($1, $2) \
         ON CONFLICT (role_name) DO UPDATE SET organization = EXCLUDED.organization",
        Args::new().text(&role).text(organization),
    )
    .await?;
    revoke_others(&mut tx, &role, generation).await?;
    let usage = tx
        .fetch_optional(
            "SELECT has_schema_privilege($1, current_schema(), 'USAGE') AS usage, \
             current_schema() AS schema",
            Args::new().text(&role),
        )
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    if !usage.bool("usage")? {
        let schema = usage.string("schema")?;
        let grant = format!(
            "GRANT USAGE ON SCHEMA {} TO {}",
            ident(&schema),
            ident(&role)
        );
        tx.execute(&grant, Args::new()).await?;
    }
    protect(&mut tx, generation).await?;
    tx.commit().await?;
    Ok(AnalystRole {
        role,
        organization: organization.to_string(),
        created,
    })
}

/// Creates `role` NOLOGIN, or checks the one that exists and makes it NOLOGIN. Refuses a
/// superuser or BYPASSRLS role (row-level security does not apply to them) and one
/// granted other roles (it would hold their privileges): changing those is the
/// operator's decision, not this command's. Answers whether it created the role.
async fn create_or_update(tx: &mut Tx, role: &str) -> Result<bool, AnalystError> {
    let existing = tx
        .fetch_optional(
            "SELECT r.rolsuper AS superuser, r.rolbypassrls AS bypassrls, r.rolcanlogin AS login, \
             (SELECT string_agg(g.rolname::text, ', ' ORDER BY g.rolname) \
              FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid \
              WHERE m.member = r.oid) AS member_of \
             FROM pg_catalog.pg_roles r WHERE r.rolname = $1",
            Args::new().text(role),
        )
        .await?;
    let Some(existing) = existing else {
        let create = format!("CREATE ROLE {} NOLOGIN", ident(role));
        return match tx.execute(&create, Args::new()).await {
            Ok(_) => Ok(true),
            Err(e) if insufficient_privilege(&e) => Err(AnalystError::CannotCreate {
                role: role.to_string(),
            }),
            Err(e) => Err(e.into()),
        };
    };
    let unfit = |reason: String| AnalystError::Unfit {
        role: role.to_string(),
        reason,
    };
    if existing.bool("superuser")? || existing.bool("bypassrls")? {
        return Err(unfit(
            "is a superuser or has BYPASSRLS: row-level security would not apply to it".into(),
        ));
    }
    if let Some(others) = existing.opt_string("member_of")? {
        return Err(unfit(format!(
            "is granted {others}: an analyst role holds only what this command gives it \
             (REVOKE them from it first)"
        )));
    }
    if existing.bool("login")? {
        let nologin = format!("ALTER ROLE {} NOLOGIN", ident(role));
        tx.execute(&nologin, Args::new()).await?;
    }
    Ok(false)
}

/// Revokes every privilege `role` holds on this schema's relations but `SELECT` on what an
/// analyst reads: a role that existed before may have been given more by hand (the log,
/// an operational table, a write).
async fn revoke_others(tx: &mut Tx, role: &str, generation: i64) -> Result<(), sqlx::Error> {
    let readable = readable(generation).join(",");
    let rows = tx
        .fetch_all(
            "WITH analyst AS (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $1) \
             SELECT c.relname::text AS relation, c.relkind::text AS kind \
             FROM pg_catalog.pg_class c \
             WHERE c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = current_schema()) \
               AND (EXISTS (SELECT 1 FROM aclexplode(c.relacl) x, analyst \
                            WHERE x.grantee = analyst.oid \
                              AND NOT (x.privilege_type = 'SELECT' \
                                       AND c.relname::text = ANY (string_to_array($2, ',')))) \
                    OR EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a, aclexplode(a.attacl) x, analyst \
                               WHERE a.attrelid = c.oid AND x.grantee = analyst.oid)) \
             ORDER BY 1",
            Args::new().text(role).text(readable),
        )
        .await?;
    for row in rows {
        let relation = row.string("relation")?;
        let kind = if row.str("kind")? == "S" {
            "SEQUENCE"
        } else {
            "TABLE"
        };
        // Column privileges go with the table's.
        let revoke = format!(
            "REVOKE ALL ON {kind} {} FROM {}",
            ident(&relation),
            ident(role)
        );
        tx.execute(&revoke, Args::new()).await?;
    }
    Ok(())
}

/// Each protected table of generation `generation` and its policy's `USING` expression.
fn policies(generation: i64) -> Vec<(String, String)> {
    let t = |name: &str| table(generation, name);
    let mut policies = vec![
        ("analyst_roles".to_string(), HELD_ROLES.to_string()),
        (
            "conversation_organizations".to_string(),
            // An array, computed once per query, lets the organization index serve.
            "organization = ANY (ARRAY(SELECT organization FROM analyst_roles))".to_string(),
        ),
        (
            t("conversations"),
            "id IN (SELECT conversation_id FROM conversation_organizations)".to_string(),
        ),
        (
            t("actors"),
            // Those taking part: its participants and its tasks' assignees.
            format!(
                "id IN (SELECT actor_id FROM {}) OR id IN (SELECT assigned_to FROM {})",
                t("conversation_actors"),
                t("tasks")
            ),
        ),
        (
            t("task_checkpoints"),
            format!("task_id IN (SELECT id FROM {})", t("tasks")),
        ),
    ];
    for name in [
        "conversation_actors",
        "conversation_checkpoints",
        "tasks",
        "messages",
    ] {
        policies.push((t(name), BY_CONVERSATION.to_string()));
    }
    for name in SAGA_TABLES {
        policies.push(((*name).to_string(), BY_CONVERSATION.to_string()));
    }
    policies
}

/// Everything an analyst role may `SELECT`: the views, the tables beneath them (a
/// `security_invoker` view needs its reader to hold them too) and the two the policies read.
fn readable(generation: i64) -> Vec<String> {
    views()
        .map(str::to_string)
        .chain(policies(generation).into_iter().map(|(t, _)| t))
        .collect()
}

/// Makes the read schema of generation `generation` safe for analyst roles and grants
/// each registered one `SELECT` on what it may read — in the caller's transaction, which
/// has just created that generation's tables or (re-)created the views. Changes only what
/// is missing, so it is a few catalog reads when everything is in place; a no-op on
/// SQLite and where no analyst role was ever made. Roles dropped since are forgotten.
///
/// # Errors
/// A failed statement; a missing table of the generation; a server older than 15 where
/// analyst roles exist (their views could not be made `security_invoker`).
pub async fn protect(tx: &mut Tx, generation: i64) -> Result<(), sqlx::Error> {
    if tx.dialect() != Dialect::Postgres {
        return Ok(());
    }
    let registered = tx
        .fetch_optional(
            "SELECT to_regclass('analyst_roles') IS NOT NULL AS registered",
            Args::new(),
        )
        .await?
        .map(|r| r.bool("registered"))
        .transpose()?
        .unwrap_or(false);
    if !registered {
        return Ok(());
    }
    require_security_invoker(tx).await.map_err(|e| match e {
        AnalystError::Sql(e) => e,
        other => sqlx::Error::Configuration(other.to_string().into()),
    })?;
    tx.execute(
        "DELETE FROM analyst_roles a WHERE NOT EXISTS \
         (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = a.role_name)",
        Args::new(),
    )
    .await?;
    let policies = policies(generation);
    let readable = readable(generation);
    let state = relations(tx, &readable).await?;
    for (name, using) in &policies {
        let s = state
            .get(name)
            .ok_or_else(|| sqlx::Error::Protocol(format!("no table {name} to protect")))?;
        if !s.row_security {
            let enable = format!("ALTER TABLE {} ENABLE ROW LEVEL SECURITY", ident(name));
            tx.execute(&enable, Args::new()).await?;
        }
        if !s.policy {
            let create = format!(
                "CREATE POLICY {} ON {} AS PERMISSIVE FOR SELECT TO PUBLIC USING ({using})",
                ident(POLICY),
                ident(name)
            );
            tx.execute(&create, Args::new()).await?;
        }
    }
    for view in views() {
        let s = state
            .get(view)
            .ok_or_else(|| sqlx::Error::Protocol(format!("no view {view} to protect")))?;
        if !s.security_invoker {
            let alter = format!("ALTER VIEW {} SET (security_invoker = true)", ident(view));
            tx.execute(&alter, Args::new()).await?;
        }
    }
    for (role, missing) in missing_grants(tx, &readable).await? {
        let list = missing
            .iter()
            .map(|r| ident(r))
            .collect::<Vec<_>>()
            .join(", ");
        let grant = format!("GRANT SELECT ON {list} TO {}", ident(&role));
        tx.execute(&grant, Args::new()).await?;
    }
    Ok(())
}

/// What [`protect`] needs to know of a relation.
struct Relation {
    row_security: bool,
    policy: bool,
    security_invoker: bool,
}

/// The relations of this schema named in `names`.
async fn relations(
    tx: &mut Tx,
    names: &[String],
) -> Result<BTreeMap<String, Relation>, sqlx::Error> {
    let rows = tx
        .fetch_all(
            "SELECT c.relname::text AS name, c.relrowsecurity AS row_security, \
             EXISTS (SELECT 1 FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid AND p.polname = $2) AS policy, \
             COALESCE(c.reloptions @> ARRAY['security_invoker=true'], false) AS security_invoker \
             FROM pg_catalog.pg_class c \
             WHERE c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = current_schema()) \
               AND c.relname::text = ANY (string_to_array($1, ','))",
            Args::new().text(names.join(",")).text(POLICY),
        )
        .await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.string("name")?,
                Relation {
                    row_security: row.bool("row_security")?,
                    policy: row.bool("policy")?,
                    security_invoker: row.bool("security_invoker")?,
                },
            ))
        })
        .collect()
}

/// For each registered role that exists, the relations of `names` it holds no `SELECT`
/// grant on.
async fn missing_grants(
    tx: &mut Tx,
    names: &[String],
) -> Result<BTreeMap<String, BTreeSet<String>>, sqlx::Error> {
    let rows = tx
        .fetch_all(
            "SELECT a.role_name, c.relname::text AS relation \
             FROM analyst_roles a \
             JOIN pg_catalog.pg_roles r ON r.rolname = a.role_name \
             JOIN pg_catalog.pg_class c \
               ON c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = current_schema()) \
              AND c.relname::text = ANY (string_to_array($1, ',')) \
             WHERE NOT EXISTS (SELECT 1 FROM aclexplode(c.relacl) x \
                               WHERE x.grantee = r.oid AND x.privilege_type = 'SELECT')",
            Args::new().text(names.join(",")),
        )
        .await?;
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in rows {
        missing
            .entry(row.string("role_name")?)
            .or_default()
            .insert(row.string("relation")?);
    }
    Ok(missing)
}

/// Refuses a server without `security_invoker` views.
async fn require_security_invoker(tx: &mut Tx) -> Result<(), AnalystError> {
    let row = tx
        .fetch_optional(
            "SELECT current_setting('server_version_num')::bigint AS num, \
             current_setting('server_version') AS version",
            Args::new(),
        )
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    if row.int("num")? < MIN_SERVER_VERSION {
        return Err(AnalystError::Version(row.string("version")?));
    }
    Ok(())
}

/// Whether `e` is PostgreSQL's `insufficient_privilege` (SQLSTATE 42501).
fn insufficient_privilege(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|code| code == "42501")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_names_with_quotes_and_case_when_quoted_then_they_stay_one_identifier() {
        assert_eq!(ident("acme"), "\"acme\"");
        assert_eq!(ident("Acme Corp"), "\"Acme Corp\"");
        assert_eq!(
            ident("x\"; DROP TABLE events; --"),
            "\"x\"\"; DROP TABLE events; --\""
        );
    }

    #[test]
    fn given_organizations_when_named_then_bad_ones_are_refused() {
        assert_eq!(role_name("acme").ok().as_deref(), Some("pm_analyst_acme"));
        assert_eq!(
            role_name("Acme Corp").ok().as_deref(),
            Some("pm_analyst_Acme Corp")
        );
        for bad in ["", "   ", "*"] {
            assert!(
                matches!(role_name(bad), Err(AnalystError::Organization { .. })),
                "{bad:?}"
            );
        }
        let longest = "a".repeat(MAX_IDENTIFIER_BYTES - ROLE_PREFIX.len());
        assert!(role_name(&longest).is_ok());
        let too_long = format!("{longest}b");
        let e = role_name(&too_long).err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("at most 52 bytes")),
            "{e:?}"
        );
        // Bytes, not characters: 26 two-byte letters are 52 bytes, 27 are too many.
        assert!(role_name(&"é".repeat(26)).is_ok());
        assert!(role_name(&"é".repeat(27)).is_err());
    }

    #[test]
    fn given_a_generation_when_its_policies_are_made_then_every_table_beneath_a_view_has_one() {
        let tables: BTreeSet<String> = policies(7).into_iter().map(|(t, _)| t).collect();
        for name in TABLES {
            assert!(tables.contains(&table(7, name)), "{name}");
        }
        for name in SAGA_TABLES {
            assert!(tables.contains(*name), "{name}");
        }
        assert!(policies(7)
            .iter()
            .all(|(_, using)| !using.contains("rm_g6_") && !using.contains("rm_g8_")));
    }
}
