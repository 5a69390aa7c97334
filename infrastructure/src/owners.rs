//! The application's [`OwnerStore`]: the organization of what a path names, read from the
//! log-derived `conversation_organizations` table (migration
//! `0013_conversation_organizations.sql`), which commits with each conversation's start.
//! A conversation's organization never changes and nothing is deleted, so found answers
//! are remembered (bounded); only "does not exist" goes to the database every time.

use pm_application::scope::{OwnerStore, Scope, Target, Visibility};
use pm_application::AppError;
use uuid::Uuid;

use crate::db::{Arg, Args};
use crate::processor::store::store_error;
use crate::Database;

/// The organization of a conversation (`None` for one without), by what a path names.
#[derive(Debug, Clone)]
pub struct DbOwners {
    db: Database,
    known: std::sync::Arc<quick_cache::sync::Cache<(Target, Uuid), Option<String>>>,
}

/// How many answers are remembered.
const REMEMBERED: usize = 100_000;

impl DbOwners {
    /// Owners read from `db`.
    pub fn new(db: Database) -> Self {
        Self {
            db,
            known: std::sync::Arc::new(quick_cache::sync::Cache::new(REMEMBERED)),
        }
    }

    /// Remembers a conversation this replica has just started, so that the first command
    /// a scoped principal sends to it needs no read.
    pub fn learn_conversation(&self, id: Uuid, organization: Option<&str>) {
        self.known
            .insert((Target::Conversation, id), organization.map(str::to_string));
    }

    /// Remembers a task this replica has just created in `conversation` (when that
    /// conversation's organization is remembered: it was just checked).
    pub fn learn_task(&self, id: Uuid, conversation: Uuid) {
        if let Some(organization) = self.known.get(&(Target::Conversation, conversation)) {
            self.known.insert((Target::Task, id), organization);
        }
    }

    /// The organization of the conversation `target` `id` belongs to: `None` when it does
    /// not exist, `Some(None)` for a conversation without an organization.
    ///
    /// # Errors
    /// [`AppError`] from the store.
    pub async fn organization(
        &self,
        target: Target,
        id: Uuid,
    ) -> Result<Option<Option<String>>, AppError> {
        if let Some(known) = self.known.get(&(target, id)) {
            return Ok(Some(known));
        }
        // Each row: the thing exists; its organization NULL when its conversation has none.
        let sql = match target {
            Target::Conversation => {
                "SELECT organization FROM conversation_organizations WHERE conversation_id = $1"
            }
            Target::Task => {
                "SELECT o.organization FROM events e \
                 LEFT JOIN conversation_organizations o ON o.conversation_id = e.conversation_id \
                 WHERE e.aggregate_type = 'task' AND e.aggregate_id = $1 AND e.sequence = 1"
            }
            Target::Agent => {
                "SELECT o.organization FROM saga_agents a \
                 LEFT JOIN conversation_organizations o ON o.conversation_id = a.conversation_id \
                 WHERE a.id = $1"
            }
            Target::Turn => {
                "SELECT o.organization FROM saga_turns t \
                 LEFT JOIN conversation_organizations o ON o.conversation_id = t.conversation_id \
                 WHERE t.id = $1"
            }
            Target::Actor => return Ok(None),
        };
        // The log's `aggregate_id` is text on both stores; the other ids are typed.
        let args = match target {
            Target::Task => Args::new().text(id.to_string()),
            _ => Args::new().uuid(id),
        };
        let row = self
            .db
            .fetch_optional(sql, args)
            .await
            .map_err(store_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let organization = row.opt_string("organization").map_err(store_error)?;
        self.known.insert((target, id), organization.clone());
        Ok(Some(organization))
    }

    /// Whether actor `id` takes part in a conversation `scope` may see (the read model's
    /// `conversation_actors`, which the actor's own read comes from).
    async fn actor_seen(&self, scope: &Scope, id: Uuid) -> Result<bool, AppError> {
        if scope.is_all() {
            return Ok(true);
        }
        let mut args = Args::new().uuid(id);
        let within = organization_clause(&mut args, "o.organization", scope);
        let sql = format!(
            "SELECT 1 AS seen FROM conversation_actors a \
             JOIN conversation_organizations o ON o.conversation_id = a.conversation_id \
             WHERE a.actor_id = $1{within} LIMIT 1"
        );
        let row = self
            .db
            .fetch_optional(&sql, args)
            .await
            .map_err(store_error)?;
        Ok(row.is_some())
    }
}

/// `$n, $n+1, …`: one placeholder per organization, pushed onto `args` (an empty list
/// gives `NULL`, which no organization equals).
fn in_list<'a>(args: &mut Args, organizations: impl IntoIterator<Item = &'a String>) -> String {
    let placeholders: Vec<String> = organizations
        .into_iter()
        .map(|o| args.push(Arg::Text(Some(o.clone()))))
        .collect();
    if placeholders.is_empty() {
        "NULL".into()
    } else {
        placeholders.join(", ")
    }
}

/// ` AND <column> IN (<the conversations of the scope's organizations>)`, or nothing for
/// every organization: the one SQL form of [`Scope`], for any row that belongs to a
/// conversation (`column` names its conversation id).
pub fn scope_clause(args: &mut Args, column: &str, scope: &Scope) -> String {
    if scope.is_all() {
        return String::new();
    }
    let within = organization_clause(args, "organization", scope);
    format!(
        " AND {column} IN (SELECT conversation_id FROM conversation_organizations \
         WHERE 1 = 1{within})"
    )
}

/// ` AND <column> IN (<the scope's organizations>)`, or nothing for every organization:
/// the same rule as [`scope_clause`] for a read table that carries its conversation's
/// organization itself (`conversations`, `tasks`), which needs no join.
pub fn organization_clause(args: &mut Args, column: &str, scope: &Scope) -> String {
    match scope.organizations() {
        None => String::new(),
        Some(organizations) => {
            let within = in_list(args, organizations);
            format!(" AND {column} IN ({within})")
        }
    }
}

impl OwnerStore for DbOwners {
    async fn visibility(
        &self,
        scope: &Scope,
        target: Target,
        id: Uuid,
    ) -> Result<Visibility, AppError> {
        if scope.is_all() {
            return Ok(Visibility::Visible);
        }
        if target == Target::Actor {
            // Not seen answers as missing: the actor's own endpoint cannot tell them apart.
            return Ok(if self.actor_seen(scope, id).await? {
                Visibility::Visible
            } else {
                Visibility::Hidden
            });
        }
        Ok(match self.organization(target, id).await? {
            None => Visibility::Missing,
            Some(organization) if scope.permits(organization.as_deref()) => Visibility::Visible,
            Some(_) => Visibility::Hidden,
        })
    }
}
