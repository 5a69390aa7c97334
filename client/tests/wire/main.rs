//! The client on the wire, against a scripted server: retries (which, how often, with
//! which key, how long), headers and query parameters, the follower's resumption, and a
//! worker's claims, heartbeats and releases; tool calls, their reports and the executor;
//! who the credential is.

mod fake;

mod commands;
mod follow;
mod me;
mod reads;
mod tools;
mod workers;

use std::time::Duration;

use pm_client::{Client, RetryPolicy};

/// A client of `base` with quick retries (4 attempts, 10–100 ms backoff).
pub fn client(base: &str) -> Client {
    Client::builder(base)
        .token("t0k3n")
        .timeout(Duration::from_millis(500))
        .retry(
            RetryPolicy::default()
                .max_attempts(4)
                .base_delay(Duration::from_millis(10))
                .max_delay(Duration::from_millis(100)),
        )
        .build()
        .expect("client")
}

/// Reads carry the token and no idempotency key; a client without a token sends no
/// `Authorization`; every request names the client.
#[tokio::test]
async fn reads_carry_the_token_and_no_key() {
    let fake = fake::Fake::start(|_, _| {
        fake::Reply::Answer(200, vec![], r#"{"items":[],"next_cursor":null}"#.into())
    })
    .await;
    client(&fake.base)
        .read()
        .tasks(&pm_client::TaskQuery::new())
        .await
        .expect("page");
    Client::new(&fake.base)
        .expect("client")
        .read()
        .tasks(&pm_client::TaskQuery::new())
        .await
        .expect("page");
    let seen = fake.seen();
    assert_eq!(seen[0].header("authorization"), Some("Bearer t0k3n"));
    assert_eq!(seen[0].header("idempotency-key"), None);
    assert_eq!(seen[1].header("authorization"), None);
    assert!(seen.iter().all(|s| s
        .header("user-agent")
        .is_some_and(|u| u.starts_with("pm-client/"))));
}
