//! The webhook deliverer against a real socket: allowed, it posts the body with the
//! Standard Webhooks headers and reads the status; under the default policy it reaches no
//! loopback address, neither written as an address nor through a name that resolves to
//! one (the connect-time guard against DNS rebinding) — the receiver sees no connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pm_application::trace::TraceContext;
use pm_application::webhooks::policy::HostPolicy;
use pm_application::webhooks::{Deliverer, Delivery, DeliveryError};
use pm_infrastructure::webhooks::http::HttpDeliverer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Mutex;

/// A one-route HTTP receiver answering `status`; counts connections, keeps the requests.
async fn receiver(status: u16) -> (u16, Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = listener.local_addr().expect("addr").port();
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (count, seen) = (connections.clone(), requests.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = vec![0u8; 64 * 1024];
            let mut read = 0;
            // Enough for the test's small requests: headers and body arrive at once.
            while read == 0 || !String::from_utf8_lossy(&buf[..read]).contains("\r\n\r\n{") {
                match socket.read(&mut buf[read..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
            seen.lock()
                .await
                .push(String::from_utf8_lossy(&buf[..read]).to_string());
            let answer = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: 4\r\nconnection: close\r\n\r\nnope"
            );
            let _ = socket.write_all(answer.as_bytes()).await;
        }
    });
    (port, connections, requests)
}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn delivery(url: String) -> Delivery {
    Delivery {
        url,
        id: "turn:t:1".into(),
        timestamp: 1_700_000_000,
        signature: "v1,c2ln".into(),
        body: br#"{"id":"turn:t:1"}"#.to_vec(),
        trace: Some(TraceContext {
            traceparent: TRACEPARENT.into(),
            tracestate: Some("congo=t61rcWkgMzE".into()),
        }),
    }
}

/// Delivers to `/hook` on the loopback receiver at `port`, with loopback allowed.
async fn deliver_to_loopback(port: u16) -> Result<(), DeliveryError> {
    let deliverer = HttpDeliverer::new(
        HostPolicy::parse("127.0.0.1").expect("policy"),
        Duration::from_secs(5),
    )
    .expect("client");
    let url = format!("http://127.0.0.1:{port}/hook");
    deliverer.deliver(&delivery(url)).await
}

#[tokio::test]
async fn given_an_allowed_receiver_when_delivered_then_the_headers_and_status_come_through() {
    let (port, _, requests) = receiver(204).await;
    assert_eq!(deliver_to_loopback(port).await, Ok(()));
    let request = requests.lock().await[0].to_ascii_lowercase();
    let traceparent = format!("traceparent: {TRACEPARENT}");
    for line in [
        "post /hook http/1.1",
        "content-type: application/json",
        "webhook-id: turn:t:1",
        "webhook-timestamp: 1700000000",
        "webhook-signature: v1,c2ln",
        traceparent.as_str(),
        "tracestate: congo=t61rcwkgmze",
        r#"{"id":"turn:t:1"}"#,
    ] {
        assert!(request.contains(line), "{line} in {request}");
    }
}

#[tokio::test]
async fn given_a_failing_receiver_when_delivered_then_its_status_and_answer_are_the_error() {
    let (port, _, _) = receiver(503).await;
    let error = deliver_to_loopback(port).await.expect_err("a 503 fails");
    assert_eq!(error.status, Some(503));
    assert!(
        error.message.contains("503") && error.message.contains("nope"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn given_the_default_policy_when_a_loopback_receiver_is_named_then_no_connection_is_made() {
    let (port, connections, _) = receiver(204).await;
    let deliverer =
        HttpDeliverer::new(HostPolicy::default(), Duration::from_secs(5)).expect("client");
    for url in [
        format!("http://127.0.0.1:{port}/hook"),
        format!("http://localhost:{port}/hook"),
    ] {
        let error = deliverer
            .deliver(&delivery(url.clone()))
            .await
            .expect_err("refused");
        assert_eq!(error.status, None, "{url}");
        assert!(
            error.message.contains("not an allowed address")
                || error.message.contains("no allowed address"),
            "{url}: {}",
            error.message
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "the receiver saw nothing"
    );
}

/// Set in the child process of [`given_a_proxy_in_the_environment_when_delivered_then_it_is_not_used`].
const PROXY_CHILD: &str = "PM_TEST_WEBHOOK_PROXY_CHILD";

#[tokio::test]
async fn given_a_proxy_in_the_environment_when_delivered_then_it_is_not_used() {
    // A proxy would resolve and connect to the receiver itself, out of the policy's
    // reach (no SSRF guard sees its connection): the deliverer must ignore the
    // environment's proxies. The delivery runs in a child process of this test binary
    // started with the proxy in its environment (and no `NO_PROXY`), so no other test's
    // thread reads an environment being changed under it.
    if std::env::var_os(PROXY_CHILD).is_some() {
        let (port, connections, _) = receiver(204).await;
        assert_eq!(deliver_to_loopback(port).await, Ok(()));
        assert_eq!(connections.load(Ordering::SeqCst), 1);
        return;
    }
    let proxy = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let proxy_url = format!("http://{}", proxy.local_addr().expect("addr"));
    let proxied = Arc::new(AtomicUsize::new(0));
    let count = proxied.clone();
    tokio::spawn(async move {
        while let Ok((_socket, _)) = proxy.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut child = std::process::Command::new(std::env::current_exe().expect("this test"));
    child
        .args([
            "--exact",
            "given_a_proxy_in_the_environment_when_delivered_then_it_is_not_used",
            "--test-threads",
            "1",
        ])
        .env(PROXY_CHILD, "1")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    for name in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
    ] {
        child.env(name, &proxy_url);
    }
    let out = tokio::task::spawn_blocking(move || child.output())
        .await
        .expect("joined")
        .expect("the child runs");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("1 passed"),
        "the child ran the delivery: {report}"
    );
    assert_eq!(proxied.load(Ordering::SeqCst), 0, "the proxy was not used");
}
