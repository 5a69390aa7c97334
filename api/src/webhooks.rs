//! Wiring of the webhooks: the dispatcher every replica runs (one delivers at a time:
//! the owner of the `webhooks` processor) and the admin routes' handle on the same store.

use std::sync::Arc;

use pm_application::clock::SystemClock;
use pm_application::webhooks::dispatch::{DispatchOptions, Dispatcher, Ports};
use pm_infrastructure::log::DbLogReader;
use pm_infrastructure::processor::DbProcessorStore;
use pm_infrastructure::webhooks::http::HttpDeliverer;
use pm_infrastructure::webhooks::DbWebhookStore;
use pm_infrastructure::Database;

use crate::app::StartError;
use crate::config::Config;
use crate::routes::webhooks::WebhookAdmin;

/// This replica's dispatcher.
pub type WebhookDispatcher =
    Dispatcher<DbWebhookStore, DbProcessorStore, DbLogReader, HttpDeliverer>;

/// How often subscriptions changed on another replica are picked up.
const REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// Builds the dispatcher and the admin handle.
///
/// # Errors
/// [`StartError::Config`] for a bad `PM_WEBHOOK_ALLOWED_HOSTS`, [`StartError::Webhooks`]
/// when no HTTP client can be built.
pub fn build(
    config: &Config,
    db: &Database,
    processors: DbProcessorStore,
    log: DbLogReader,
    owner: &str,
    ownership_check: std::time::Duration,
) -> Result<(WebhookDispatcher, WebhookAdmin), StartError> {
    let settings = config.webhooks()?;
    let store = DbWebhookStore::new(db.clone());
    let deliverer = HttpDeliverer::new(settings.policy.clone(), settings.timeout)
        .map_err(|e| StartError::Webhooks(e.to_string()))?;
    let dispatcher = Dispatcher::new(
        Ports {
            store: Arc::new(store.clone()),
            processors,
            log,
            deliverer: Arc::new(deliverer),
            clock: Arc::new(SystemClock),
        },
        DispatchOptions {
            retry: settings.retry,
            refresh: REFRESH,
            poll: config.log_poll(),
            ownership_check,
            batch: 200,
            owner: owner.to_string(),
        },
    );
    let admin = WebhookAdmin {
        store,
        policy: Arc::new(settings.policy),
        changes: dispatcher.changes(),
    };
    Ok((dispatcher, admin))
}
