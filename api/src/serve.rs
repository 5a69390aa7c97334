//! Serving connections with limits a public service needs: at most `max_connections`
//! open at once (one more is answered `503` with `Retry-After` and closed), and a
//! header-read timeout that hyper starts whenever a connection waits for a request — so a
//! client trickling its headers (slowloris) and a keep-alive connection left idle are both
//! closed after it. On shutdown the listener closes, connections finish their in-flight
//! requests and close, and this returns when every one has — or, once the shutdown grace
//! is over, closes those still open (a client stalled mid-request must not hold a rolling
//! deploy forever) and returns.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

/// The limits connections are served under.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once; beyond, `503` and close.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers once it waits for one
    /// (this also closes keep-alive connections idle that long).
    pub header_read_timeout: Duration,
    /// How long requests in flight get to finish once shutdown begins; then every
    /// connection still open is closed, whatever it was doing.
    pub shutdown_grace: Duration,
}

/// What a connection over the cap is told before it is closed: a `503` problem.
fn over_capacity() -> Vec<u8> {
    let problem = crate::error::ApiError::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "service_unavailable",
        "too many open connections; retry later",
    )
    .problem();
    let body = serde_json::to_string(&problem).unwrap_or_default();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then drains.
///
/// # Errors
/// Never, today: accept errors (out of file descriptors, a connection reset before it was
/// accepted) are logged and the loop goes on.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let builder = Arc::new(builder);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = TaskTracker::new();
    // Cancelled when the grace is over: the connections still open are dropped.
    let closing = CancellationToken::new();
    metrics::gauge!("pm_http_connections").set(0.0);
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and friends: give the connections that close a moment.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            metrics::counter!("pm_http_connections_rejected_total").increment(1);
            crate::metrics::refused(crate::metrics::refusal::CONNECTIONS);
            connections.spawn(turn_away(stream));
            continue;
        };
        let (builder, router, shutdown, closing) = (
            builder.clone(),
            router.clone(),
            shutdown.clone(),
            closing.clone(),
        );
        connections.spawn(async move {
            metrics::gauge!("pm_http_connections").increment(1.0);
            // Who is at the other end: the failed-authentication throttle counts by it.
            let service = TowerToHyperService::new(router.map_request(
                move |mut req: axum::http::Request<hyper::body::Incoming>| {
                    req.extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                    req
                },
            ));
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let served = tokio::select! {
                served = conn.as_mut() => served,
                () = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    tokio::select! {
                        served = conn.as_mut() => served,
                        // Dropping the connection closes it and ends its request.
                        () = closing.cancelled() => Ok(()),
                    }
                }
            };
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            metrics::gauge!("pm_http_connections").decrement(1.0);
            drop(permit);
        });
    }
    connections.close();
    if tokio::time::timeout(limits.shutdown_grace, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            grace_secs = limits.shutdown_grace.as_secs(),
            "shutdown: requests still in flight after the grace; closing their connections"
        );
        closing.cancel();
        connections.wait().await;
    }
    Ok(())
}

/// Answers `503` on a connection over the cap and closes it.
async fn turn_away(mut stream: TcpStream) {
    let answer = async {
        stream.write_all(&over_capacity()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}
