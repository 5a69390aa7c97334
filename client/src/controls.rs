//! Operator controls of the saga machines (admin role): pause, resume and archive a
//! session, kill an agent. Each answers the controlled row as it is after the control,
//! with the log position of the runes it recorded.

use pm_api_types::views::{AgentView, SessionView};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::http::Call;
use crate::{Client, Error, Position};

/// The answer of a control (or of a worker's report on its turn): the row after it and
/// the position of its last rune.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Controlled<T> {
    /// The session, agent or turn after the control or report.
    pub view: T,
    /// The log position of the control's last rune (`X-Event-Position`); pass it to
    /// [`Client::at`] to read what the control changed elsewhere.
    pub position: Option<Position>,
}

impl Client {
    /// `POST /v1/sessions/{conversation_id}/pause`: no new turn is dispatched until
    /// [`resume_session`](Client::resume_session); turns already running go on.
    ///
    /// A control is not idempotent: after a retried call that had gone through, the
    /// repeat answers `409` (e.g. `session_not_active`), which this client does not retry.
    ///
    /// # Errors
    /// `404 session_not_found`, `409` with the machine's code when the session's state
    /// has no such edge, `403 forbidden` for roles other than admin, and the [`Error`]s
    /// of any call.
    pub async fn pause_session(
        &self,
        conversation_id: Uuid,
    ) -> Result<Controlled<SessionView>, Error> {
        self.control(format!("/v1/sessions/{conversation_id}/pause"))
            .await
    }

    /// `POST /v1/sessions/{conversation_id}/resume`: a paused or suspended session
    /// becomes active and dispatches its queued turns again.
    ///
    /// # Errors
    /// As [`pause_session`](Client::pause_session).
    pub async fn resume_session(
        &self,
        conversation_id: Uuid,
    ) -> Result<Controlled<SessionView>, Error> {
        self.control(format!("/v1/sessions/{conversation_id}/resume"))
            .await
    }

    /// `POST /v1/sessions/{conversation_id}/archive`: a closed session moves to cold
    /// storage.
    ///
    /// # Errors
    /// As [`pause_session`](Client::pause_session).
    pub async fn archive_session(
        &self,
        conversation_id: Uuid,
    ) -> Result<Controlled<SessionView>, Error> {
        self.control(format!("/v1/sessions/{conversation_id}/archive"))
            .await
    }

    /// `POST /v1/agents/{id}/kill`: the agent terminates; its running turn and the turns
    /// in its inbox are interrupted.
    ///
    /// # Errors
    /// `404 agent_not_found`, `409` when the agent is already terminated, `403 forbidden`
    /// for roles other than admin, and the [`Error`]s of any call.
    pub async fn kill_agent(&self, agent_id: Uuid) -> Result<Controlled<AgentView>, Error> {
        self.control(format!("/v1/agents/{agent_id}/kill")).await
    }

    async fn control<T: DeserializeOwned>(&self, path: String) -> Result<Controlled<T>, Error> {
        self.controlled(Call::post(path, None)).await
    }

    /// Sends `call` and reads its answer: the view as it is after the call, and the
    /// `X-Event-Position` of what it wrote (the controls', the turns' and the tool calls'
    /// answers all have this shape).
    pub(crate) async fn controlled<T: DeserializeOwned>(
        &self,
        call: Call,
    ) -> Result<Controlled<T>, Error> {
        let answer = self.inner.send(&call).await?;
        Ok(Controlled {
            view: answer.json(&call.path)?,
            position: answer.position()?,
        })
    }
}
