//! The workers' protocol (WORKERS.md) as typed calls: claim a turn, renew, release or end
//! the claim, report usage, and the operator's interrupt. A claim is a lease under a new
//! epoch; [`TurnFence`] is what fences the claim's commands and reports.
//!
//! Most workers want [`Worker`](crate::Worker), which loops over these calls and renews
//! the lease in the background; these are for workers that manage leases themselves.
//!
//! Retries (see [`RetryPolicy`](crate::RetryPolicy)): claims and reports do not honour
//! `Idempotency-Key` (they are not commands), so a retry after a lost answer does the
//! call again:
//!
//! | call | a retry after a lost answer | so it is retried |
//! |---|---|---|
//! | [`claim`](crate::Client::claim) | claims again (maybe another turn); the lost claim holds its turn until its lease expires, then the turn is claimable again | yes |
//! | [`heartbeat`](crate::Client::heartbeat) | renews again | yes |
//! | [`release`](crate::Client::release), [`report_error`](crate::Client::report_error) | answers `409 turn_fenced` (the claim is gone) | yes |
//! | [`interrupt_turn`](crate::Client::interrupt_turn) | answers `409 turn_transition_not_allowed` | yes |
//! | [`report_usage`](crate::Client::report_usage) | would count the tokens twice | only when the connection failed |

mod types;

use std::time::Duration;

use pm_api_types::views::TurnView;
use pm_domain::text::Label;
use serde::Serialize;
use uuid::Uuid;

pub use types::{ClaimContext, ClaimRequest, ClaimedTurn, Heartbeat, TraceContext, TurnFence};

use crate::http::{Call, Retries};
use crate::{Client, Controlled, Error};

/// How much longer than its `wait_ms` a claim may take to answer (the service reads the
/// claim's context once its read model has the claim).
const CLAIM_ANSWER_MARGIN: Duration = Duration::from_secs(10);

/// The reports' bodies.
#[derive(Serialize)]
struct LeaseBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_ms: Option<u64>,
}

#[derive(Serialize)]
struct ReasonBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error_type: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct UsageBody {
    input_tokens: u64,
    output_tokens: u64,
}

pub(crate) fn json(body: &impl Serialize) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(body)
        .map_err(|e| Error::InvalidInput(format!("the body does not serialize: {e}")))
}

/// Milliseconds of a duration, as the service takes them.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A text the service takes as a label (1–1024 bytes, not blank, no NUL).
pub(crate) fn checked<'a>(what: &str, text: &'a str) -> Result<&'a str, Error> {
    Label::parse(text)
        .map(|_| text)
        .map_err(|e| Error::InvalidInput(format!("{what}: {e}")))
}

/// `text` cut to at most 1024 bytes on a character boundary (an error message may be
/// longer than the service keeps).
fn clipped(text: &str) -> &str {
    let mut end = text.len().min(1024);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The calls of workers (llm, admin) and the operator's interrupt (admin).
impl Client {
    /// `POST /v1/turns/claim`: the oldest claimable turn matching `request`, leased to the
    /// caller under a new epoch, with what it needs to work it; `None` when nothing became
    /// claimable within the request's `wait`. The attempt's timeout is stretched to cover
    /// the wait.
    ///
    /// Not idempotent: a retry (of a timeout, a broken connection, a `503`) after an
    /// answer was lost **claims again** — maybe another turn. Nothing is worked twice (the
    /// lost claim's epoch is never used), but the lost claim holds its turn until its lease
    /// expires; the turn is then claimable again (a turn whose claims keep expiring ends
    /// in `turn.error` after `PM_TURN_MAX_CLAIMS`). Keep leases short enough for that delay
    /// to be acceptable.
    ///
    /// # Errors
    /// `422 validation_failed` for a `wait` over 30 s, a lease outside 1 s–10 min or a
    /// worker name outside 1–200 characters, `403 forbidden` for roles other than llm and
    /// admin, and the [`Error`]s of any call.
    pub async fn claim(&self, request: ClaimRequest) -> Result<Option<ClaimedTurn>, Error> {
        let mut call = Call::post("/v1/turns/claim".into(), Some(json(&request.body())?));
        let wait = request.wait.unwrap_or_default();
        call.timeout = Some(self.inner.timeout.max(wait + CLAIM_ANSWER_MARGIN));
        let answer = self.inner.send(&call).await?;
        if answer.status == 204 {
            return Ok(None);
        }
        let mut claimed: ClaimedTurn = answer.json(&call.path)?;
        claimed.position = answer.position()?;
        Ok(Some(claimed))
    }

    /// `POST /v1/turns/{id}/heartbeat`: the claim holds its turn `lease` longer (from now;
    /// `None`: the service's default lease). Writes no event.
    ///
    /// # Errors
    /// `409 turn_fenced` when the claim no longer holds the turn (a newer claim, its lease
    /// expired, the turn ended or was released), `404 turn_not_found`, and the [`Error`]s of
    /// any call.
    pub async fn heartbeat(
        &self,
        fence: TurnFence,
        lease: Option<Duration>,
    ) -> Result<Heartbeat, Error> {
        let body = LeaseBody {
            lease_ms: lease.map(millis),
        };
        let mut call = self.report_call(fence, "heartbeat", &body)?;
        // A heartbeat that answers after its lease has ended is of no use.
        if let Some(lease) = lease {
            call.timeout = Some(self.inner.timeout.min(lease.max(Duration::from_secs(1))));
        }
        self.inner.send(&call).await?.json(&call.path)
    }

    /// `POST /v1/turns/{id}/release`: the claim gives its turn back (`turn.released`, with
    /// `reason` or `released`); the turn is claimable again under a higher epoch.
    ///
    /// # Errors
    /// `409 turn_fenced` when the claim no longer holds the turn (also when a retry finds
    /// the release done), [`Error::InvalidInput`] for a reason that is empty or over 1024
    /// bytes, and the [`Error`]s of any call.
    pub async fn release(
        &self,
        fence: TurnFence,
        reason: Option<&str>,
    ) -> Result<Controlled<TurnView>, Error> {
        let reason = reason.map(|r| checked("reason", r)).transpose()?;
        let call = self.report_call(fence, "release", &ReasonBody { reason })?;
        self.controlled(call).await
    }

    /// `POST /v1/turns/{id}/error`: the turn ends in `turn.error` with `error_type` (e.g.
    /// `model_error`, `rate_limited`); it counts toward the session's error threshold.
    /// `message` is cut to the 1024 bytes the service keeps.
    ///
    /// # Errors
    /// `409 turn_fenced` when the claim no longer holds the turn (also when a retry finds
    /// the report done), [`Error::InvalidInput`] for an empty `error_type` or `message`, and
    /// the [`Error`]s of any call.
    pub async fn report_error(
        &self,
        fence: TurnFence,
        error_type: &str,
        message: &str,
    ) -> Result<Controlled<TurnView>, Error> {
        let body = ErrorBody {
            error_type: checked("error_type", error_type)?,
            message: checked("message", clipped(message))?,
        };
        let call = self.report_call(fence, "error", &body)?;
        self.controlled(call).await
    }

    /// `POST /v1/turns/{id}/usage`: tokens spent on the turn, added to its totals (and to
    /// its agent's and session's, which a session budget counts).
    ///
    /// Retried only when the connection failed: a repeat that reached the service would
    /// count the tokens twice, so after a lost answer the error is yours to judge.
    ///
    /// # Errors
    /// `409 turn_fenced` when the claim no longer holds the turn, and the [`Error`]s of any
    /// call.
    pub async fn report_usage(
        &self,
        fence: TurnFence,
        input_tokens: u64,
        output_tokens: u64,
    ) -> Result<Controlled<TurnView>, Error> {
        let body = UsageBody {
            input_tokens,
            output_tokens,
        };
        let mut call = self.report_call(fence, "usage", &body)?;
        call.retries = Retries::Unsent;
        self.controlled(call).await
    }

    /// `POST /v1/turns/{id}/interrupt` (admin): the turn ends `interrupted` (reason
    /// `operator` unless given); its worker's claim is fenced off.
    ///
    /// # Errors
    /// `409 turn_transition_not_allowed` for a queued or ended turn, and when a completion
    /// won the race (also when a retry finds the interrupt done); `404 turn_not_found`,
    /// `403 forbidden` for roles other than admin, and the [`Error`]s of any call.
    pub async fn interrupt_turn(
        &self,
        turn_id: Uuid,
        reason: Option<&str>,
    ) -> Result<Controlled<TurnView>, Error> {
        let reason = reason.map(|r| checked("reason", r)).transpose()?;
        let body = json(&ReasonBody { reason })?;
        let call = Call::post(format!("/v1/turns/{turn_id}/interrupt"), Some(body));
        self.controlled(call).await
    }

    /// A report on the fence's turn, carrying the fence.
    pub(crate) fn report_call(
        &self,
        fence: TurnFence,
        what: &str,
        body: &impl Serialize,
    ) -> Result<Call, Error> {
        let path = format!("/v1/turns/{}/{what}", fence.turn_id);
        let mut call = Call::post(path, Some(json(body)?));
        fence.apply(&mut call.headers);
        Ok(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_checked_and_messages_clipped() {
        assert!(checked("reason", "done").is_ok());
        assert!(matches!(
            checked("reason", " "),
            Err(Error::InvalidInput(e)) if e.starts_with("reason")
        ));
        let long = "é".repeat(600); // 1200 bytes
        let cut = clipped(&long);
        assert!(cut.len() <= 1024 && cut.len() >= 1022, "{}", cut.len());
        assert_eq!(clipped("short"), "short");
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
    }
}
