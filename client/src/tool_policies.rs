//! Tool policies (TRUST.md "Tool policies"; set and removed by admin, read by anyone):
//! which tool calls run, wait for a person, or are denied — decided by the service when a
//! worker reports them, whatever the worker says.

use pm_api_types::commands::ToolPolicyInput;
use pm_domain::tool_policy::ToolPolicySet;
use serde::Deserialize;

use crate::http::{segment, Call};
use crate::turns::json;
use crate::{Client, Error};

#[derive(Deserialize)]
struct PolicyList {
    items: Vec<ToolPolicySet>,
}

impl Client {
    /// `PUT /v1/tool-policies/{name}` (admin): the policy under `name` from now on (calls
    /// already reported keep theirs). Safe to repeat: the same policy again writes nothing.
    ///
    /// # Errors
    /// `422 validation_failed` naming the field that breaks its rule, `403 forbidden`, and
    /// the [`Error`]s of any call.
    pub async fn set_tool_policy(
        &self,
        name: &str,
        policy: &ToolPolicyInput,
    ) -> Result<ToolPolicySet, Error> {
        let call = Call::put(
            format!("/v1/tool-policies/{}", segment(name)),
            json(policy)?,
        );
        self.inner.send(&call).await?.json("tool policy")
    }

    /// `DELETE /v1/tool-policies/{name}` (admin).
    ///
    /// # Errors
    /// `404 tool_policy_not_found`, `403 forbidden`, and the [`Error`]s of any call.
    pub async fn remove_tool_policy(&self, name: &str) -> Result<(), Error> {
        let call = Call::delete(format!("/v1/tool-policies/{}", segment(name)));
        self.inner.send(&call).await.map(|_| ())
    }

    /// `GET /v1/tool-policies`: every policy in force, by name.
    ///
    /// # Errors
    /// The [`Error`]s of any call.
    pub async fn tool_policies(&self) -> Result<Vec<ToolPolicySet>, Error> {
        let call = Call::get("/v1/tool-policies".into(), Vec::new());
        let list: PolicyList = self.inner.send(&call).await?.json("tool policies")?;
        Ok(list.items)
    }
}
