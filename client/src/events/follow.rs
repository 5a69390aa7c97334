//! The follower: the log over Server-Sent Events as a stream of [`LogEvent`]s that
//! survives dropped connections. It remembers the last position it yielded and
//! reconnects with `Last-Event-ID` (with backoff), so it never yields an event twice and
//! never skips one.

use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::{Event as SseEvent, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderValue, ACCEPT};

use super::{EventContent, EventQuery, LogEvent};
use crate::http::{error_answer, Answer, Call, Inner};
use crate::retry::jitter;
use crate::{Client, Error, Position, RetryPolicy, TransportKind};

impl Client {
    /// Follows the log (`GET /v1/events` as Server-Sent Events) from `query.after` on:
    /// every matching event in log order, live, forever.
    ///
    /// - With [`EventQuery::conversation`], the first item is the conversation's
    ///   [`Snapshot`](crate::Snapshot) (once, not again on reconnects).
    /// - A dropped or silent connection (see
    ///   [`ClientBuilder::stream_idle_timeout`](crate::ClientBuilder::stream_idle_timeout))
    ///   is reopened after a backoff with `Last-Event-ID` = the last position yielded; the
    ///   follower keeps trying as long as the failures are retryable (the service
    ///   restarting, a `503`). Before the first connection it gives up after the retry
    ///   policy's attempts, so a wrong URL is reported.
    /// - An event whose envelope does not parse is yielded as an `Err` item and the
    ///   stream goes on; a refusal (`401`, `403`, `400`, …) is yielded and ends it.
    ///
    /// Store `event.position` once an event is processed and pass it back with
    /// [`EventQuery::after`] to resume after a restart of your own process.
    ///
    /// ```no_run
    /// # async fn run(client: pm_client::Client) -> Result<(), pm_client::Error> {
    /// use futures::StreamExt;
    /// use pm_client::{EventContent, EventQuery, Fact};
    ///
    /// let query = EventQuery::new().with_type("project_manager.message.added");
    /// let mut log = client.follow(query);
    /// while let Some(event) = log.next().await {
    ///     let event = event?;
    ///     if let EventContent::Fact(Fact::MessageAdded(m)) = &event.content {
    ///         println!("{}: {}", m.actor_id, m.content.as_str());
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn follow(
        &self,
        query: EventQuery,
    ) -> impl Stream<Item = Result<LogEvent, Error>> + Send + Unpin + 'static {
        let inner = self.inner.clone();
        async_stream::stream! {
            let mut resume = Resume::new(query.after.clone());
            let mut failures = 0u32;
            let mut connected = false;
            loop {
                let error = match connect(&inner, &query, resume.last_event_id()).await {
                    Err(error) => error,
                    Ok(response) => {
                        connected = true;
                        let mut events = Box::pin(response.bytes_stream().eventsource());
                        loop {
                            match tokio::time::timeout(inner.stream_idle_timeout, events.next()).await {
                                Err(_) => break idle(inner.stream_idle_timeout),
                                Ok(None) => break dropped("the service ended the stream"),
                                Ok(Some(Err(e))) => break dropped(e.to_string()),
                                Ok(Some(Ok(sse))) => match resume.admit(&sse) {
                                    Admit::Yield(event) => {
                                        failures = 0;
                                        yield Ok(*event);
                                    }
                                    Admit::Skip => {}
                                    Admit::Fail(e) => yield Err(e),
                                },
                            }
                        }
                    }
                };
                failures += 1;
                if gives_up(&inner.retry, &error, failures, connected) {
                    yield Err(error);
                    return;
                }
                let delay = reconnect_delay(&inner.retry, failures, &error, jitter());
                tracing::debug!(%error, ?delay, last = ?resume.last_event_id(), "event stream reconnecting");
                tokio::time::sleep(delay).await;
            }
        }
        .boxed()
    }
}

/// Opens the stream after `last`.
async fn connect(
    inner: &Arc<Inner>,
    query: &EventQuery,
    last: Option<&Position>,
) -> Result<reqwest::Response, Error> {
    let call = Call::get("/v1/events".into(), query.filters());
    let mut req = inner
        .request(&call)
        .header(ACCEPT, HeaderValue::from_static("text/event-stream"));
    if let Some(last) = last {
        req = req.header("last-event-id", last.as_str());
    }
    let response = tokio::time::timeout(inner.timeout, req.send())
        .await
        .map_err(|_| idle(inner.timeout))?
        .map_err(Error::from_reqwest)?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map(|b| b.to_vec())
            .unwrap_or_default();
        return Err(error_answer(&Answer {
            status,
            headers,
            body,
        }));
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !content_type.starts_with("text/event-stream") {
        return Err(Error::decode(
            "event stream",
            format!("expected text/event-stream, got {content_type:?}"),
        ));
    }
    Ok(response)
}

fn idle(after: Duration) -> Error {
    Error::Transport {
        kind: TransportKind::Timeout,
        source: format!("no data for {after:?}").into(),
    }
}

fn dropped(why: impl Into<String>) -> Error {
    Error::Transport {
        kind: TransportKind::Other,
        source: why.into().into(),
    }
}

/// Whether the follower stops after `failures` consecutive failures ending in `error`:
/// on a failure that is not retryable, or before it ever connected once the retry
/// policy's attempts are spent.
pub(crate) fn gives_up(
    policy: &RetryPolicy,
    error: &Error,
    failures: u32,
    connected: bool,
) -> bool {
    !error.is_retryable() || (!connected && failures >= policy.attempts())
}

/// The wait before reconnecting: the policy's backoff, or longer if the service asked.
pub(crate) fn reconnect_delay(
    policy: &RetryPolicy,
    failures: u32,
    error: &Error,
    jitter: f64,
) -> Duration {
    let backoff = policy.backoff(failures, jitter);
    error
        .retry_after()
        .map_or(backoff, |asked| asked.max(backoff))
}

/// The follower's bookkeeping: where to resume, and what not to yield again.
#[derive(Debug, Default)]
pub(crate) struct Resume {
    last: Option<Position>,
    snapshot_seen: bool,
}

/// What to do with a received SSE event.
#[derive(Debug)]
pub(crate) enum Admit {
    /// Yield it.
    Yield(Box<LogEvent>),
    /// Already yielded (a repeat after a reconnect, or a later snapshot).
    Skip,
    /// It does not parse: yield the error and go on.
    Fail(Error),
}

impl Resume {
    /// Bookkeeping for a stream that starts after `after`.
    pub(crate) fn new(after: Option<Position>) -> Self {
        Self {
            last: after,
            snapshot_seen: false,
        }
    }

    /// The `Last-Event-ID` to reconnect with.
    pub(crate) fn last_event_id(&self) -> Option<&Position> {
        self.last.as_ref()
    }

    /// Types a received event and decides whether it is new.
    pub(crate) fn admit(&mut self, sse: &SseEvent) -> Admit {
        if sse.event == "lagged" {
            // The service ends a stream that fell too far behind its log tail; the
            // follower reconnects after the last event it yielded.
            return Admit::Skip;
        }
        if sse.event == "snapshot" {
            if std::mem::replace(&mut self.snapshot_seen, true) {
                return Admit::Skip;
            }
            return match LogEvent::from_snapshot(&sse.data) {
                Ok(event) => Admit::Yield(Box::new(event)),
                Err(e) => Admit::Fail(e),
            };
        }
        match LogEvent::from_cloud_event(&sse.data) {
            Ok(event) if self.last.as_ref() == Some(&event.position) => Admit::Skip,
            Ok(event) => {
                debug_assert!(!matches!(event.content, EventContent::Snapshot(_)));
                self.last = Some(event.position.clone());
                Admit::Yield(Box::new(event))
            }
            Err(e) => {
                // Move past it: a reconnect must not deliver it (or stall on it) again.
                if let Ok(p) = Position::new(sse.id.clone()) {
                    self.last = Some(p);
                }
                Admit::Fail(e)
            }
        }
    }
}

#[cfg(test)]
mod tests;
