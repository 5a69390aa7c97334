//! Black-box tests of `pm-client`: the client against the real service on port 0, on
//! SQLite and on a fresh PostgreSQL database — every command and read, idempotency,
//! read-your-writes, the log and its follower across a service restart, workers (claims,
//! heartbeats, fenced commands, releases), tool calls (approvals, the executor, resumed
//! turns), and the example programs.
//!
//! ```sh
//! cargo test -p pm-client                # unit, wire and doc tests; builds the examples
//! cargo test -p pm-tests --test client   # these (PostgreSQL from PM_TEST_PG_URL)
//! ```
//!
//! The client is used as its users use it: through `pm_client` only (its re-exports of
//! the service's types included); only starting the service goes through `pm_tests`.

mod support;

mod commands;
mod events;
mod examples;
mod fencing;
mod forgotten;
mod idempotency;
mod pages;
mod reads;
mod resume;
mod sagas;
mod tools;
mod workers;

use futures::StreamExt;
use pm_client::{ClaimRequest, Client, EventQuery};
use pm_tests::{on_both_backends, TestDb, TestService};

/// In open mode (no tokens configured) a client without a token may do everything, and
/// the facts record the role `open`.
async fn a_client_without_a_token_works_in_open_mode(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let c = Client::new(&svc.base).expect("client");
    let w = support::world(&c, "open").await;
    let actor = c.after(&w.message).actor(w.human.entity.id).await;
    assert_eq!(actor.expect("actor"), w.human.entity);
    let first = c.follow(EventQuery::new()).next().await;
    let first = first.expect("an item").expect("an event");
    let role = first.attributes.and_then(|a| a.role);
    assert_eq!(role.as_deref(), Some("open"));
    // A worker too: the world's turns are claimable without a token.
    let wait = std::time::Duration::from_secs(5);
    let claimed = c.claim(ClaimRequest::new().wait(wait)).await;
    assert!(claimed.expect("open mode claims").is_some());
    svc.stop().await;
}

on_both_backends!(a_client_without_a_token_works_in_open_mode);
