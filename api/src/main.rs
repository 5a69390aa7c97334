//! The `project-manager` binary: a thin `main` over [`project_manager::cli::run`].

/// mimalloc: the service allocates many small, short-lived objects per request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    project_manager::cli::run().await
}
