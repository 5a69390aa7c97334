//! What a path names, and the check that a scoped principal may see it (TRUST.md
//! "Organizations"): a read, command, claim report, approval or control aimed at
//! something of another organization answers exactly as if it did not exist — the
//! endpoint's own `404` code and detail. One rule per path prefix, derived from the
//! endpoint table's templates, so a new endpoint under `/v1/turns/{id}` is checked without
//! anyone remembering to. Lists, statistics, the log and claims are scoped by the stores
//! instead (they take the caller's [`Scope`](pm_application::scope::Scope)).

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use axum::http::StatusCode;
use pm_application::scope::{OwnerStore, Target, Visibility};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// What an endpoint's path names, for the scope check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathScope {
    /// Nothing of one organization: lists and the log scope themselves; registering an
    /// actor, `GET /v1/me`, claims; webhooks scope their own subscriptions.
    Unnamed,
    /// The thing the path parameter `param` names.
    Names(Named),
    /// The whole service (processors, projection rebuilds): `*` principals only.
    Service,
}

/// A path parameter naming something, and how a missing one is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    /// Whose organization decides.
    pub target: Target,
    /// The parameter.
    pub param: &'static str,
    /// The endpoint's `404` code for a missing one.
    pub code: &'static str,
    /// What the `404` detail calls it.
    pub what: &'static str,
}

const fn named(
    target: Target,
    param: &'static str,
    code: &'static str,
    what: &'static str,
) -> PathScope {
    PathScope::Names(Named {
        target,
        param,
        code,
        what,
    })
}

/// The scope rule of the endpoint at `path` (a template of the endpoint table).
pub fn path_scope(path: &str) -> PathScope {
    let rules: [(&str, PathScope); 9] = [
        (
            "/v1/actors/{id}",
            named(Target::Actor, "id", "actor_not_found", "actor"),
        ),
        (
            "/v1/conversations/{id}",
            named(
                Target::Conversation,
                "id",
                "conversation_not_found",
                "conversation",
            ),
        ),
        (
            "/v1/tasks/{id}",
            named(Target::Task, "id", "task_not_found", "task"),
        ),
        (
            "/v1/sessions/{conversation_id}",
            named(
                Target::Conversation,
                "conversation_id",
                "session_not_found",
                "session",
            ),
        ),
        (
            "/v1/agents/{id}",
            named(Target::Agent, "id", "agent_not_found", "agent"),
        ),
        (
            "/v1/turns/{id}",
            named(Target::Turn, "id", "turn_not_found", "turn"),
        ),
        (
            "/v1/turns/{turn_id}",
            named(Target::Turn, "turn_id", "turn_not_found", "turn"),
        ),
        ("/v1/admin/", PathScope::Service),
        // Policies govern every organization's calls and name organizations: `*` only.
        ("/v1/tool-policies", PathScope::Service),
    ];
    rules
        .into_iter()
        .find(|(prefix, _)| {
            path.strip_prefix(prefix).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with('/') || prefix.ends_with('/')
            })
        })
        .map_or(PathScope::Unnamed, |(_, rule)| rule)
}

/// Refuses `caller` what `rule` says it may not reach: `404` (the endpoint's own) for a
/// thing of another organization, `403 organization_forbidden` for a service-wide
/// endpoint. Nothing to check for a `*` principal.
///
/// # Errors
/// The refusal, or `503` when the store cannot say.
pub async fn check(
    rule: PathScope,
    caller: &Caller,
    parts: &mut Parts,
    state: &AppState,
) -> Result<(), ApiError> {
    let scope = caller.scope();
    if scope.is_all() {
        return Ok(());
    }
    let named = match rule {
        PathScope::Unnamed => return Ok(()),
        PathScope::Service => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "organization_forbidden",
                "this endpoint acts on every organization: only a principal of every organization (\"*\") may call it",
            ))
        }
        PathScope::Names(named) => named,
    };
    let hidden = |shown: &str| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            named.code,
            format!(
                "{} {} does not exist",
                named.what,
                crate::error::clip(shown)
            ),
        )
    };
    // Parameters that cannot be read (not UTF-8) name nothing this rule could check: refused
    // as missing rather than let through unchecked.
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|_| hidden(named.param))?;
    let Some((_, raw)) = params.iter().find(|(name, _)| *name == named.param) else {
        return Err(hidden(named.param));
    };
    // A parameter that is no UUID names nothing: the endpoint answers its own 404.
    let Ok(id) = raw.parse::<uuid::Uuid>() else {
        return Ok(());
    };
    match state.owners.visibility(scope, named.target, id).await? {
        Visibility::Visible | Visibility::Missing => Ok(()),
        Visibility::Hidden => Err(hidden(&id.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_every_endpoint_when_its_path_names_something_then_a_rule_covers_it() {
        for endpoint in super::super::table::endpoints() {
            let rule = path_scope(endpoint.path);
            let parameters: Vec<&str> = endpoint
                .path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            match rule {
                PathScope::Names(named) => assert!(
                    parameters.contains(&named.param),
                    "{}: {named:?} names a parameter it does not have",
                    endpoint.path
                ),
                PathScope::Service => assert!(
                    endpoint.path.starts_with("/v1/admin/")
                        || endpoint.path.starts_with("/v1/tool-policies"),
                    "{}",
                    endpoint.path
                ),
                // Only webhooks (scoped by their subscriptions) name something unchecked.
                PathScope::Unnamed => assert!(
                    parameters.is_empty() || endpoint.path.starts_with("/v1/webhooks/"),
                    "{} names {parameters:?} but no scope rule covers it",
                    endpoint.path
                ),
            }
        }
    }

    #[test]
    fn given_paths_when_ruled_then_the_first_segment_decides() {
        let target = |path| match path_scope(path) {
            PathScope::Names(n) => Some((n.target, n.param, n.code)),
            _ => None,
        };
        assert_eq!(
            target("/v1/conversations/{id}/messages/{child}"),
            Some((Target::Conversation, "id", "conversation_not_found"))
        );
        assert_eq!(
            target("/v1/sessions/{conversation_id}/pause"),
            Some((Target::Conversation, "conversation_id", "session_not_found"))
        );
        assert_eq!(
            target("/v1/turns/{turn_id}/tool-calls/{call_id}/approve"),
            Some((Target::Turn, "turn_id", "turn_not_found"))
        );
        assert_eq!(target("/v1/turns/claim"), None);
        assert_eq!(target("/v1/conversations"), None);
        assert_eq!(path_scope("/v1/admin/processors"), PathScope::Service);
        assert_eq!(path_scope("/v1/me"), PathScope::Unnamed);
    }
}
