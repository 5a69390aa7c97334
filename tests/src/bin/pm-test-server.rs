//! The service binary for black-box fault tests: exactly `project-manager`'s `main`, built
//! as a target of this package so that its tests can start it as a separate process
//! (`env!("CARGO_BIN_EXE_pm-test-server")`) and kill it.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    project_manager::cli::run().await
}
