//! Fault tests (reliability issue 7), written against the target behaviour: the service
//! as a separate process that is killed, its database stopped or disturbed, its
//! connections abused. A test that fails on the current code is `#[ignore]`d with the
//! defect it demonstrates; `cargo test -p pm-tests --test faults -- --include-ignored`
//! runs them all.
//!
//! Every test takes one process-wide lock ([`support::serial`]): they start processes,
//! servers and thousands of connections and measure latencies, so they run one at a time.

#[macro_use]
mod support;

mod boundary;
mod claim_crash;
mod connections;
mod idempotency_crash;
mod kill_under_load;
mod lag;
mod long_transaction;
mod outage;
mod pool_size;
mod positions;
mod principals_reload;
mod relay_crash;
mod snapshot_restart;
mod span_crash;
mod takeover;
mod validation;
mod webhook_crash;
