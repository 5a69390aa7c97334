//! The exporter's HTTP client: the service's `reqwest` (rustls), so OTLP adds no second
//! HTTP stack and runs on the service's runtime.

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};

/// [`HttpClient`] over a `reqwest::Client`.
#[derive(Debug, Clone)]
pub(super) struct Client(pub(super) reqwest::Client);

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let mut sent = self.0.request(parts.method, parts.uri.to_string());
        for (name, value) in &parts.headers {
            sent = sent.header(name, value);
        }
        let answer = sent.body(body).send().await?;
        let mut response = Response::builder().status(answer.status());
        for (name, value) in answer.headers() {
            response = response.header(name, value);
        }
        let body = answer.bytes().await?;
        Ok(response.body(body)?)
    }
}
