//! Crash hooks for black-box fault tests: with `PM_FAILPOINT=<name>` the process aborts
//! (as `kill -9` would end it: no unwinding, no answer, no graceful shutdown) when it
//! reaches the point of that name. Unset, every hook is a no-op.
//!
//! | name | where |
//! |---|---|
//! | `abort_before_append` | a command was accepted (its `Idempotency-Key` claimed) but nothing was appended |
//! | `abort_after_append` | a command's fact is durable but its answer was not sent |

use std::sync::OnceLock;

fn armed() -> Option<&'static str> {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    ARMED
        .get_or_init(|| std::env::var("PM_FAILPOINT").ok().filter(|v| !v.is_empty()))
        .as_deref()
}

/// Aborts the process if `PM_FAILPOINT` names this point.
pub fn hit(name: &str) {
    if armed() == Some(name) {
        eprintln!("project-manager: PM_FAILPOINT={name} reached; aborting");
        std::process::abort();
    }
}
