//! Webhooks' adapters: [`DbWebhookStore`] (the `webhooks` table on both stores) and
//! [`http::HttpDeliverer`] (reqwest, connecting only where the SSRF policy allows).

use chrono::{DateTime, Utc};
use pm_application::log::LogPosition;
use pm_application::scope::Scope;
use pm_application::webhooks::{
    DeliveryFailure, NewWebhook, Subscription, WebhookState, WebhookStore, WebhookView, WEBHOOKS,
};
use pm_application::AppError;
use uuid::Uuid;

use crate::db::{Args, DbRow};
use crate::processor::store::store_error;
use crate::Database;

pub mod http;

const COLUMNS: &str = "id, url, types, organizations, secret, state, position, \
                       generation, last_error, created_at, updated_at";

/// The subscriptions in a [`Database`].
#[derive(Debug, Clone)]
pub struct DbWebhookStore {
    db: Database,
}

impl DbWebhookStore {
    /// The store in `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

fn corrupt(col: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: col.to_string(),
        source: e.to_string().into(),
    }
}

fn types_of(row: &DbRow) -> Result<Vec<String>, sqlx::Error> {
    serde_json::from_str(&row.string("types")?).map_err(|e| corrupt("types", e))
}

/// The registrant's organizations: NULL for every organization, else a JSON array.
fn scope_of(row: &DbRow) -> Result<Scope, sqlx::Error> {
    match row.opt_string("organizations")? {
        None => Ok(Scope::All),
        Some(raw) => serde_json::from_str::<Vec<String>>(&raw)
            .map(Scope::only)
            .map_err(|e| corrupt("organizations", e)),
    }
}

fn last_error(row: &DbRow) -> Result<Option<DeliveryFailure>, sqlx::Error> {
    row.opt_string("last_error")?
        .map(|raw| serde_json::from_str(&raw).map_err(|e| corrupt("last_error", e)))
        .transpose()
}

fn view(row: &DbRow) -> Result<WebhookView, sqlx::Error> {
    let state = row.string("state")?;
    let last_error = last_error(row)?;
    Ok(WebhookView {
        id: row.uuid("id")?,
        url: row.string("url")?,
        types: types_of(row)?,
        organizations: scope_of(row)?.names(),
        secret: None,
        state: WebhookState::parse(&state).ok_or_else(|| corrupt("state", state))?,
        position: LogPosition(row.int("position")?).to_string(),
        last_error,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

fn subscription(row: &DbRow) -> Result<Subscription, sqlx::Error> {
    Ok(Subscription {
        id: row.uuid("id")?,
        url: row.string("url")?,
        types: types_of(row)?,
        scope: scope_of(row)?,
        secret: row.string("secret")?,
        position: LogPosition(row.int("position")?),
        generation: row.int("generation")?,
        failing: last_error(row)?.and_then(|f| Some((f.position.parse().ok()?, f.attempts))),
    })
}

fn internal(e: impl std::fmt::Display) -> AppError {
    AppError::Internal(e.to_string())
}

impl WebhookStore for DbWebhookStore {
    async fn create(&self, new: &NewWebhook) -> Result<(), AppError> {
        let types = serde_json::to_string(&new.types).map_err(internal)?;
        let organizations = new
            .scope
            .organizations()
            .map(serde_json::to_string)
            .transpose()
            .map_err(internal)?;
        self.db
            .execute(
                "INSERT INTO webhooks (id, url, types, secret, state, position, generation, created_at, updated_at, organizations) \
                 VALUES ($1, $2, $3, $4, 'active', $5, 0, $6, $6, $7)",
                Args::new()
                    .uuid(new.id)
                    .text(&new.url)
                    .text(types)
                    .text(&new.secret)
                    .int(new.position.0)
                    .time(&new.at)
                    .opt_text(organizations),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn list(&self) -> Result<Vec<WebhookView>, AppError> {
        let rows = self
            .db
            .fetch_all(
                &format!("SELECT {COLUMNS} FROM webhooks ORDER BY created_at, id"),
                Args::new(),
            )
            .await
            .map_err(store_error)?;
        rows.iter()
            .map(view)
            .collect::<Result<_, _>>()
            .map_err(internal)
    }

    async fn get(&self, id: Uuid) -> Result<Option<WebhookView>, AppError> {
        let row = self
            .db
            .fetch_optional(
                &format!("SELECT {COLUMNS} FROM webhooks WHERE id = $1"),
                Args::new().uuid(id),
            )
            .await
            .map_err(store_error)?;
        row.as_ref().map(view).transpose().map_err(internal)
    }

    async fn delete(&self, id: Uuid) -> Result<bool, AppError> {
        let n = self
            .db
            .execute("DELETE FROM webhooks WHERE id = $1", Args::new().uuid(id))
            .await
            .map_err(store_error)?;
        Ok(n > 0)
    }

    async fn resume(
        &self,
        id: Uuid,
        from: Option<LogPosition>,
        at: DateTime<Utc>,
    ) -> Result<Option<WebhookView>, AppError> {
        let n = self
            .db
            .execute(
                "UPDATE webhooks SET state = 'active', last_error = NULL, generation = generation + 1, \
                 position = COALESCE($2, position), updated_at = $3 WHERE id = $1",
                Args::new()
                    .uuid(id)
                    .opt_int(from.map(|p| p.0.saturating_sub(1).max(0)))
                    .time(&at),
            )
            .await
            .map_err(store_error)?;
        if n == 0 {
            return Ok(None);
        }
        self.get(id).await
    }

    async fn active(&self) -> Result<Vec<Subscription>, AppError> {
        let rows = self
            .db
            .fetch_all(
                &format!("SELECT {COLUMNS} FROM webhooks WHERE state = 'active'"),
                Args::new(),
            )
            .await
            .map_err(store_error)?;
        rows.iter()
            .map(subscription)
            .collect::<Result<_, _>>()
            .map_err(internal)
    }

    async fn advance(
        &self,
        id: Uuid,
        generation: i64,
        from: LogPosition,
        to: LogPosition,
        at: DateTime<Utc>,
    ) -> Result<bool, AppError> {
        let n = self
            .db
            .execute(
                "UPDATE webhooks SET position = $4, last_error = NULL, updated_at = $5 \
                 WHERE id = $1 AND generation = $2 AND position = $3 AND state = 'active'",
                Args::new()
                    .uuid(id)
                    .int(generation)
                    .int(from.0)
                    .int(to.0)
                    .time(&at),
            )
            .await
            .map_err(store_error)?;
        Ok(n > 0)
    }

    async fn fail(
        &self,
        id: Uuid,
        generation: i64,
        failure: &DeliveryFailure,
        pause: bool,
    ) -> Result<bool, AppError> {
        let error = serde_json::to_string(failure).map_err(internal)?;
        let state = if pause {
            WebhookState::Paused
        } else {
            WebhookState::Active
        };
        let n = self
            .db
            .execute(
                "UPDATE webhooks SET last_error = $3, state = $4, updated_at = $5 \
                 WHERE id = $1 AND generation = $2 AND state = 'active'",
                Args::new()
                    .uuid(id)
                    .int(generation)
                    .text(error)
                    .text(state.as_str())
                    .time(&failure.at),
            )
            .await
            .map_err(store_error)?;
        Ok(n > 0)
    }

    async fn report_position(&self, position: LogPosition) -> Result<(), AppError> {
        self.db
            .execute(
                "UPDATE processors SET cursor_seq = $2, updated_at = $3 WHERE name = $1",
                Args::new().text(WEBHOOKS).int(position.0).time(&Utc::now()),
            )
            .await
            .map_err(store_error)?;
        Ok(())
    }
}
