//! The command line of the `project-manager` binary: parse the configuration, then serve
//! until SIGTERM or SIGINT, migrate, rebuild a projection, or make an organization's
//! analyst role. Kept in the library so that test harnesses can build the very same binary
//! (`pm-tests`' `pm-test-server`).

use clap::Parser;

use crate::config::Command;
use crate::{Application, Config};

/// Runs the binary: parses flags and environment (`--version` and `--help` print and
/// exit; a value that does not parse exits with clap's message), logs to stderr
/// (`RUST_LOG`, `PM_LOG_FORMAT`), and runs the chosen subcommand. The exit code says
/// whether it succeeded.
pub async fn run() -> std::process::ExitCode {
    let config = Config::parse();
    crate::logging::init(config.log_format);
    let result = match config.command {
        Some(Command::Migrate) => migrate(&config).await,
        Some(Command::Rebuild { ref name }) => rebuild(&config, name).await,
        Some(Command::AnalystRole { ref organization }) => {
            analyst_role(&config, organization).await
        }
        Some(Command::Serve) | None => serve(&config).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("project-manager: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve(config: &Config) -> Result<(), Box<dyn std::error::Error>> {
    // Thousands of clients need thousands of descriptors: lift the soft limit to the
    // hard one (the default soft limit of 1024 runs out at about a thousand connections).
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::info!(open_files = limit, "file descriptor limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the file descriptor limit"),
    }
    let app = Application::build(config).await?;
    app.run_until(shutdown_signal()).await?;
    Ok(())
}

async fn migrate(config: &Config) -> Result<(), Box<dyn std::error::Error>> {
    config.validate()?;
    let db =
        pm_infrastructure::Database::connect(config.database_url(), 2, config.db_acquire_timeout())
            .await?;
    db.migrate().await?;
    tracing::info!(store = db.kind(), "schema is up to date");
    Ok(())
}

async fn rebuild(config: &Config, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    config.validate()?;
    let db =
        pm_infrastructure::Database::connect(config.database_url(), 4, config.db_acquire_timeout())
            .await?;
    db.migrate().await?;
    pm_infrastructure::read_model::rebuild::ensure_schema(&db).await?;
    let (master, previous) = config.master_keys()?;
    let keys = pm_infrastructure::keys::KeyStore::open(&db, master, previous, config.caches().keys)
        .await?;
    let (_doorbell, rx) = tokio::sync::watch::channel(0);
    let log = pm_infrastructure::log::DbLogReader::new(db.clone(), std::sync::Arc::new(keys), rx);
    let report = pm_infrastructure::read_model::rebuild::rebuild(&db, &log, name).await?;
    println!(
        "rebuilt {name}: generation {} from {} events ({} skipped), continuing after position {}",
        report.generation, report.events, report.skipped, report.cursor
    );
    db.close().await;
    Ok(())
}

/// Creates or updates `organization`'s analyst role. The organization is checked before
/// anything is opened, and a SQLite URL refused before it is (opening would create the
/// file): SQLite is single-tenant.
async fn analyst_role(
    config: &Config,
    organization: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    use pm_infrastructure::analysts::{self, AnalystError};
    config.validate()?;
    analysts::role_name(organization)?;
    if pm_infrastructure::sql::Dialect::of_url(config.database_url())
        == Some(pm_infrastructure::sql::Dialect::Sqlite)
    {
        return Err(AnalystError::SingleTenant.into());
    }
    let db =
        pm_infrastructure::Database::connect(config.database_url(), 2, config.db_acquire_timeout())
            .await?;
    db.migrate().await?;
    let made = analysts::ensure_role(&db, organization).await;
    db.close().await;
    let made = made?;
    println!(
        "{} {}: it may SELECT the read schema's views and sees only the rows of organization \
         {:?}; give it to a login role with GRANT {} TO <login role>",
        if made.created { "created" } else { "updated" },
        analysts::ident(&made.role),
        made.organization,
        analysts::ident(&made.role),
    );
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
