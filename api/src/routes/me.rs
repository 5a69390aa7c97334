//! `GET /v1/me`: who the service takes the caller for — what a client (or a person
//! debugging an identity provider's claims) checks before acting.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Caller, Source};

/// The signed-in principal.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    /// The name every event it causes records as `principal`.
    pub principal: String,
    /// Its roles (`admin`, `ingress`, `llm`, `analyst`).
    pub roles: Vec<String>,
    /// The organizations it sees; `["*"]`: all, and the conversations without one.
    pub organizations: Vec<String>,
    /// The actors it may speak as; `null`: as its roles allow.
    pub actors: Option<Vec<uuid::Uuid>>,
    /// Where its credential came from: `token` (`PM_AUTH_TOKENS` or the principals file),
    /// `jwt` (the identity provider), `open` (no principals configured).
    #[schema(value_type = String, example = "token")]
    pub source: Source,
}

/// `GET /v1/me`.
#[utoipa::path(get, path = "/v1/me", tag = "operations",
    responses((status = 200, description = "The signed-in principal", body = Me)))]
pub async fn me(caller: Caller) -> Json<Me> {
    let p = caller.principal();
    Json(Me {
        principal: p.name().to_string(),
        roles: p.roles().map(|r| r.as_str().to_string()).collect(),
        organizations: p.organizations().names(),
        actors: p.actors().map(|a| a.iter().copied().collect()),
        source: p.source(),
    })
}
