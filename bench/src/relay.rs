//! The JetStream relay's lag (issue 18): a core NATS subscriber on `<prefix>.>` — the
//! subjects the relay publishes to — times each message from the event's own `time` (the
//! server's clock when it was recorded; the bench runs on the same machine) to its receipt.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::stats::Samples;

/// Samples the relay's lag until `stop`, then for a second more (the tail of the run).
pub async fn relay_lag(url: String, prefix: String, stop: Arc<AtomicBool>) -> Samples {
    let mut samples = Samples::default();
    let Ok(client) = async_nats::connect(&url).await else {
        eprintln!("relay lag: no NATS at {url}");
        return samples;
    };
    let Ok(mut messages) = client.subscribe(format!("{prefix}.>")).await else {
        return samples;
    };
    let mut stopped_at = None;
    loop {
        if stop.load(Ordering::Relaxed) && stopped_at.is_none() {
            stopped_at = Some(tokio::time::Instant::now());
        }
        if stopped_at.is_some_and(|t| t.elapsed() > Duration::from_secs(1)) {
            return samples;
        }
        let Ok(Some(message)) =
            tokio::time::timeout(Duration::from_millis(200), messages.next()).await
        else {
            continue;
        };
        let received = chrono::Utc::now();
        let recorded = serde_json::from_slice::<serde_json::Value>(&message.payload)
            .ok()
            .and_then(|event| chrono::DateTime::parse_from_rfc3339(event["time"].as_str()?).ok());
        if let Some(recorded) = recorded {
            let lag = received - recorded.with_timezone(&chrono::Utc);
            samples.push(lag.num_microseconds().unwrap_or(0) as f64 / 1000.0);
        }
    }
}
