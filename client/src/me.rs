//! [`Client::me`]: who the service takes this client's credential for (TRUST.md
//! "Principals") — what a deployment checks before relying on a token or a JWT.

use serde::Deserialize;

use crate::http::Call;
use crate::{Client, Error};

/// The principal a credential authenticates as (`GET /v1/me`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Me {
    /// Its name: what the log records as `principal` of what it causes.
    pub principal: String,
    /// Its roles (`ingress`, `llm`, `analyst`, `admin`).
    pub roles: Vec<String>,
    /// The organizations it may see; `["*"]`: every one, and the conversations without one.
    pub organizations: Vec<String>,
    /// The only actors it may speak as; `None`: any its roles allow.
    #[serde(default)]
    pub actors: Option<Vec<String>>,
    /// Where the credential came from: `token`, `jwt` (`open` when the service runs
    /// without credentials).
    pub source: String,
}

impl Client {
    /// `GET /v1/me`: the principal this client's credential authenticates as.
    ///
    /// ```no_run
    /// # async fn run(client: pm_client::Client) -> Result<(), pm_client::Error> {
    /// let me = client.me().await?;
    /// println!("{} ({}) sees {:?}", me.principal, me.roles.join(","), me.organizations);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `401 unauthorized` for a missing, unknown or expired credential, and the
    /// [`Error`]s of any call.
    pub async fn me(&self) -> Result<Me, Error> {
        let call = Call::get("/v1/me".into(), Vec::new());
        self.inner.send(&call).await?.json("principal")
    }
}
