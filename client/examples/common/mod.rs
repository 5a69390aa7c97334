//! Command-line reading shared by the examples (each uses what it needs).
#![allow(dead_code)]

use std::time::Duration;

/// The value of `--name <value>`.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// `--name <seconds>` as a duration.
///
/// # Errors
/// When the value is not a whole number of seconds.
pub fn secs(name: &str) -> Result<Option<Duration>, std::num::ParseIntError> {
    Ok(arg(name)
        .map(|s| s.parse::<u64>())
        .transpose()?
        .map(Duration::from_secs))
}
