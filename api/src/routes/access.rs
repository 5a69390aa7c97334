//! Who may call an endpoint, and the middleware that enforces it: `401` without a known
//! token, `403` for a role the endpoint does not allow (admin may do everything), and
//! for a scoped principal what [`super::scope`] says of the path.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::scope::PathScope;
use crate::auth::{Caller, Role};
use crate::state::AppState;

/// The roles of a command endpoint of ingress services.
pub const INGRESS: &[Role] = &[Role::Ingress];
/// The roles of a command endpoint of the LLM service.
pub const LLM: &[Role] = &[Role::Llm];
/// The roles of a command endpoint of both writers.
pub const INGRESS_LLM: &[Role] = &[Role::Ingress, Role::Llm];
/// Readers: every role may read (analysts exist for it; writers may read back).
pub const READERS: &[Role] = &[Role::Ingress, Role::Llm, Role::Analyst];

/// Who may call an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No token needed: health, readiness, metrics, the OpenAPI and AsyncAPI documents.
    Open,
    /// Every role: the queries and the event stream.
    Read,
    /// A command of these roles (and admin); `Idempotency-Key` is honoured.
    Command(&'static [Role]),
    /// Operators only (admin).
    Admin,
    /// A call of these roles (and admin) that is not a command: `Idempotency-Key` does
    /// not apply (the workers' claims and reports: their answers are not facts).
    Call(&'static [Role]),
}

impl Access {
    /// The roles allowed through, admin first; empty for [`Access::Open`].
    pub fn roles(self) -> Vec<Role> {
        let others: &[Role] = match self {
            Self::Open => return Vec::new(),
            Self::Read => READERS,
            Self::Command(roles) | Self::Call(roles) => roles,
            Self::Admin => &[],
        };
        std::iter::once(Role::Admin)
            .chain(others.iter().copied())
            .collect()
    }

    /// Whether a role may be refused (`403`): every role but admin is allowed to read.
    pub fn may_forbid(self) -> bool {
        matches!(self, Self::Command(_) | Self::Admin | Self::Call(_))
    }
}

/// Future of the guard middleware.
pub type GuardFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;

/// Middleware letting only `roles` (and admin) through, and a scoped principal only to
/// what `scope` says it may reach ([`super::scope::check`]).
pub fn guard(
    roles: &'static [Role],
    scope: PathScope,
) -> impl Fn(State<AppState>, Request, Next) -> GuardFuture + Clone + Send + 'static {
    move |State(state): State<AppState>, req: Request, next: Next| {
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            let caller =
                match <Caller as axum::extract::FromRequestParts<AppState>>::from_request_parts(
                    &mut parts, &state,
                )
                .await
                {
                    Ok(caller) => caller,
                    Err(e) => return e.into_response(),
                };
            if let Err(e) = caller.require(roles) {
                return e.into_response();
            }
            if let Err(e) = super::scope::check(scope, &caller, &mut parts, &state).await {
                return e.into_response();
            }
            let signed_in = state
                .spans
                .is_some()
                .then(|| crate::trace::SignedIn(caller.principal().name().to_string()));
            let mut response = next.run(Request::from_parts(parts, body)).await;
            if let Some(signed_in) = signed_in {
                response.extensions_mut().insert(signed_in);
            }
            response
        })
    }
}
