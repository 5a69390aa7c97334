//! The `project-manager` binary: parse the configuration, start, serve until SIGTERM or
//! SIGINT.

use clap::Parser;
use project_manager::config::Command;
use project_manager::{Application, Config};
use tracing_subscriber::EnvFilter;

/// mimalloc: the service allocates many small, short-lived objects per request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("info,sqlx::postgres::notice=warn")),
        )
        .init();
    let config = Config::parse();
    let result = match config.command {
        Some(Command::Migrate) => migrate(&config).await,
        Some(Command::Rebuild { ref name }) => rebuild(&config, name).await,
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
    let app = Application::build(config).await?;
    app.run_until(shutdown_signal()).await?;
    Ok(())
}

async fn migrate(config: &Config) -> Result<(), Box<dyn std::error::Error>> {
    config.validate()?;
    let db = pm_infrastructure::Database::connect(config.database_url(), 2).await?;
    db.migrate().await?;
    tracing::info!(store = db.kind(), "schema is up to date");
    Ok(())
}

async fn rebuild(config: &Config, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    config.validate()?;
    let db = pm_infrastructure::Database::connect(config.database_url(), 4).await?;
    db.migrate().await?;
    pm_infrastructure::read_model::rebuild::ensure_schema(&db).await?;
    let (_doorbell, rx) = tokio::sync::watch::channel(0);
    let log = pm_infrastructure::log::DbLogReader::new(db.clone(), rx);
    let report = pm_infrastructure::read_model::rebuild::rebuild(&db, &log, name).await?;
    println!(
        "rebuilt {name}: generation {} from {} events ({} skipped), continuing after position {}",
        report.generation, report.events, report.skipped, report.cursor
    );
    db.close().await;
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
