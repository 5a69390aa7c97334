//! Operator reads and controls (admin role): processors' positions and lag, parked
//! events, projection rebuilds.

use pm_api_types::views::{ParkedEvent, ProcessorReport};
use serde::Deserialize;

use crate::http::{segment, Call};
use crate::{Client, Error};

#[derive(Deserialize)]
struct ParkedPage {
    items: Vec<ParkedEvent>,
}

impl Client {
    /// `GET /v1/admin/processors`: every processor's position, lag, lease and last
    /// rebuild, the log's head, and the answering replica's own runner.
    ///
    /// # Errors
    /// `403 forbidden` for roles other than admin, and the [`Error`]s of any call.
    pub async fn processors(&self) -> Result<ProcessorReport, Error> {
        let call = Call::get("/v1/admin/processors".into(), Vec::new());
        self.inner.send(&call).await?.json("processor report")
    }

    /// `GET /v1/admin/processors/{name}/parked`: the events a processor could not apply
    /// and skipped, newest first (at most 500). An unknown processor has none.
    ///
    /// # Errors
    /// `403 forbidden` for roles other than admin, and the [`Error`]s of any call.
    pub async fn parked(&self, processor: &str) -> Result<Vec<ParkedEvent>, Error> {
        let path = format!("/v1/admin/processors/{}/parked", segment(processor));
        let page: ParkedPage = self
            .inner
            .send(&Call::get(path, Vec::new()))
            .await?
            .json("parked events")?;
        Ok(page.items)
    }

    /// `POST /v1/admin/projections/{name}/rebuild`: starts a blue-green rebuild
    /// (`202 Accepted`); its progress shows in [`Client::processors`].
    ///
    /// # Errors
    /// `404 projection_not_found`, `409 rebuild_in_progress` (also when a retry of this
    /// call finds the rebuild it started running), and the [`Error`]s of any call.
    pub async fn rebuild_projection(&self, name: &str) -> Result<(), Error> {
        let path = format!("/v1/admin/projections/{}/rebuild", segment(name));
        self.inner.send(&Call::post(path, None)).await.map(|_| ())
    }
}
